import { randomUUID } from 'node:crypto';
import { codecs, decodeSpec } from '../../codecs/index.ts';
import { canonicalJson } from '../../store/canonical.ts';
import { ConflictError, NotFoundError, PayloadTooLargeError, ValidationError } from '../../store/errors.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { DeleteResult, ListFilter, PutResult, Ref, ResourceRecord, ResourceScope, ResourceStatus } from '../../store/types.ts';
import { changeFrames, statusFrames, type WatchFrame } from './watch.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { ID_PATTERN } from '../../codecs/shared.ts';
import type { ReconcileWaiter } from './reconcile-waiter.ts';
import type { WriteOptions, WriteOutcome } from './types.ts';
import { fieldWarnings, unknownKeys } from '../validation/field-validation.ts';

/** SPEC_CAP is the largest spec the store accepts, whatever the kind. */
export const SPEC_CAP = 256 * 1024;

/** MAX_CANONICAL_GROWTH bounds canonical JSON bytes over source bytes (see WriteOptions.bodyBytes). */
const MAX_CANONICAL_GROWTH = 6;

/** API_OWNER and API_SOURCE stamp every record written through the control plane. */
export const API_OWNER: Ref = { kind: 'daemon', id: 'daemon-control' };
export const API_SOURCE: Ref = { kind: 'daemon', id: 'system' };

/** checkKind rejects a kind with no codec (422 unknown_kind). */
export function checkKind(kind: string): void {
  if (!codecs.has(kind)) {
    throw new ValidationError(`unknown kind "${kind}"; known kinds: ${[...codecs.keys()].sort().join(', ')}`, 'unknown_kind', { kind: `unknown kind "${kind}"` });
  }
}

function checkId(id: string): void {
  if (!ID_PATTERN.test(id)) {
    throw new ValidationError(`invalid id "${id}": must match ${ID_PATTERN.source}`, 'invalid_id', { id: `must match ${ID_PATTERN.source}` });
  }
}

/** parseScope validates a scope binding: `global` has no id, `workspace` needs one. */
export function parseScope(raw: unknown, field = 'scope'): ResourceScope {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new ValidationError(`${field} must be an object {kind, id?}`, 'invalid_scope', { [field]: 'must be an object {kind, id?}' });
  }
  const { kind, id } = raw as { kind?: unknown; id?: unknown };
  const k = typeof kind === 'string' ? kind.trim() : kind;
  if (k !== 'global' && k !== 'workspace') {
    throw new ValidationError(`${field}.kind must be "global" or "workspace"`, 'invalid_scope', { [`${field}.kind`]: 'must be "global" or "workspace"' });
  }
  if (id !== undefined && id !== null && typeof id !== 'string') {
    throw new ValidationError(`${field}.id must be a string`, 'invalid_scope_binding', { [`${field}.id`]: 'must be a string' });
  }
  const sid = typeof id === 'string' ? id.trim() : '';
  if (k === 'global' && sid) throw new ValidationError(`a global ${field} has no id`, 'invalid_scope_binding', { [`${field}.id`]: 'must be empty for global scope' });
  if (k === 'workspace' && !sid) throw new ValidationError(`a workspace ${field} needs the workspace id`, 'invalid_scope_binding', { [`${field}.id`]: 'is required for workspace scope' });
  return k === 'global' ? { kind: 'global' } : { kind: 'workspace', id: sid };
}

/**
 * parseSource reads the optional `source` of a PUT body: a client such as svcctl names itself (`{kind, id}`, both
 * id-shaped) so its records can be listed and pruned by source. NOTE: the `daemon` and `extension` kinds stay the
 * service's own writers'; without a source the control plane's `daemon/system` is stamped.
 */
export function parseSource(raw: unknown): Ref {
  if (raw === undefined || raw === null) return API_SOURCE;
  const { kind, id } = (typeof raw === 'object' && !Array.isArray(raw) ? raw : {}) as { kind?: unknown; id?: unknown };
  if (typeof kind !== 'string' || typeof id !== 'string' || !ID_PATTERN.test(kind) || !ID_PATTERN.test(id)) {
    throw new ValidationError(`source must be {kind, id}, each matching ${ID_PATTERN.source}`, 'invalid_source', { source: `must be {kind, id}, each matching ${ID_PATTERN.source}` });
  }
  if (kind === 'daemon' || kind === 'extension') {
    throw new ValidationError(`source kind "${kind}" is reserved for the service's own writers`, 'invalid_source', { 'source.kind': `"${kind}" is reserved` });
  }
  return { kind, id };
}

