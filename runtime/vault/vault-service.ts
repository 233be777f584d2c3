import type { Logger } from 'pino';
import type { EventBus } from '../../store/event-bus.ts';
import { InputError, NotFoundError, UnavailableError } from '../../store/errors.ts';
import type { VaultHostStore } from '../../store/vault-hosts.ts';
import type { StoredVaultMeta, VaultStore } from '../../store/vault-store.ts';
import { keyIdOf, open, reseal, seal, VaultOpenError } from './envelope.ts';
import { DERIVED_KEY_ID, type VaultKeyring } from './keys.ts';
import { parseVaultPrefix, parseVaultRef, VAULT_NAMESPACES } from '../../codecs/vault-ref.ts';
import { parseEgressAllowlist } from '../security/egress.ts';
import type { VaultValues } from '../security/known-secrets.ts';
import type { VaultHostLists } from '../security/secret-destinations.ts';
import type { RotationResult, VaultKeyStatus, VaultRefResolver, VaultResolution, VaultSecretMeta, VaultStatus } from './types.ts';

/** MAX_VALUE_BYTES is the largest secret value the vault stores. */
export const MAX_VALUE_BYTES = 64 * 1024;
/** MASK_MIN_BYTES: resolved values this long or longer are masked wherever the service writes (shorter ones would mask ordinary words). */
export const MASK_MIN_BYTES = 8;

/** PUT_FIELDS are the fields of a secret write (unknown ones are the route's field validation: api/body-rule.ts). */
export const PUT_FIELDS = ['ref', 'secret_value', 'kind', 'allowed_hosts'];
/** MAX_ALLOWED_HOSTS bounds a secret's allowed_hosts list. */
const MAX_ALLOWED_HOSTS = 64;
const KIND = /^[a-z0-9][a-z0-9_.-]{0,63}$/;
const PAGE = 500;

/** VaultServiceOptions configures a VaultService. */
export interface VaultServiceOptions {
  store: VaultStore;
  /** The process's keys; without them every route answers 503 and `vault:` refs do not resolve. */
  keyring?: VaultKeyring;
  /** Where the keys came from, for status (`SVC_VAULT_KEYS`, `SVC_VAULT_KEY_FILE`, the default file's path). */
  keySource?: string;
  bus?: EventBus;
  logger: Logger;
  /**
   * onChange is called after a secret is written or deleted, to re-reconcile the records that use its ref.
   * NOTE: a failure is logged, not answered: the write stands and the resync re-reconciles them anyway.
   */
  onChange?: (ref: string) => Promise<void>;
  /** Where each secret's allowed_hosts is kept; without it a write naming allowed_hosts is refused. */
  hosts?: VaultHostStore;
  now?: () => Date;
}

/**
 * VaultService is the vault: write-only secrets addressed by ref, sealed with envelope
 * encryption (envelope.ts) before they reach Redis, listed and described by metadata only, re-sealed under the
 * first key by rotation, and resolved for `vault:` refs through a small in-process cache that holds until the
 * vault's revision moves (one GET per resolution while nothing changed).
 */
export class VaultService implements VaultRefResolver, VaultValues, VaultHostLists {
  private cache = new Map<string, VaultResolution>();
  private cacheRev = '';

  constructor(private readonly o: VaultServiceOptions) {}

  private keys(): VaultKeyring {
    if (!this.o.keyring) {
      throw new UnavailableError(
        'the vault has no key-encryption key: set SVC_VAULT_KEYS (name=base64 of 32 bytes, e.g. `k1=$(openssl rand -base64 32)`) or SVC_VAULT_KEY_FILE (a file of such lines, mode 0600)',
        'vault_key_missing', { set: ['SVC_VAULT_KEYS', 'SVC_VAULT_KEY_FILE'] },
      );
    }
    return this.o.keyring;
  }

  private now(): string {
    return (this.o.now?.() ?? new Date()).toISOString();
  }

