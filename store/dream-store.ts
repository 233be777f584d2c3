import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import type { ScriptCommands } from './scripts.ts';

/** StoredDreamRun is a dream run as Redis holds it (`DreamRun`, with the stored status). */
export interface StoredDreamRun {
  id: string;
  /** The memory partition key (store/memory-store.ts partitionKey): the scope the run consolidates. */
  partition: string;
  scope: string;
  workspace_id: string;
  agent_name: string;
  agent_tier: string;
  status: 'running' | 'completed' | 'failed' | 'canceled';
  started_at: string;
  completed_at: string;
  lock_until: string;
  candidate_count: number;
  promoted_count: number;
  artifact_paths: string[];
  failure_path: string;
  failure_reason: string;
  /** Why it ran: `trigger`, `force`, `retry`, `check`. */
  reason: string;
  /** The run a retry repeats. */
  retry_of: string;
  /** The dream agent's session, and the decision its write got. */
  session_id: string;
  decision_id: string;
  /** The memory ids the run promoted (with their content hash at the time). */
  promoted: Record<string, string>;
}

/**
 * DreamStore keeps dream runs in Redis. A scope's runs, its lock and its promotion marks share the scope's tag,
 * `{dream:<partition>}`, so the lock, the run and the marks of one scope live on one slot, and scopes spread over a
 * cluster. The cross-scope list (by start time) and the run → scope lookup share `{dreams}`: one ZADD and one HSET
 * per run, far below what one shard takes.
 */
export class DreamStore {
  constructor(private readonly redis: Redis & ScriptCommands, private readonly keys: Keys) {}

  private tag(partition: string) { return `${this.keys.prefix}{dream:${partition}}`; }
  private runKey(partition: string, id: string) { return `${this.tag(partition)}:run:${id}`; }
  private lockKey(partition: string) { return `${this.tag(partition)}:lock`; }
  private runsKey(partition: string) { return `${this.tag(partition)}:runs`; }
  private promotedKey(partition: string) { return `${this.tag(partition)}:promoted`; }
  private get index() { return `${this.keys.prefix}{dreams}:index`; }
  private get where() { return `${this.keys.prefix}{dreams}:where`; }

  /**
   * begin takes the scope's lock until `lockUntilMs` (SET NX: one run per scope across replicas) and, only then,
   * creates the run: answers the run created, or the id of the run that holds the lock.
   */
  async begin(run: StoredDreamRun, lockUntilMs: number): Promise<{ created: true } | { created: false; holder?: StoredDreamRun }> {
    const lock = this.lockKey(run.partition);
    // NOTE: the run's record goes first and the lock second, so a trigger that loses the lock always finds the
    // holder's record (read here by its scope, before the id index has it) and can name it.
    const key = this.runKey(run.partition, run.id);
    await this.redis.set(key, JSON.stringify(run));
    const ok = await this.redis.set(lock, run.id, 'PXAT', lockUntilMs, 'NX');
    if (ok !== 'OK') {
      await this.redis.del(key);
      const holder = await this.redis.get(lock);
      const json = holder ? await this.redis.get(this.runKey(run.partition, holder)) : null;
      return { created: false, holder: json ? (JSON.parse(json) as StoredDreamRun) : undefined };
    }
    await this.redis.zadd(this.runsKey(run.partition), Date.parse(run.started_at), run.id);
    await this.redis.multi().zadd(this.index, Date.parse(run.started_at), run.id).hset(this.where, run.id, run.partition).exec();
    return { created: true };
  }

  /** release drops the scope's lock if this run still holds it. */
  async release(partition: string, runId: string): Promise<void> {
    await this.redis.releaseLease(this.lockKey(partition), runId);
  }

  /** holder is the id of the run holding the scope's lock ('' when none). */
  async holder(partition: string): Promise<string> {
    return (await this.redis.get(this.lockKey(partition))) ?? '';
  }

  /** extend moves the lock's end (while the run works); false when the run no longer holds it. */
  async extend(partition: string, runId: string, lockUntilMs: number): Promise<boolean> {
    if ((await this.redis.get(this.lockKey(partition))) !== runId) return false;
    await this.redis.pexpireat(this.lockKey(partition), lockUntilMs);
    return true;
  }

  /** get returns a run by id, or undefined. */
  async get(id: string): Promise<StoredDreamRun | undefined> {
    const partition = await this.redis.hget(this.where, id);
    if (partition === null) return undefined;
    const json = await this.redis.get(this.runKey(partition, id));
    return json ? (JSON.parse(json) as StoredDreamRun) : undefined;
  }

  /** advance merges a patch into a run whose status is one of `from` (store/scripts/update-run-1.lua). */
  async advance(run: StoredDreamRun, patch: Partial<StoredDreamRun>, from: StoredDreamRun['status'][]): Promise<StoredDreamRun | undefined> {
    const [code, json] = await this.redis.updateRun(this.runKey(run.partition, run.id), JSON.stringify(patch), from.join(','));
    return code === 1 ? (JSON.parse(json!) as StoredDreamRun) : undefined;
  }

  /** latest returns a scope's newest run, or undefined. */
  async latest(partition: string): Promise<StoredDreamRun | undefined> {
    const [id] = await this.redis.zrevrange(this.runsKey(partition), 0, 0);
    if (!id) return undefined;
    const json = await this.redis.get(this.runKey(partition, id));
    return json ? (JSON.parse(json) as StoredDreamRun) : undefined;
  }

  /** list returns runs newest first, across scopes, reading at most `scan` of them. */
  async list(scan: number): Promise<StoredDreamRun[]> {
    const ids = await this.redis.zrevrange(this.index, 0, scan - 1);
    if (!ids.length) return [];
    const parts = await this.redis.hmget(this.where, ...ids);
    // NOTE: each scope's runs have their own tag, so one command per run (all in flight at once), not a pipeline.
    const res = await Promise.all(ids.map((id, i) => this.redis.get(this.runKey(parts[i] ?? '', id))));
    return res.map((json) => (json ? (JSON.parse(json) as StoredDreamRun) : undefined)).filter((r): r is StoredDreamRun => Boolean(r));
  }

  /** partitions lists the scopes that have runs. */
  async partitions(): Promise<string[]> {
    return [...new Set(Object.values(await this.redis.hgetall(this.where)))].sort();
  }

  /** promoted reads a scope's promotion marks: memory id → its content hash when promoted. */
  async promoted(partition: string): Promise<Record<string, string>> {
    return this.redis.hgetall(this.promotedKey(partition));
  }

  /** markPromoted records the memories a run promoted (a memory changed since is a candidate again). */
  async markPromoted(partition: string, marks: Record<string, string>): Promise<void> {
    if (Object.keys(marks).length) await this.redis.hset(this.promotedKey(partition), marks);
  }
}
