import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';

/** ExtensionScripts types this store's Lua commands (store/scripts/ext-put-2.lua, ext-status-3.lua, *-lease-1.lua). */
interface ExtensionScripts {
  extPut(records: string, revision: string, name: string, expected: number, json: string): Promise<[number, string | number]>;
  extStatus(lease: string, statuses: string, statusRevision: string, token: string, name: string, json: string): Promise<number>;
  renewLease(key: string, token: string, ttlMs: number): Promise<number>;
  releaseLease(key: string, token: string): Promise<number>;
}

/**
 * ExtensionStore keeps installed extensions in Redis, the source of truth every replica reads: the records (manifest,
 * provenance, enabled, artifact digest), each daemon's lease and the status its holder observes, and the tool-call
 * inboxes of the runtimes that hold daemons. Every key sits under the family tag `{ext}` (one slot), so a status
 * write is compared against the lease in one script. NOTE: one tag bounds the family to one Redis node; installs
 * are rare, and the steady load is one lease renewal and a few status writes per daemon per health interval, far
 * from that bound. Tool calls (inbox and reply lists) ride the same slot: a cluster that needs more moves them to a
 * tag per runtime.
 */
export class ExtensionStore {
  private readonly p: string;
  private readonly redis: Redis & ExtensionScripts;

  constructor(redis: Redis, keys: Keys) {
    this.redis = redis as Redis & ExtensionScripts;
    this.p = `${keys.prefix}{ext}:`;
  }

  get recordsKey() { return `${this.p}records`; }
  get revisionKey() { return `${this.p}rev`; }
  get statusKey() { return `${this.p}status`; }
  get statusRevisionKey() { return `${this.p}status-rev`; }
  get projectionKey() { return `${this.p}projection`; }
  leaseKey(name: string) { return `${this.p}lease:${name}`; }
  inboxKey(owner: string) { return `${this.p}inbox:${owner}`; }
  replyKey(id: string) { return `${this.p}reply:${id}`; }

  /** all reads every record (name → JSON) and the revision, in one round trip. */
  async all(): Promise<{ revision: number; records: Record<string, string> }> {
    const res = (await this.redis.multi().get(this.revisionKey).hgetall(this.recordsKey).exec()) ?? [];
    return { revision: Number(res[0]?.[1] ?? 0), records: (res[1]?.[1] ?? {}) as Record<string, string> };
  }

  /** revision moves with every install, update, removal, enable and disable. */
  async revision(): Promise<number> {
    return Number((await this.redis.get(this.revisionKey)) ?? 0);
  }

  /** get reads one record's JSON. */
  async get(name: string): Promise<string | undefined> {
    return (await this.redis.hget(this.recordsKey, name)) ?? undefined;
  }

  /**
   * put writes (json) or removes ('') a record if its current generation is `expected` (0 = none): the new revision,
   * or what is there when another writer got there first.
   */
  async put(name: string, expected: number, json: string): Promise<{ ok: true; revision: number } | { ok: false; current?: string }> {
    const [code, v] = await this.redis.extPut(this.recordsKey, this.revisionKey, name, expected, json);
    return code === 1 ? { ok: true, revision: Number(v) } : { ok: false, current: (v as string) || undefined };
  }

  /** setProjection records what the last projection of an extension did (its records, or why none). */
  async setProjection(name: string, json: string): Promise<void> {
    await this.redis.hset(this.projectionKey, name, json);
  }

  /** projections reads every extension's last projection (name → JSON). */
  async projections(): Promise<Record<string, string>> {
    return this.redis.hgetall(this.projectionKey);
  }

  /** forget drops what the family keeps about a removed extension besides its record (status, projection). */
  async forget(name: string): Promise<void> {
    await this.redis.multi().hdel(this.statusKey, name).hdel(this.projectionKey, name).incr(this.statusRevisionKey).exec();
  }

  /** statuses reads every daemon status (name → JSON) and the status revision. */
  async statuses(): Promise<{ revision: number; statuses: Record<string, string> }> {
    const res = (await this.redis.multi().get(this.statusRevisionKey).hgetall(this.statusKey).exec()) ?? [];
    return { revision: Number(res[0]?.[1] ?? 0), statuses: (res[1]?.[1] ?? {}) as Record<string, string> };
  }

  /** status reads one daemon's status JSON. */
  async status(name: string): Promise<string | undefined> {
    return (await this.redis.hget(this.statusKey, name)) ?? undefined;
  }

  /** statusRevision moves with every status write (the tool catalog caches on it). */
  async statusRevision(): Promise<number> {
    return Number((await this.redis.get(this.statusRevisionKey)) ?? 0);
  }

  /** writeStatus writes a daemon's status while `token` holds its lease; false when it does not. */
  async writeStatus(name: string, token: string, json: string): Promise<boolean> {
    return (await this.redis.extStatus(this.leaseKey(name), this.statusKey, this.statusRevisionKey, token, name, json)) === 1;
  }

  /** acquire takes a daemon's lease if nobody holds it. */
  async acquire(name: string, token: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(this.leaseKey(name), token, 'PX', ttlMs, 'NX')) === 'OK';
  }

  /** renew extends a lease the token still holds; false when it lapsed or another holds it. */
  async renew(name: string, token: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.renewLease(this.leaseKey(name), token, ttlMs)) === 1;
  }

  /** release gives a lease up if the token still holds it. */
  async release(name: string, token: string): Promise<void> {
    await this.redis.releaseLease(this.leaseKey(name), token);
  }

  /** holder names who holds a daemon's lease (undefined: nobody). */
  async holder(name: string): Promise<string | undefined> {
    return (await this.redis.get(this.leaseKey(name))) ?? undefined;
  }

  /** sendCall queues a tool call for the runtime `owner`; the inbox expires if that runtime is gone. */
  async sendCall(owner: string, call: string, ttlMs: number): Promise<void> {
    await this.redis.multi().lpush(this.inboxKey(owner), call).pexpire(this.inboxKey(owner), ttlMs).exec();
  }

  /** reply answers one call; the reply list expires if nobody waits for it any more. */
  async reply(id: string, json: string, ttlMs: number): Promise<void> {
    await this.redis.multi().lpush(this.replyKey(id), json).pexpire(this.replyKey(id), ttlMs).exec();
  }
}