  /** put writes one secret from a request body `{ref, secret_value, kind?, allowed_hosts?}`; 400 naming a bad field. */
  async put(body: unknown): Promise<VaultSecretMeta> {
    const ring = this.keys();
    const input = (body && typeof body === 'object' && !Array.isArray(body) ? body : {}) as Record<string, unknown>;
    const problems: Record<string, string> = {};
    const ref = typeof input.ref === 'string' ? input.ref.trim() : '';
    const parsed = parseVaultRef(ref);
    if (typeof input.ref !== 'string' || !ref) problems.ref = 'is required: vault:<namespace>/<path>';
    else if (!parsed.ok) problems.ref = parsed.problem;
    const value = input.secret_value;
    if (typeof value !== 'string' || value === '') problems.secret_value = 'is required and must be a non-empty string';
    else if (Buffer.byteLength(value) > MAX_VALUE_BYTES) problems.secret_value = `must be at most ${MAX_VALUE_BYTES} bytes`;
    const kind = input.kind === undefined || input.kind === null ? '' : typeof input.kind === 'string' ? input.kind.trim() : undefined;
    if (kind === undefined || (kind && !KIND.test(kind))) problems.kind = 'must be 1-64 characters of a-z, 0-9, "_", "." or "-" ("" keeps the stored kind)';
    const hosts = allowedHostsOf(input.allowed_hosts, Boolean(this.o.hosts));
    if (typeof hosts === 'string') problems.allowed_hosts = hosts;
    if (Object.keys(problems).length) {
      throw new InputError(`invalid vault secret: ${Object.entries(problems).map(([k, v]) => `${k}: ${v}`).join('; ')}`, 'vault_invalid_input', problems);
    }
    // NOTE: a replica that lacks keys in use would seal under a key the others lack in turn: it writes nothing.
    const missing = await this.missingKeys();
    if (missing.ids.length) {
      throw new UnavailableError(`this process cannot write to the vault: ${missingWords(missing)}`, 'vault_keys_missing', { missing_keys: missing.ids, undecryptable: missing.secrets });
    }
    // NOTE: the list is written before the value it restricts, so no reader sees a new value without its list.
    if (Array.isArray(hosts)) await this.o.hosts!.set(ref, hosts);
    const { created, meta } = await this.o.store.put(ref, seal(ring, ref, value as string), kind ?? '', this.now());
    const secret = view(ref, meta, Array.isArray(hosts) ? hosts : (await this.o.hosts?.of([ref]))?.[0]);
    this.o.logger.info({ ref, created }, 'vault secret written');
    await this.o.bus?.publish({ type: 'vault.secret.written', source: 'vault', summary: `vault secret ${ref} ${created ? 'created' : 'replaced'}`, data: { ref, namespace: secret.namespace, kind: meta.kind, created } });
    await this.changed(ref);
    return secret;
  }

  /** metadata describes one secret; 400 for a bad ref, 404 when it holds none. */
  async metadata(ref: string | undefined): Promise<VaultSecretMeta> {
    this.keys();
    const r = checkedRef(ref);
    const meta = await this.o.store.meta(r);
    if (!meta) throw notFound(r);
    return view(r, meta, (await this.o.hosts?.of([r]))?.[0]);
  }

  /** list describes the secrets under a prefix (whole segments) and in a namespace, in ref order. */
  async list(q: { prefix?: string; namespace?: string }): Promise<VaultSecretMeta[]> {
    this.keys();
    let prefix = '';
    if (q.namespace !== undefined) {
      if (!(VAULT_NAMESPACES as readonly string[]).includes(q.namespace)) throw new InputError(`query parameter "namespace" must be one of ${VAULT_NAMESPACES.join(', ')}`, 'invalid_query', { namespace: 'is not a vault namespace' });
      prefix = `vault:${q.namespace}/`;
    }
    if (q.prefix !== undefined) {
      const p = parseVaultPrefix(q.prefix);
      if (!p.ok) throw new InputError(`query parameter "prefix" ${p.problem}`, 'invalid_query', { prefix: p.problem });
      if (prefix && !p.value.startsWith(prefix)) return [];
      prefix = p.value;
    }
    const out: VaultSecretMeta[] = [];
    for (let after = ''; ;) {
      const page = await this.o.store.refsPage(prefix, after, PAGE);
      const lists = await this.o.hosts?.of(page.map((p) => p.ref));
      page.forEach(({ ref, meta }, i) => out.push(view(ref, meta, lists?.[i])));
      if (page.length < PAGE) return out;
      after = page[page.length - 1].ref;
    }
  }

