import type { Redis } from 'ioredis';
import { canonicalJson } from './canonical.ts';
import { ConflictError, NotFoundError, ValidationError } from './errors.ts';
import { Keys, member, splitMember } from './keys.ts';
import type { RegistryWatch } from './registry-watch.ts';
import { defineScripts, type ScriptCommands } from './scripts.ts';
import type {
  ChangeEvent, DeleteResult, ListFilter, PutRequest, PutResult, Ref, ResourceRecord, ResourceStatus,
} from './types.ts';

/** ResourceStoreOptions configures a ResourceStore. */
export interface ResourceStoreOptions {
  redis: Redis;
  keys?: Keys;
  /** Approximate number of change-log entries kept for watch resumption and the relay. */
  changeLogRetention?: number;
}

/**
 * ResourceStore keeps resource records in Redis. Every mutation is one Lua script that also maintains the
 * indexes, the change log and the global revision, so a crash can never leave them out of step.
 */
export class ResourceStore {
  readonly redis: Redis & ScriptCommands;
  readonly keys: Keys;
  readonly retention: number;
  /**
   * registryWatch, when the composition root started one, lets every RegistryCache of this store skip the revision
   * check while no registry changed (store/registry-watch.ts).
   */
  registryWatch?: RegistryWatch;

  constructor(opts: ResourceStoreOptions) {
    this.redis = opts.redis as Redis & ScriptCommands;
    this.keys = opts.keys ?? new Keys();
    this.retention = opts.changeLogRetention ?? 100_000;
    defineScripts();
  }

  /** put creates (expectedVersion 0) or updates (current version) a record; see put-record-3.lua. */
  async put(req: PutRequest): Promise<PutResult> {
    const { kind, id, scope, owner, source } = req;
    const scopeId = scope.kind === 'workspace' ? (scope.id ?? '') : '';
    const res = await this.redis.putRecord(
      this.keys.record(kind, id), this.keys.revision, this.keys.changes,
      this.keys.r, kind, id, req.expectedVersion,
      scope.kind === 'workspace' ? refJson(scope.kind, scopeId) : JSON.stringify({ kind: scope.kind }),
      refJson(owner.kind, owner.id), refJson(source.kind, source.id),
      canonicalJson(req.spec),
      `${scope.kind}:${scopeId}`, `${owner.kind}:${owner.id}`, `${source.kind}:${source.id}`,
      new Date().toISOString(), this.retention, scopeId, req.dryRun ? '1' : '0',
    );
    switch (res[0]) {
      case 1:
        return putResult(res[1] as string, res[2] === 1, res[3] === 1, Number(res[4]));
      case -1:
        throw versionConflict(kind, id, req.expectedVersion, Number(res[1]));
      case -2:
        throw new NotFoundError(`${kind} "${id}" does not exist; create it with expected_version 0`, 'resource_not_found', { kind, id, expected_version: req.expectedVersion });
      case -3: {
        const ownedBy = JSON.parse(res[1] as string);
        throw new ConflictError(
          `${kind} "${id}" is owned by ${ownedBy.kind} "${ownedBy.id}"; change it through its owner`,
          'resource_owned', { kind, id, owner: ownedBy },
        );
      }
      case -4:
        throw new ValidationError(`workspace "${scopeId}" does not exist`, 'invalid_scope_binding', { 'scope.id': `workspace "${scopeId}" does not exist` });
      default:
        throw new Error(`put-record returned unknown code ${res[0]}`);
    }
  }

  /** delete removes a record at its current version; see delete-record-4.lua. */
  async delete(kind: string, id: string, expectedVersion: number, dryRun = false): Promise<DeleteResult> {
    const res = await this.redis.deleteRecord(
      this.keys.record(kind, id), this.keys.revision, this.keys.changes, this.keys.status(kind, id),
      this.keys.r, kind, id, expectedVersion, this.retention, dryRun ? '1' : '0',
    );
    if (res[0] === 1) return { record: JSON.parse(res[1] as string), revision: Number(res[2]) };
    if (res[0] === -1) throw versionConflict(kind, id, expectedVersion, Number(res[1]));
    throw new NotFoundError(`${kind} "${id}" does not exist`, 'resource_not_found', { kind, id });
  }

