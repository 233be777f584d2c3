import type { Redis } from 'ioredis';
import type { Partition, RecallStats, StoredDecision, StoredMemory } from './memory-types.ts';
import type { Keys } from './keys.ts';
import { defineScripts } from './scripts.ts';

type MemoryCommands = {
  memoryApply(...args: string[]): Promise<[number, string | number]>;
  memoryDaily(...args: (string | number)[]): Promise<[number, number]>;
  memoryLookups(...args: string[]): Promise<number>;
};

/** DailyMeta is where a scope's daily log stands on one day: its current segment and that segment's size. */
export interface DailyMeta {
  seq: number;
  lines: number;
  bytes: number;
}

/** ApplyResult is the outcome of memory-apply-10.lua. */
export type ApplyResult =
  | { ok: true; revision: number }
  | { ok: false; reason: 'changed'; current: string }
  | { ok: false; reason: 'idempotent'; decision: StoredDecision | null }
  | { ok: false; reason: 'reverted'; by: string }
  | { ok: false; reason: 'unindexed' };

/** ApplyStep is one decision and the change it makes (memory-apply-10.lua's ARGV). */
export interface ApplyStep {
  partition: string;
  filename: string;
  /** The content hash the memory must have ('' = absent; '*' = no check, for decisions that change nothing). */
  expected: string;
  change: 'put' | 'del' | 'none';
  memory?: StoredMemory;
  decision: StoredDecision;
  idempotencyKey: string;
  reverts: string;
  /** The lookup fields of the memory as it was (prior; removed) and as it will be (put; added). */
  lookupsBefore?: string[];
  lookupsAfter?: string[];
}

/**
 * isBuilt reads a partition's lookups state from `SISMEMBER xparts` and `HLEN` of its records: built when marked, or
 * when it holds no memory yet (the apply script builds it with the first one).
 */
const isBuilt = (marked: unknown, size: unknown) => Number(marked) === 1 || Number(size) === 0;

/** InjectionRead is a memory marked `injection`, with how often recall found it (MemoryStore.injectionMemories). */
export type InjectionRead = StoredMemory & { recall_count: number };

/** PartitionLookups is what one read of a partition's lookup index answers (MemoryStore.lookups). */
export interface PartitionLookups {
  /** Whether the partition's lookups are kept (false: memories predate them; MemoryStore.buildLookups first). */
  built: boolean;
  /** The filenames under each asked field, in the order asked. */
  filenames: string[][];
  /** The memory at the asked filename, if any. */
  atFilename?: StoredMemory;
}

/** partitionKey names a partition in keys and memory ids: `g`, `w:<ws>`, `a:w:<ws>:<agent>`, `a:g:<agent>`. */
export function partitionKey(p: Partition): string {
  const e = encodeURIComponent;
  if (p.scope === 'global') return 'g';
  if (p.scope === 'workspace') return `w:${e(p.workspace_id)}`;
  return p.agent_tier === 'global' ? `a:g:${e(p.agent_name)}` : `a:w:${e(p.workspace_id)}:${e(p.agent_name)}`;
}

/** memoryId is a memory's id across partitions: `<partition key>/<filename>`. */
export const memoryId = (partition: string, filename: string) => `${partition}/${filename}`;

/**
 * MemoryStore keeps the memory family in Redis under ONE hash tag, `{mem}`: each partition's memories (a hash
 * filename → memory), every memory's content hash, the decisions (hash and time order), idempotency keys, the
 * reverted marks, recall statistics, a revision counter, and per partition a lookup index (the controller's exact
 * hash, entity slot and name rules read it instead of the whole partition) and the set of `injection` memories.
 * A decision and its change are one script (memory-apply-13.lua), which is why they share a slot. NOTE: in a Redis Cluster this one slot bounds memory write
 * throughput (one shard takes every memory write); the write rate limit and the per-write partition read keep it
 * far below one shard's capacity. Write rate counters live under their own tag per origin (`{mem-rate:<origin>}`).
 */
export class MemoryStore {
  readonly base: string;
  readonly redis: Redis & MemoryCommands;

  constructor(redis: Redis, private readonly keys: Keys) {
    this.base = `${keys.prefix}{mem}:`;
    defineScripts();
    this.redis = redis as Redis & MemoryCommands;
  }

  private k(name: string) { return `${this.base}${name}`; }
  partitionHash(partition: string) { return this.k(`m:${partition}`); }
  private lookupHash(partition: string) { return this.k(`x:${partition}`); }
  private injectionSet(partition: string) { return this.k(`i:${partition}`); }