  /** delete removes one secret; 400 for a bad ref, 404 when it holds none. */
  async delete(ref: string | undefined): Promise<void> {
    this.keys();
    const r = checkedRef(ref);
    if (!(await this.o.store.delete(r))) throw notFound(r);
    await this.o.hosts?.delete(r);
    this.o.logger.info({ ref: r }, 'vault secret deleted');
    await this.o.bus?.publish({ type: 'vault.secret.deleted', source: 'vault', outcome: 'warning', summary: `vault secret ${r} deleted`, data: { ref: r, namespace: r.slice(6, r.indexOf('/')) } });
    await this.changed(r);
  }

  /**
   * rotate re-seals every data key not sealed by the first key, in pages of refs, each page's rewrite one
   * compare-and-set script (a secret changed meanwhile is left to its writer). NOTE: resumable by design: a run
   * killed half-way leaves every secret sealed by the old key or the new one, both configured, so all still open;
   * the next run skips what is current and finishes the rest.
   */
  async rotate(): Promise<RotationResult> {
    const ring = this.keys();
    const r: RotationResult = { key_id: ring.primary.id, scanned: 0, rotated: 0, already_current: 0, changed_during_rotation: 0, unreadable: 0, unreadable_refs: [] };
    for (let after = ''; ;) {
      const refs = await this.o.store.refsAfter(after, PAGE);
      if (!refs.length) break;
      after = refs[refs.length - 1];
      const sealed = await this.o.store.sealedOf(refs);
      const rewrites: { ref: string; expected: string; sealed: string }[] = [];
      refs.forEach((ref, i) => {
        const s = sealed[i];
        if (s === null) { r.changed_during_rotation++; return; }
        r.scanned++;
        if (keyIdOf(s) === ring.primary.id) { r.already_current++; return; }
        try {
          rewrites.push({ ref, expected: s, sealed: reseal(ring, ref, s) });
        } catch (err) {
          if (!(err instanceof VaultOpenError)) throw err;
          r.unreadable++;
          if (r.unreadable_refs.length < 100) r.unreadable_refs.push(ref);
        }
      });
      const n = await this.o.store.reseal(rewrites);
      r.rotated += n;
      r.changed_during_rotation += rewrites.length - n;
    }
    this.o.logger.info({ ...r, unreadable_refs: undefined }, 'vault rotation finished');
    await this.o.bus?.publish({
      type: 'vault.secret.rotated', source: 'vault', outcome: r.unreadable ? 'warning' : 'success',
      summary: `vault data keys re-sealed under key ${r.key_id}: ${r.rotated} rotated, ${r.already_current} already current, ${r.unreadable} unreadable`,
      data: { ...r },
    });
    return r;
  }