  /** get returns a record, or undefined when it does not exist. */
  async get(kind: string, id: string): Promise<ResourceRecord | undefined> {
    const json = await this.redis.hget(this.keys.record(kind, id), 'json');
    return json ? JSON.parse(json) : undefined;
  }

  /**
   * snapshot reads a record, its last status and the global revision atomically (one script): every write up
   * to that revision is reflected in what was read. Controllers report the revision as what they observed.
   */
  async snapshot(kind: string, id: string): Promise<{ record?: ResourceRecord; revision: number; status?: ResourceStatus }> {
    const [rev, json, status] = await this.redis.readSnapshot(this.keys.revision, this.keys.record(kind, id), this.keys.status(kind, id));
    return { record: json ? JSON.parse(json) : undefined, revision: Number(rev ?? 0), status: status ? JSON.parse(status) : undefined };
  }

  /** list returns the records matching every given filter, ordered by (kind, id). */
  async list(filter: ListFilter = {}): Promise<ResourceRecord[]> {
    const { key, prefix } = this.pickIndex(filter);
    let members: string[];
    if (key === this.keys.indexKind(filter.kind ?? '')) {
      members = (await this.redis.zrange(key, '-', '+', 'BYLEX')).map((id) => member(filter.kind!, id));
    } else {
      members = await this.redis.zrange(key, prefix ? `[${prefix}` : '-', prefix ? `[${prefix}\xff` : '+', 'BYLEX');
    }
    const out: ResourceRecord[] = [];
    const limit = filter.limit && filter.limit > 0 ? filter.limit : Infinity;
    // NOTE: read in pages so a filtered list with a small limit does not load the whole index.
    for (let i = 0; i < members.length && out.length < limit; i += 500) {
      const page = members.slice(i, i + 500);
      const pipe = this.redis.pipeline();
      for (const m of page) { const { kind, id } = splitMember(m); pipe.hget(this.keys.record(kind, id), 'json'); }
      for (const [, json] of (await pipe.exec()) ?? []) {
        if (typeof json !== 'string') continue;
        const rec = JSON.parse(json) as ResourceRecord;
        if (matches(rec, filter)) out.push(rec);
        if (out.length >= limit) break;
      }
    }
    return out;
  }

  /** keysOf lists the ids of every record of a kind, in id order. */
  async idsOf(kind: string): Promise<string[]> {
    return this.redis.zrange(this.keys.indexKind(kind), '-', '+', 'BYLEX');
  }

  private pickIndex(f: ListFilter): { key: string; prefix?: string } {
    const prefix = f.kind ? `${f.kind} ` : undefined;
    if (f.scope) return { key: this.keys.index('scope', f.scope.kind, f.scope.id ?? ''), prefix };
    if (f.owner) return { key: this.keys.index('owner', f.owner.kind, f.owner.id), prefix };
    if (f.source) return { key: this.keys.index('source', f.source.kind, f.source.id), prefix };
    if (f.kind) return { key: this.keys.indexKind(f.kind) };
    return { key: this.keys.indexAll };
  }

  /** getStatus returns a record's reconcile status, or undefined before its first reconcile. */
  async getStatus(kind: string, id: string): Promise<ResourceStatus | undefined> {
    const json = await this.redis.get(this.keys.status(kind, id));
    return json ? JSON.parse(json) : undefined;
  }

  /** statusesOf reads many records' statuses with MGETs (undefined before a record's first reconcile), in order. */
  async statusesOf(refs: { kind: string; id: string }[]): Promise<(ResourceStatus | undefined)[]> {
    const out: (ResourceStatus | undefined)[] = [];
    for (let i = 0; i < refs.length; i += 1000) {
      const page = refs.slice(i, i + 1000);
      if (!page.length) break;
      for (const json of await this.redis.mget(page.map((r) => this.keys.status(r.kind, r.id)))) out.push(json ? JSON.parse(json) : undefined);
    }
    return out;
  }