  /** apply stores a decision and its change in one step (memory-apply-13.lua). */
  async apply(s: ApplyStep): Promise<ApplyResult> {
    const [code, value] = await this.redis.memoryApply(
      this.partitionHash(s.partition), this.k('h'), this.k('parts'), this.k('d'), this.k('dz'), this.k('idem'), this.k('rev'), this.k('reverted'), this.k('rc'), this.k('rl'),
      this.lookupHash(s.partition), this.injectionSet(s.partition), this.k('xparts'),
      s.partition, s.filename, s.expected, s.change, s.memory ? JSON.stringify(s.memory) : '', s.memory?.content_hash ?? '',
      s.decision.id, JSON.stringify(s.decision), String(Date.parse(s.decision.decided_at)), s.idempotencyKey, s.reverts,
      (s.lookupsBefore ?? []).join('\n'), (s.lookupsAfter ?? []).join('\n'), s.memory?.injection ? '1' : '0',
    );
    if (code === 1) return { ok: true, revision: Number(value) };
    if (code === 2) return { ok: false, reason: 'idempotent', decision: value ? (JSON.parse(String(value)) as StoredDecision) : null };
    if (code === 3) return { ok: false, reason: 'reverted', by: String(value) };
    if (code === 4) return { ok: false, reason: 'unindexed' };
    return { ok: false, reason: 'changed', current: String(value) };
  }

  /**
   * lookups reads a partition's lookup index in one round trip: the filenames under each field and the memory at
   * `filename`. NOTE: this is what a write reads instead of its whole partition, so its cost does not grow with it.
   */
  async lookups(partition: string, fields: string[], filename: string): Promise<PartitionLookups> {
    const pipe = this.redis.pipeline().sismember(this.k('xparts'), partition).hlen(this.partitionHash(partition)).hget(this.partitionHash(partition), filename || '-');
    if (fields.length) pipe.hmget(this.lookupHash(partition), ...fields);
    const res = (await pipe.exec()) ?? [];
    for (const [err] of res) if (err) throw err;
    const [[, built], [, size], [, at], hm] = res;
    const values = (hm?.[1] ?? []) as (string | null)[];
    return {
      built: isBuilt(built, size),
      filenames: fields.map((_, i) => (values[i] ? values[i]!.split('\n') : [])),
      atFilename: at ? (JSON.parse(String(at)) as StoredMemory) : undefined,
    };
  }

  /**
   * buildLookups stores a partition's lookup index from its memories as read at `revision` (memory-lookups-5.lua):
   * false when a memory was applied since (read again).
   */
  async buildLookups(partition: string, revision: number, fields: Map<string, string[]>, injection: string[]): Promise<boolean> {
    const pairs = [...fields].flatMap(([f, files]) => [f, files.join('\n')]);
    const ok = await this.redis.memoryLookups(
      this.partitionHash(partition), this.lookupHash(partition), this.injectionSet(partition), this.k('xparts'), this.k('rev'),
      partition, String(revision), injection.join('\n'), ...pairs,
    );
    return ok === 1;
  }

  /**
   * injectionMemories reads the memories marked `injection` of the given partitions with their recall counts: one
   * round trip for each partition's injection set and whether its lookups are built, and one more for the records
   * when any is marked. NOTE: this is every session start's memory read, so it is two pipelines, not a round trip
   * per partition and step. A partition whose lookups were never built (memories of an earlier release) has no
   * injection set yet: it is listed in `unbuilt`, for the caller to build and read again.
   */
  async injectionMemories(partitions: string[]): Promise<{ memories: InjectionRead[]; unbuilt: string[] }> {
    if (!partitions.length) return { memories: [], unbuilt: [] };
    const sets = this.redis.pipeline();
    for (const p of partitions) sets.sismember(this.k('xparts'), p).hlen(this.partitionHash(p)).smembers(this.injectionSet(p));
    const res = (await sets.exec()) ?? [];
    for (const [err] of res) if (err) throw err;
    const unbuilt: string[] = [];
    const marked: [partition: string, filename: string][] = [];
    partitions.forEach((p, i) => {
      const [[, built], [, size], [, members]] = res.slice(3 * i, 3 * i + 3);
      if (!isBuilt(built, size)) unbuilt.push(p);
      else for (const f of members as string[]) marked.push([p, f]);
    });
    if (!marked.length) return { memories: [], unbuilt };
    const records = this.redis.pipeline();
    for (const [p, f] of marked) records.hget(this.partitionHash(p), f);
    records.hmget(this.k('rc'), ...marked.map(([p, f]) => memoryId(p, f)));
    const out = (await records.exec()) ?? [];
    for (const [err] of out) if (err) throw err;
    const counts = out.at(-1)![1] as (string | null)[];
    const memories: InjectionRead[] = [];
    marked.forEach((_, i) => {
      const v = out[i][1];
      if (v) memories.push({ ...(JSON.parse(String(v)) as StoredMemory), recall_count: Number(counts[i] ?? 0) });
    });
    return { memories, unbuilt };
  }