  /**
   * status lists the key ids configured and in use, how many secrets each seals, and the ids in use this process
   * lacks (missing_keys: the secrets it cannot open).
   */
  async status(): Promise<VaultStatus> {
    const ring = this.keys();
    const [use, secrets] = await Promise.all([this.o.store.keyUse(), this.o.store.count()]);
    const keys: VaultKeyStatus[] = ring.keys.map((k) => ({ id: k.id, name: k.name, configured: true, sealing: k.id === ring.primary.id, secrets: use[k.id] ?? 0 }));
    for (const id of Object.keys(use).filter((id) => !ring.get(id)).sort()) {
      const legacy = !DERIVED_KEY_ID.test(id);
      const configured = Boolean(ring.opener(id));
      keys.push({ id, ...(configured ? { name: id } : {}), configured, ...(legacy ? { legacy } : {}), sealing: false, secrets: use[id] });
    }
    const missing = keys.filter((k) => !k.configured && k.secrets > 0);
    return {
      key_source: this.o.keySource ?? '', secrets, keys, rotation_needed: keys.some((k) => !k.sealing && k.secrets > 0),
      missing_keys: missing.map((k) => k.id), undecryptable: missing.reduce((n, k) => n + k.secrets, 0),
    };
  }

  /** missingKeys lists the key ids that seal secrets in Redis and that this process lacks, and how many secrets they seal. */
  private async missingKeys(): Promise<{ ids: string[]; secrets: number }> {
    const missing = Object.entries(await this.o.store.keyUse()).filter(([id]) => !this.o.keyring?.opener(id)).sort(([a], [b]) => a.localeCompare(b));
    return { ids: missing.map(([id]) => id), secrets: missing.reduce((n, [, c]) => n + c, 0) };
  }

  /**
   * readiness is 'ok' when this process holds a key for every key id that seals a secret in Redis, else why not.
   * NOTE: a replica with other keys (its own DATA_DIR's default key, a stale Secret) would fail every session start
   * that resolves a secret it cannot open; not ready, the load balancer sends it nothing.
   */
  async readiness(): Promise<string> {
    try {
      const missing = await this.missingKeys();
      return missing.ids.length ? missingWords(missing) : 'ok';
    } catch (err) {
      return `key use unreadable: ${(err as Error).message}`;
    }
  }

  /**
   * resolveRefs resolves vault refs (SecretRefs' `vault:` half). NOTE: the cache holds each ref's outcome until
   * the vault revision moves: a resolution then costs one GET; a write anywhere in the vault clears it.
   */
  async resolveRefs(refs: readonly string[]): Promise<Map<string, VaultResolution>> {
    const out = new Map<string, VaultResolution>();
    if (!refs.length) return out;
    if (!this.o.keyring) {
      for (const ref of refs) out.set(ref, { problem: 'the vault has no key (set SVC_VAULT_KEYS or SVC_VAULT_KEY_FILE)' });
      return out;
    }
    const rev = await this.o.store.revision();
    if (rev !== this.cacheRev) {
      this.cache = new Map();
      this.cacheRev = rev;
    }
    const cache = this.cache;
    const misses = [...new Set(refs.filter((ref) => !cache.has(ref)))];
    if (misses.length) {
      const sealed = await this.o.store.sealedOf(misses);
      misses.forEach((ref, i) => cache.set(ref, this.opened(ref, sealed[i])));
    }
    for (const ref of refs) out.set(ref, cache.get(ref)!);
    return out;
  }

  private opened(ref: string, sealed: string | null): VaultResolution {
    if (sealed === null) return { problem: `${ref} does not exist in the vault` };
    try {
      return { value: open(this.o.keyring!, ref, sealed) };
    } catch (err) {
      if (!(err instanceof VaultOpenError)) throw err;
      return { problem: `${ref} does not open: ${err.message}` };
    }
  }

  /** readable says whether this process can open the vault's secrets (it has a key). */
  get readable(): boolean {
    return Boolean(this.o.keyring);
  }

  /** revision is the vault's write counter: it moves whenever a secret is written, replaced or deleted. */
  revision(): Promise<string> {
    return this.o.store.revision();
  }

  /** changeMark is VaultStore.revisionMark: the same while no write or delete was announced. */
  changeMark(): string | undefined {
    return this.o.store.revisionMark();
  }