function parseVersion(raw: unknown, required: boolean): number {
  if (raw === undefined && !required) return 0;
  // NOTE: a delete without one is most often `?expected_version=` in the query, which is not read: say where it goes.
  if (raw === undefined) {
    throw new ValidationError('expected_version is required in the JSON body, e.g. {"expected_version": 3}', 'invalid_expected_version', { expected_version: 'is required (in the JSON body)' });
  }
  if (typeof raw !== 'number' || !Number.isSafeInteger(raw) || raw < 0 || (required && raw < 1)) {
    const want = required ? 'a positive integer' : 'a non-negative integer';
    throw new ValidationError(`expected_version must be ${want}`, 'invalid_expected_version', { expected_version: `must be ${want}` });
  }
  return raw;
}

/** NAME_CLAIM_MS bounds how long a write holds a unique name's claim (and how long another waits for it). */
const NAME_CLAIM_MS = 5_000;
/** RELEASE_CLAIM deletes a claim only while it is still the releasing writer's (an expired one may be another's). */
const RELEASE_CLAIM = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

/** PUT_FIELDS are the fields of a resource PUT body; any other is an unknown field (field validation). */
const PUT_FIELDS = ['scope', 'spec', 'expected_version', 'source'] as const;

/**
 * ResourceService carries out the write rules: kind and id, scope binding, codec
 * canonicalization, then the optimistic-concurrency write; the change log triggers the reconcile.
 */
export class ResourceService {
  /**
   * `referrers` names what still uses a record (e.g. the notification presets that deliver to a bridge); a delete
   * of a record something uses is 409, so nothing is left pointing at a record that is gone.
   */
  constructor(
    private readonly store: ResourceStore, private readonly waiter: ReconcileWaiter, private readonly security: SecurityPolicy,
    private readonly referrers: (kind: string, id: string) => Promise<string[]> = async () => [],
  ) {}

  /** put validates a `{scope, spec, expected_version, source?}` body and writes it as the control plane. */
  async put(kind: string, id: string, body: Record<string, unknown>, opts: WriteOptions = {}): Promise<WriteOutcome<PutResult>> {
    checkKind(kind);
    checkId(id);
    const mode = opts.fieldValidation ?? 'strict';
    // NOTE: first, so a misspelt `expected_version` or `spec` is named as such, not read as absent.
    const warnings = fieldWarnings(mode, unknownKeys(body, PUT_FIELDS));
    const scope = parseScope(body.scope);
    const expectedVersion = parseVersion(body.expected_version, false);
    const source = parseSource(body.source);
    if (body.spec === undefined) throw new ValidationError('spec is required', 'invalid_spec', { spec: 'is required' });
    const cap = Math.min(SPEC_CAP, codecs.get(kind)!.maxBytes);
    const size = opts.bodyBytes !== undefined && opts.bodyBytes * MAX_CANONICAL_GROWTH <= cap ? 0 : Buffer.byteLength(canonicalJson(body.spec));
    if (size > cap) throw new PayloadTooLargeError(`spec is ${size} bytes; the ${kind} cap is ${cap}`, 'spec_too_large', { spec: `${size} bytes > ${cap}` });
    const unknownSpec: string[] = [];
    const decoded = decodeSpec(kind, body.spec, { scope, unknownFields: unknownSpec });
    const problems = decoded.ok ? {} : Object.fromEntries(decoded.errors.map((e) => [`spec.${e.path}`.replace(/\.$/, ''), e.message]));
    warnings.push(...fieldWarnings(mode, unknownSpec.map((p) => `spec.${p}`), problems));
    if (!decoded.ok) {
      throw new ValidationError(`invalid ${kind} spec: ${Object.entries(problems).map(([k, v]) => `${k}: ${v}`).join('; ')}`, 'invalid_spec', problems);
    }
    // NOTE: before the store, so a refused write (dry run included) answers the same and changes nothing.
    this.security.admit(kind, decoded.spec, opts.role);
    await this.security.admitDestinations(kind, decoded.spec);
    const release = await this.admitName(kind, id, scope, decoded.spec);
    let res: WriteOutcome<PutResult>;
    try {
      // NOTE: not a spread: the result's `record` is a lazy getter (the stored JSON is parsed only when read).
      res = await this.store.put({ kind, id, scope, owner: API_OWNER, source, spec: decoded.spec, expectedVersion, dryRun: opts.dryRun });
    } finally {
      await release();
    }
    if (warnings.length) res.warnings = warnings;
    if (opts.waitMs === undefined || opts.dryRun) return res;
    return { ...res, reconciled: await this.waiter.wait(kind, id, res.revision, opts.waitMs) };
  }