  /** partitionMemories reads every memory of a partition. */
  async partitionMemories(partition: string): Promise<StoredMemory[]> {
    const values = await this.redis.hvals(this.partitionHash(partition));
    return values.map((v) => JSON.parse(v) as StoredMemory);
  }

  /** get reads one memory, or undefined. */
  async get(partition: string, filename: string): Promise<StoredMemory | undefined> {
    const v = await this.redis.hget(this.partitionHash(partition), filename);
    return v ? (JSON.parse(v) as StoredMemory) : undefined;
  }

  /** getMany reads memories by id (`<partition>/<filename>`), undefined where absent. */
  async getMany(ids: string[]): Promise<(StoredMemory | undefined)[]> {
    if (!ids.length) return [];
    const pipe = this.redis.pipeline();
    for (const id of ids) {
      const at = id.indexOf('/');
      pipe.hget(this.partitionHash(id.slice(0, at)), id.slice(at + 1));
    }
    const res = (await pipe.exec()) ?? [];
    return res.map(([err, v]) => {
      if (err) throw err;
      return v ? (JSON.parse(String(v)) as StoredMemory) : undefined;
    });
  }

  /** partitions lists every partition holding a memory. */
  async partitions(): Promise<string[]> {
    return (await this.redis.smembers(this.k('parts'))).sort();
  }

  /** contentHashes reads every memory's content hash by id (the search index's resync compares them). */
  async contentHashes(): Promise<Map<string, string>> {
    return new Map(Object.entries(await this.redis.hgetall(this.k('h'))));
  }

  /** revision is the counter every applied change bumps. */
  async revision(): Promise<number> {
    return Number((await this.redis.get(this.k('rev'))) ?? 0);
  }

  /**
   * idempotent reads the decision an idempotency key of a partition answers: undefined when the key was not used,
   * null when the decision it names is no longer stored (the key the apply script keeps: `<partition> <key>`).
   */
  async idempotent(partition: string, key: string): Promise<StoredDecision | null | undefined> {
    const id = await this.redis.hget(this.k('idem'), `${partition} ${key}`);
    if (!id) return undefined;
    return (await this.decision(id))?.decision ?? null;
  }

  /** decision reads one decision and the id of the decision that reverted it ('' when none). */
  async decision(id: string): Promise<{ decision: StoredDecision; revertedBy: string } | undefined> {
    const [[e1, d], [e2, by]] = (await this.redis.pipeline().hget(this.k('d'), id).hget(this.k('reverted'), id).exec()) ?? [];
    if (e1 || e2) throw e1 ?? e2;
    return d ? { decision: JSON.parse(String(d)) as StoredDecision, revertedBy: by ? String(by) : '' } : undefined;
  }

  /**
   * decisionsPage reads up to `count` decisions, newest first, decided at or after `sinceMs` and before
   * `beforeMs` (exclusive), with their reverted marks.
   */
  async decisionsPage(sinceMs: number, beforeMs: number, count: number): Promise<{ decision: StoredDecision; revertedBy: string }[]> {
    const ids = await this.redis.zrevrangebyscore(this.k('dz'), `(${beforeMs}`, sinceMs, 'LIMIT', 0, count);
    if (!ids.length) return [];
    const [[e1, ds], [e2, bys]] = (await this.redis.pipeline().hmget(this.k('d'), ...ids).hmget(this.k('reverted'), ...ids).exec()) ?? [];
    if (e1 || e2) throw e1 ?? e2;
    const decisions = ds as (string | null)[];
    const by = bys as (string | null)[];
    return ids.flatMap((_, i) => (decisions[i] ? [{ decision: JSON.parse(decisions[i]!) as StoredDecision, revertedBy: by[i] ?? '' }] : []));
  }

