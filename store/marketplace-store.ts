import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';

/** MarketScripts types this store's Lua commands (store/scripts/market-sync-3.lua, put-install-2.lua). */
interface MarketScripts {
  marketSync(rows: string, state: string, revision: string, ...args: (string | number)[]): Promise<number>;
  putInstall(installs: string, revision: string, name: string, expected: string, json: string): Promise<[number, string?]>;
}

/** SyncCommit is one sync of one source's kind, as market-sync-3.lua commits it. */
export type SyncCommit =
  | { mode: 'state'; state: unknown }
  | { mode: 'replace'; state: unknown; rows: { id: string; json: string }[] }
  | { mode: 'merge'; state: unknown; rows: { id: string; json: string }[]; gone: string[] };

/**
 * MarketplaceStore keeps what the marketplace's sources last said, and what was installed from them, in Redis.
 * Rows and sync states live under the family tag `{market}` (one slot): a sync commits rows and state together,
 * and a process compares one revision to know its search index is current. NOTE: one tag bounds the sync write
 * rate to one Redis node; syncs are hourly and per source, so that bound is far away. Installed skills live under
 * `{skills}` (one slot), so an install is compared and set against the one it replaces.
 */
export class MarketplaceStore {
  private readonly market: string;
  private readonly skills: string;
  private readonly redis: Redis & MarketScripts;

  constructor(redis: Redis, keys: Keys) {
    this.redis = redis as Redis & MarketScripts;
    this.market = `${keys.prefix}{market}:`;
    this.skills = `${keys.prefix}{skills}:`;
  }

  rowsKey(source: string, kind: string) { return `${this.market}rows:${source}:${kind}`; }
  stateKey(source: string, kind: string) { return `${this.market}state:${source}:${kind}`; }
  private get revisionKey() { return `${this.market}rev`; }
  private get mcpInstalledKey() { return `${this.market}mcp-installed`; }
  private get installsKey() { return `${this.skills}installs`; }
  private get skillsRevisionKey() { return `${this.skills}rev`; }
  private get disabledKey() { return `${this.skills}disabled`; }

  /** commit writes one sync (rows and state together) and returns the marketplace revision. */
  async commit(source: string, kind: string, c: SyncCommit): Promise<number> {
    const gone = c.mode === 'merge' ? c.gone : [];
    const pairs = c.mode === 'state' ? [] : c.rows.flatMap((r) => [r.id, r.json]);
    return this.redis.marketSync(this.rowsKey(source, kind), this.stateKey(source, kind), this.revisionKey, c.mode, JSON.stringify(c.state), gone.length, ...gone, ...pairs);
  }

  /** revision is the marketplace revision (moves whenever any source's rows change). */
  async revision(): Promise<number> {
    return Number(await this.redis.get(this.revisionKey) ?? 0);
  }

  /** rows reads every row of the given (source, kind) pairs, as stored JSON, in one round trip. */
  async rows(pairs: { source: string; kind: string }[]): Promise<string[][]> {
    const pipe = this.redis.pipeline();
    for (const p of pairs) pipe.hvals(this.rowsKey(p.source, p.kind));
    const res = (await pipe.exec()) ?? [];
    return res.map(([err, v]) => { if (err) throw err; return v as string[]; });
  }

  /** counts reads how many rows each (source, kind) pair holds. */
  async counts(pairs: { source: string; kind: string }[]): Promise<number[]> {
    const pipe = this.redis.pipeline();
    for (const p of pairs) pipe.hlen(this.rowsKey(p.source, p.kind));
    const res = (await pipe.exec()) ?? [];
    return res.map(([err, v]) => { if (err) throw err; return Number(v); });
  }

  /** rowsById reads stored rows by entry id (null where there is none). */
  async rowsById(source: string, kind: string, ids: string[]): Promise<(string | null)[]> {
    return ids.length ? this.redis.hmget(this.rowsKey(source, kind), ...ids) : [];
  }

  /** row reads one stored row. */
  async row(source: string, kind: string, entryId: string): Promise<string | undefined> {
    return (await this.redis.hget(this.rowsKey(source, kind), entryId)) ?? undefined;
  }

  /** states reads the sync state of each (source, kind) pair (undefined before its first sync). */
  async states<T>(pairs: { source: string; kind: string }[]): Promise<(T | undefined)[]> {
    if (!pairs.length) return [];
    const raw = await this.redis.mget(pairs.map((p) => this.stateKey(p.source, p.kind)));
    return raw.map((r) => (r ? (JSON.parse(r) as T) : undefined));
  }

  /** setMcpInstalled remembers which entry version an mcp_server record was installed from (by scope and record id). */
  async setMcpInstalled(key: string, value: { entry_id: string; version: string; source: string }): Promise<void> {
    await this.redis.hset(this.mcpInstalledKey, key, JSON.stringify(value));
  }

  /** mcpInstalled reads every remembered MCP install. */
  async mcpInstalled(): Promise<Map<string, { entry_id: string; version: string; source: string }>> {
    const all = await this.redis.hgetall(this.mcpInstalledKey);
    return new Map(Object.entries(all).map(([k, v]) => [k, JSON.parse(v)]));
  }

  /** installs reads every installed skill record (name → JSON) and the skills revision, in one round trip. */
  async installs(): Promise<{ revision: number; installs: Record<string, string> }> {
    const res = (await this.redis.multi().get(this.skillsRevisionKey).hgetall(this.installsKey).exec()) ?? [];
    return { revision: Number(res[0]?.[1] ?? 0), installs: (res[1]?.[1] ?? {}) as Record<string, string> };
  }

  /** skillsRevision moves with every install, update, removal and enable/disable. */
  async skillsRevision(): Promise<number> {
    return Number(await this.redis.get(this.skillsRevisionKey) ?? 0);
  }

  /**
   * putInstall writes (json) or removes ('') a skill's install if its current archive digest is `expected` ('' =
   * none): true when written, false (with what is there) when another install got there first.
   */
  async putInstall(name: string, expected: string, json: string): Promise<{ ok: true } | { ok: false; current?: string }> {
    const [code, current] = await this.redis.putInstall(this.installsKey, this.skillsRevisionKey, name, expected, json);
    return code === 1 ? { ok: true } : { ok: false, current: current || undefined };
  }

  /** setDisabled turns a skill name off (true) or on again (false); answers whether anything changed. */
  async setDisabled(name: string, disabled: boolean): Promise<boolean> {
    const res = (await this.redis.multi()[disabled ? 'sadd' : 'srem'](this.disabledKey, name).incr(this.skillsRevisionKey).exec()) ?? [];
    return Number(res[0]?.[1] ?? 0) > 0;
  }

  /** disabled lists the skill names turned off through the API. */
  async disabled(): Promise<Set<string>> {
    return new Set(await this.redis.smembers(this.disabledKey));
  }
}
