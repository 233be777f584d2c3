import { minimatch } from 'minimatch';
import { fieldsNamed } from './spec-fields.ts';
import type { VaultRefResolver } from '../vault/types.ts';
import { parseVaultRef } from '../../codecs/vault-ref.ts';
import { KnownSecrets, type VaultValues } from './known-secrets.ts';
import { SecretMask } from './secret-mask.ts';
import type { SecretRef } from './types.ts';

/** INHERITED names the service's variables a child process starts with; everything else it must be given. */
const INHERITED = ['PATH', 'HOME', 'LANG', 'TERM', 'TMPDIR', 'TZ'];

/**
 * childEnv is the whole environment of a process the service starts (agent, MCP server, hook): the inherited
 * basics (PATH, HOME, LANG, LC_*, TERM, TMPDIR, TZ), then what its record declares (`env`, resolved
 * `secret_env`), then the SVC_* identity the service hands it. NOTE: never the service's own configuration
 * (REDIS_URL, AUTH_*, tokens): a child with REDIS_URL could read and write the whole store.
 */
export function childEnv(declared: Record<string, string> = {}, identity: Record<string, string> = {}, from: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  // NOTE: the names first, then only the values wanted: every value read from process.env is a call into the C++
  // side, and a pod's environment can hold hundreds of variables (35 here: 37–58 µs per call reading all, 20–28 not).
  for (const k of Object.keys(from)) {
    if (!INHERITED.includes(k) && !k.startsWith('LC_')) continue;
    const v = from[k];
    if (v !== undefined) env[k] = v;
  }
  return { ...env, ...declared, ...identity };
}

/** secretRefsOf lists every `secret_env` entry of a spec, at any depth (records and the declarations they embed). */
export function secretRefsOf(spec: unknown): SecretRef[] {
  return fieldsNamed(spec, 'secret_env').flatMap(({ path, value }) =>
    value && typeof value === 'object' && !Array.isArray(value)
      ? Object.entries(value).filter(([, ref]) => typeof ref === 'string').map(([name, ref]) => ({ path: `${path}.${name}`, ref: ref as string }))
      : []);
}

/** ResolvedSecrets is the outcome of resolving a `secret_env` map: the values, and the names that did not resolve. */
export interface ResolvedSecrets {
  env: Record<string, string>;
  /** Variable names whose ref does not resolve: an unset variable, a vault ref with no secret (or none that opens). */
  missing: string[];
  /** Variable names whose ref may not be used: an `env:` ref outside SECRET_ENV_ALLOWLIST, a malformed vault ref. */
  refused: string[];
  /** Why each missing name's ref did not resolve, by variable name (names and refs only, never a value). */
  problems: Record<string, string>;
  /** The resolved values, to redact wherever they could surface (events, logs, tool results). */
  values: string[];
}

/** MIN_SECRET_LENGTH: shorter values are not masked as literals (masking "1" or "on" would garble every text). */
const MIN_SECRET_LENGTH = 4;
/** MASKED_LENGTH is the shortest resolved value logs mask (8 bytes or more); MAX_MASKED bounds how many are kept. */
const MASKED_LENGTH = 8;
const MAX_MASKED = 10_000;

/**
 * SecretRefs resolves secret refs: `env:NAME` only for names matching one of SECRET_ENV_ALLOWLIST's patterns
 * (default `SVC_SECRET_*`), so a record's author cannot hand the service's own configuration (REDIS_URL, token
 * files) to a process of their choosing; `vault:<namespace>/<path>` from the vault (runtime/vault/), once the
 * process attached it.
 */
export class SecretRefs {
  /** The values resolved in this process that logs mask (mask). */
  private readonly resolved = new Set<string>();
  /** The mask of `resolved`, built on first use after a value was added (undefined until then). */
  private resolvedMask?: SecretMask;
  private vault?: VaultRefResolver;
  /** The process's masking set: these values, the allowlisted variables and the vault's values (known-secrets.ts). */
  readonly known: KnownSecrets;