  /** recallStats reads the recall statistics of memories by id. */
  async recallStats(ids: string[]): Promise<RecallStats[]> {
    if (!ids.length) return [];
    const [[e1, counts], [e2, lasts]] = (await this.redis.pipeline().hmget(this.k('rc'), ...ids).hmget(this.k('rl'), ...ids).exec()) ?? [];
    if (e1 || e2) throw e1 ?? e2;
    return ids.map((_, i) => {
      const last = (lasts as (string | null)[])[i];
      const parsed = last ? (JSON.parse(last) as { at: string; score: number }) : undefined;
      return { recall_count: Number((counts as (string | null)[])[i] ?? 0), last_recalled_at: parsed?.at ?? '', recall_score: parsed?.score ?? 0 };
    });
  }

  /**
   * recordRecall counts one recall for each hit, with its time and score, in one MULTI (the counters are
   * increments, so replicas recalling at once lose none). A hit whose memory was deleted meanwhile is skipped.
   */
  async recordRecall(hits: { id: string; score: number }[], at: string): Promise<void> {
    if (!hits.length) return;
    const hashes = await this.redis.hmget(this.k('h'), ...hits.map((h) => h.id));
    const live = hits.filter((_, i) => hashes[i] !== null);
    if (!live.length) return;
    const m = this.redis.multi();
    for (const h of live) {
      m.hincrby(this.k('rc'), h.id, 1);
      m.hset(this.k('rl'), h.id, JSON.stringify({ at, score: Math.round(h.score * 1e6) / 1e6 }));
    }
    await m.exec();
  }

  /**
   * appendDaily appends one line to the daily log of a partition and date (memory-daily-3.lua), rotating to the
   * next segment past `maxLines` or `maxBytes`; it answers the segment written.
   */
  async appendDaily(partition: string, date: string, line: string, maxLines: number, maxBytes: number): Promise<number> {
    const field = `${partition} ${date}`;
    for (let attempt = 0; attempt < 8; attempt++) {
      const raw = await this.redis.hget(this.k('daily'), field);
      const seq = raw ? (JSON.parse(raw) as DailyMeta).seq : 1;
      const [ok, at] = await this.redis.memoryDaily(this.k('daily'), this.dailyKey(partition, date, seq), this.dailyKey(partition, date, seq + 1), field, seq, line, maxLines, maxBytes);
      if (ok === 1) return Number(at);
    }
    throw new Error('daily log kept rotating under the append; retry');
  }

  dailyKey(partition: string, date: string, seq: number) { return this.k(`dl:${partition}:${date}:${seq}`); }

  /** dailyIndex lists every partition and date with a daily log and where it stands. */
  async dailyIndex(): Promise<{ partition: string; date: string; meta: DailyMeta }[]> {
    const raw = await this.redis.hgetall(this.k('daily'));
    return Object.entries(raw).map(([field, v]) => {
      const at = field.lastIndexOf(' ');
      return { partition: field.slice(0, at), date: field.slice(at + 1), meta: JSON.parse(v) as DailyMeta };
    });
  }

  /** dailyLineCounts reads how many lines each segment of a day holds. */
  async dailyLineCounts(partition: string, date: string, seqs: number[]): Promise<number[]> {
    const pipe = this.redis.pipeline();
    for (const s of seqs) pipe.llen(this.dailyKey(partition, date, s));
    return ((await pipe.exec()) ?? []).map(([err, n]) => {
      if (err) throw err;
      return Number(n);
    });
  }

  /** dailyLines reads one segment's lines. */
  async dailyLines(partition: string, date: string, seq: number): Promise<string[]> {
    return this.redis.lrange(this.dailyKey(partition, date, seq), 0, -1);
  }

  /**
   * takeWrite counts one write of `origin` in the current minute across replicas and tells whether it is within
   * `perMinute`. NOTE: its own tag per origin, so rate counting never loads the `{mem}` slot.
   */
  async takeWrite(origin: string, perMinute: number, nowMs: number): Promise<{ allowed: boolean; count: number; resetMs: number }> {
    const minute = Math.floor(nowMs / 60_000);
    const key = `${this.keys.prefix}{mem-rate:${origin}}:${minute}`;
    const res = await this.redis.multi().incr(key).pexpire(key, 120_000).exec();
    const count = Number(res?.[0]?.[1] ?? 0);
    return { allowed: count <= perMinute, count, resetMs: (minute + 1) * 60_000 - nowMs };
  }
}