  /**
   * admitName refuses (409 `<kind>_name_taken`, naming the holder) a spec whose unique name (Codec.uniqueName)
   * another record of the kind holds in the same scope. It returns the release of the name's claim, held from the
   * check until the write is done. NOTE: the claim makes check and write one step for concurrent writers of one
   * name; it expires by itself (NAME_CLAIM_MS) if its holder dies, and a writer waits for it at most as long.
   */
  private async admitName(kind: string, id: string, scope: ResourceScope, spec: unknown): Promise<() => Promise<void>> {
    const codec = codecs.get(kind)!;
    const name = codec.uniqueName?.(spec);
    if (name === undefined) return async () => {};
    const key = this.store.keys.nameClaim(kind, `${scope.kind}:${scope.id ?? ''}`, name);
    const token = randomUUID();
    for (const started = Date.now(); !(await this.store.redis.set(key, token, 'PX', NAME_CLAIM_MS, 'NX'));) {
      if (Date.now() - started > NAME_CLAIM_MS) throw new ConflictError(`another write is taking the ${kind} name "${name}"; try again`, 'concurrent_change', { name });
      await new Promise((r) => setTimeout(r, 10));
    }
    const release = async () => { await this.store.redis.eval(RELEASE_CLAIM, 1, key, token); };
    try {
      const holder = (await this.store.list({ kind, scope })).find((r) => r.id !== id && codec.uniqueName!(r.spec) === name);
      if (holder) {
        throw new ConflictError(`${kind} name "${name}" is already held by ${kind} "${holder.id}"${scope.id ? ` in workspace ${scope.id}` : ''}; choose another name or change that record`, `${kind.replace(/\W/g, '_')}_name_taken`, { name, held_by: holder.id });
      }
    } catch (err) {
      await release();
      throw err;
    }
    return release;
  }

  /** delete validates a `{expected_version}` body and deletes the record. */
  async delete(kind: string, id: string, body: Record<string, unknown>, opts: WriteOptions = {}): Promise<WriteOutcome<DeleteResult>> {
    checkKind(kind);
    checkId(id);
    const expectedVersion = parseVersion(body.expected_version, true);
    const users = await this.referrers(kind, id);
    if (users.length) {
      throw new ConflictError(`${kind} "${id}" is still used by ${users.join(', ')}; change or delete those first`, 'resource_in_use', { kind, id, used_by: users });
    }
    const res = await this.store.delete(kind, id, expectedVersion, opts.dryRun);
    if (opts.waitMs === undefined || opts.dryRun) return res;
    return { ...res, reconciled: await this.waiter.wait(kind, id, res.revision, opts.waitMs) };
  }

  /** get returns a record or a 404. */
  async get(kind: string, id: string) {
    checkKind(kind);
    const rec = await this.store.get(kind, id);
    if (!rec) throw new NotFoundError(`${kind} "${id}" does not exist`, 'resource_not_found', { kind, id });
    return rec;
  }

  /** status returns a record's reconcile status (zero values before its first reconcile). */
  async status(kind: string, id: string) {
    await this.get(kind, id);
    return (await this.store.getStatus(kind, id)) ?? { observed_version: 0, conditions: [], last_reconciled_at: '', last_error: '' };
  }

  /** waitReconciled resolves true once the record's reconcile observed `revision` (a change-log revision), false at the timeout. */
  async waitReconciled(kind: string, id: string, revision: number, timeoutMs: number): Promise<boolean> {
    return this.waiter.wait(kind, id, revision, timeoutMs);
  }

  /**
   * list returns the records matching the filter, in (kind, id) order; with `status`, each carries its status (null
   * before its first reconcile), read with one MGET per 1,000 records instead of a read per record.
   */
  async list(filter: ListFilter, opts: { status?: boolean } = {}): Promise<(ResourceRecord & { status?: ResourceStatus | null })[]> {
    if (filter.kind) checkKind(filter.kind);
    const records = await this.store.list(filter);
    if (!opts.status) return records;
    const statuses = await this.store.statusesOf(records);
    return records.map((r, i) => ({ ...r, status: statuses[i] ?? null }));
  }

  /**
   * changes follows the change log after revision `from`, else after the head read now (watch.ts changeFrames).
   * NOTE: the filter is checked and the head read before the caller's stream opens, so a watch refuses the filters
   * a list refuses, and a write made once the stream is open is in it.
   */
  async changes(filter: ListFilter, from: number | undefined, signal: AbortSignal): Promise<AsyncGenerator<WatchFrame>> {
    if (filter.kind) checkKind(filter.kind);
    return changeFrames(this.store, filter, from ?? (await this.store.revision()), signal);
  }

  /** statuses follows the reconcile statuses of one kind, or of one record (watch.ts statusFrames); `kind` is checked at the call. */
  statuses(kind: string | undefined, only: string | undefined, signal: AbortSignal): AsyncGenerator<WatchFrame> {
    if (!kind) throw new ValidationError('kind is required', 'invalid_filter', { kind: 'is required' });
    checkKind(kind);
    return statusFrames(this.store, this.waiter, kind, only, signal);
  }
}