  /**
   * hostListsOf answers where secrets may be sent (SecretDestinations): per ref, undefined when it holds no secret,
   * null when its secret has no allowed_hosts, else the list. NOTE: read each time (two small reads): a narrowed
   * list holds from the next send on.
   */
  async hostListsOf(refs: readonly string[]): Promise<Map<string, string[] | null | undefined>> {
    const out = new Map<string, string[] | null | undefined>();
    if (!refs.length) return out;
    const list = [...refs];
    const [sealed, hosts] = await Promise.all([this.o.store.sealedOf(list), this.o.hosts?.of(list)]);
    list.forEach((ref, i) => out.set(ref, sealed[i] === null ? undefined : hosts?.[i] ?? null));
    return out;
  }

  /**
   * values returns every value the vault resolves of MASK_MIN_BYTES or more, for masking what the service writes
   * (KnownSecrets: the bus, memory writes, logs, support bundles). It never leaves the process. NOTE: shorter values
   * would mask ordinary words.
   */
  async values(): Promise<string[]> {
    if (!this.o.keyring) return [];
    const out = new Set<string>();
    for (let after = ''; ;) {
      const refs = await this.o.store.refsAfter(after, PAGE);
      if (!refs.length) break;
      after = refs[refs.length - 1];
      for (const r of (await this.resolveRefs(refs)).values()) if ('value' in r && Buffer.byteLength(r.value) >= MASK_MIN_BYTES) out.add(r.value);
    }
    return [...out];
  }

  private async changed(ref: string): Promise<void> {
    try {
      await this.o.onChange?.(ref);
    } catch (err) {
      this.o.logger.warn({ ref, err: (err as Error).message }, 'could not re-reconcile the records that use a vault secret; the resync will');
    }
  }
}

function missingWords(missing: { ids: string[]; secrets: number }): string {
  return `${missing.secrets} vault secret(s) are sealed by key(s) this process lacks (${missing.ids.join(', ')}): give every replica the same SVC_VAULT_KEYS or SVC_VAULT_KEY_FILE (a key's id is the SHA-256 of its bytes)`;
}

function view(ref: string, meta: StoredVaultMeta, hosts?: string[]): VaultSecretMeta {
  return {
    ref, namespace: ref.slice(6, ref.indexOf('/')), ...(meta.kind ? { kind: meta.kind } : {}), ...(hosts?.length ? { allowed_hosts: hosts } : {}),
    present: true, created_at: meta.created_at, updated_at: meta.updated_at,
  };
}

/**
 * allowedHostsOf reads a write's `allowed_hosts`: undefined (absent or null: the stored list is kept), the list
 * (`[]` removes the binding), or why it is not one.
 */
function allowedHostsOf(v: unknown, stored: boolean): string[] | string | undefined {
  if (v === undefined || v === null) return undefined;
  if (!stored) return 'cannot be kept by this process';
  if (!Array.isArray(v) || !v.every((h) => typeof h === 'string')) return 'must be a list of host names, *.domain wildcards, addresses or CIDRs';
  if (v.length > MAX_ALLOWED_HOSTS) return `must list at most ${MAX_ALLOWED_HOSTS} hosts`;
  const hosts = [...new Set((v as string[]).map((h) => h.trim().toLowerCase()))].filter(Boolean);
  const { problems } = parseEgressAllowlist(hosts);
  return problems.length ? problems.map((p) => p.replace(/^EGRESS_ALLOWLIST entry/, 'entry')).join('; ') : hosts;
}

function checkedRef(ref: string | undefined): string {
  if (!ref) throw new InputError('query parameter "ref" is required: vault:<namespace>/<path>', 'vault_invalid_input', { ref: 'is required' });
  const p = parseVaultRef(ref);
  if (!p.ok) throw new InputError(`query parameter "ref" ${p.problem}`, 'vault_invalid_input', { ref: p.problem });
  return ref;
}

function notFound(ref: string): NotFoundError {
  return new NotFoundError(`vault secret ${ref} does not exist`, 'vault_secret_not_found', { ref });
}