  /** writeStatus records a reconcile's outcome (undefined removes it, for a deleted record). */
  async writeStatus(kind: string, id: string, status: ResourceStatus | undefined, observedRevision: number): Promise<void> {
    await this.redis.writeStatus(
      this.keys.record(kind, id), this.keys.status(kind, id), this.keys.observed,
      status ? JSON.stringify(status) : '', member(kind, id), observedRevision, this.keys.reconciled,
    );
  }

  /** observedRevision is the global revision the last reconcile of a key read it at (0 if never). */
  async observedRevision(kind: string, id: string): Promise<number> {
    return Number((await this.redis.hget(this.keys.observed, member(kind, id))) ?? 0);
  }

  /** observedRevisions is observedRevision of each key, in one read. */
  async observedRevisions(keys: readonly Ref[]): Promise<number[]> {
    if (!keys.length) return [];
    const seen = await this.redis.hmget(this.keys.observed, ...keys.map((k) => member(k.kind, k.id)));
    return seen.map((v) => Number(v ?? 0));
  }

  /** revision is the current global revision. */
  async revision(): Promise<number> {
    return Number((await this.redis.get(this.keys.revision)) ?? 0);
  }

  /** firstRetainedRevision is the oldest revision still in the change log (0 when the log is empty). */
  async firstRetainedRevision(): Promise<number> {
    const first = await this.redis.xrange(this.keys.changes, '-', '+', 'COUNT', 1);
    return first.length ? parseInt(first[0][0], 10) : 0;
  }

  /** changesAfter reads up to `count` change-log entries after a revision, in order. */
  async changesAfter(revision: number, count = 1000): Promise<ChangeEvent[]> {
    const rows = await this.redis.xrange(this.keys.changes, `(${revision}-0`, '+', 'COUNT', count);
    return rows.map(([id, fields]) => parseChange(id, fields));
  }
}

/** refJson is canonicalJson({kind, id}) of two strings (keys sorted: id, kind), without the generic walk. */
const refJson = (kind: string, id: string) => JSON.stringify({ id, kind });

/**
 * putResult carries the record's JSON as Redis returned it and parses it only when `record` is read: the API
 * answers with the bytes themselves, so a create does not parse the record only to serialize it again.
 */
function putResult(recordJson: string, created: boolean, changed: boolean, revision: number): PutResult {
  let record: ResourceRecord | undefined;
  return {
    get record() { return (record ??= JSON.parse(recordJson) as ResourceRecord); },
    set record(r: ResourceRecord) { record = r; },
    recordJson, created, changed, revision,
  };
}

/** parseChange turns one change-log stream entry into a ChangeEvent. */
export function parseChange(id: string, fields: string[]): ChangeEvent {
  const f: Record<string, string> = {};
  for (let i = 0; i < fields.length; i += 2) f[fields[i]] = fields[i + 1];
  return {
    revision: parseInt(id, 10), type: f.type as 'put' | 'delete', kind: f.kind, id: f.id,
    version: Number(f.version), record: JSON.parse(f.record),
  };
}

function matches(r: ResourceRecord, f: ListFilter): boolean {
  if (f.kind && r.kind !== f.kind) return false;
  if (f.scope && (r.scope.kind !== f.scope.kind || (f.scope.id ?? '') !== (r.scope.id ?? ''))) return false;
  if (f.owner && (r.owner.kind !== f.owner.kind || r.owner.id !== f.owner.id)) return false;
  if (f.source && (r.source.kind !== f.source.kind || r.source.id !== f.source.id)) return false;
  return true;
}

function versionConflict(kind: string, id: string, expected: number, current: number): ConflictError {
  const why = expected === 0 ? 'already exists' : `is at version ${current}, not ${expected}`;
  return new ConflictError(`${kind} "${id}" ${why}; read the record for the current version`, 'version_conflict',
    { kind, id, expected_version: expected, current_version: current });
}