  constructor(private readonly allowlist: readonly string[], private readonly from: NodeJS.ProcessEnv = process.env) {
    this.known = new KnownSecrets(this);
  }

  /**
   * attachVault makes `vault:` refs resolve and adds the vault's values to the masking set. NOTE: not a constructor
   * option because the vault reads Redis, which the process connects after its security policy exists
   * (runtime/process/service.ts); until then they are missing.
   */
  attachVault(vault: VaultRefResolver & VaultValues): void {
    this.vault = vault;
    this.known.attachVault(vault);
  }

  /** refusal says why a ref may not be used (undefined when it may). */
  refusal(ref: string): string | undefined {
    if (ref.startsWith('vault:')) {
      const p = parseVaultRef(ref);
      return p.ok ? undefined : `${ref}: ${p.problem}`;
    }
    const name = ref.startsWith('env:') ? ref.slice(4) : '';
    if (!name) return 'must be env:NAME or vault:<namespace>/<path>';
    return this.allowlist.some((p) => minimatch(name, p)) ? undefined : `env:${name} is outside SECRET_ENV_ALLOWLIST (${this.allowlist.join(', ') || 'empty'})`;
  }

  /**
   * values are the values of every variable an `env:` ref may resolve (names under SECRET_ENV_ALLOWLIST): what a
   * support bundle masks as literals, whether or not a record uses them today.
   */
  values(): string[] {
    return Object.entries(this.from)
      .filter(([name, v]) => v !== undefined && v.length >= MIN_SECRET_LENGTH && this.allowlist.some((p) => minimatch(name, p)))
      .map(([, v]) => v!);
  }

  /**
   * resolve reads each ref (variable name → ref); a refused or unresolved one is reported by its variable name and
   * ref, never by its value. Vault refs are read in one batch (one GET of the vault revision while it is cached).
   */
  async resolve(refs: Record<string, string> = {}): Promise<ResolvedSecrets> {
    const out: ResolvedSecrets = { env: {}, missing: [], refused: [], problems: {}, values: [] };
    const entries = Object.entries(refs);
    const vaultRefs = entries.filter(([, ref]) => ref.startsWith('vault:') && !this.refusal(ref)).map(([, ref]) => ref);
    const fromVault = vaultRefs.length ? await this.vault?.resolveRefs(vaultRefs) : undefined;
    for (const [name, ref] of entries) {
      if (this.refusal(ref)) { out.refused.push(name); continue; }
      let value: string | undefined;
      if (ref.startsWith('env:')) {
        value = this.from[ref.slice(4)];
        if (value === undefined) out.problems[name] = `${ref} is not set`;
      } else {
        const r = fromVault?.get(ref);
        if (r && 'value' in r) value = r.value;
        else out.problems[name] = r?.problem ?? `${ref}: the vault is not available in this process`;
      }
      if (value === undefined) { out.missing.push(name); continue; }
      out.env[name] = value;
      if (value.length >= MIN_SECRET_LENGTH) out.values.push(value);
      if (value.length >= MASKED_LENGTH && this.resolved.size < MAX_MASKED && !this.resolved.has(value)) {
        this.resolved.add(value);
        this.resolvedMask = undefined;
      }
    }
    return out;
  }

  /** resolvedValues are the values this process has resolved (8 bytes or more): what `mask` masks. */
  get resolvedValues(): ReadonlySet<string> {
    return this.resolved;
  }

  /**
   * mask replaces every value this process has resolved (8 bytes or more), and its base64 and URL encodings, in a
   * text with `[REDACTED]` (KnownSecrets adds the vault's values and the allowlisted variables to these).
   */
  mask(text: string): string {
    this.resolvedMask ??= new SecretMask(this.resolved);
    return this.resolvedMask.text(text);
  }
}
