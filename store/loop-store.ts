import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import { defineScripts } from './scripts.ts';

/**
 * LoopKeys names the loop family's keys. Each run's state (its hash, node records, event stream and executed
 * definition) sits under the run's own hash tag `{loop:<run id>}`, so one script advances a run atomically and runs
 * spread over a cluster. The run indexes (per workspace, live runs, per loop) sit under `{loops}`: they are written
 * outside the run's script (another slot), only ever name runs, and every reader re-reads the run itself (a name
 * whose run is gone or ended is skipped, and the watchdog prunes it), so they cannot make a reader see a wrong state.
 * NOTE: `{loops}` is one slot: it bounds how fast runs can be started and ended (two index writes per run), not how
 * fast nodes run.
 */
export class LoopKeys {
  constructor(readonly prefix = 'svc:') {}
  run(id: string) { return `${this.prefix}{loop:${id}}:run`; }
  nodes(id: string) { return `${this.prefix}{loop:${id}}:nodes`; }
  events(id: string) { return `${this.prefix}{loop:${id}}:events`; }
  def(id: string) { return `${this.prefix}{loop:${id}}:def`; }
  /** workspaceRuns: run ids of a workspace, scored by creation time (ms). */
  workspaceRuns(workspaceId: string) { return `${this.prefix}{loops}:ws:${workspaceId}`; }
  /** live: ids of runs not yet terminal, scored by when the watchdog should look at them next (ms). */
  get live() { return `${this.prefix}{loops}:live`; }
}

/** StepOp is one atomic step of a run (store/scripts/loop-step-4.lua documents each field). */
export interface StepOp {
  create?: { run: Record<string, string>; def: string };
  expect?: { status?: string[]; not_status?: string[]; generation?: number; active_gate_id?: string; fields?: Record<string, string> };
  transition?: { to: string; cause: string; reason?: string };
  set?: Record<string, string>;
  incr?: Record<string, number>;
  /** [field, expected version (0 = absent), record json that starts with {"v":<version+1>,] */
  nodes?: [string, number, string][];
  events?: [string, string][];
  retain_ms?: number;
}

/** StepResult is what a step did: applied (with the last event sequence and the status), or why nothing was written. */
export type StepResult =
  | { kind: 'ok'; seq: number; status: string }
  | { kind: 'missing' }
  | { kind: 'expectation'; field: string; actual: string }
  | { kind: 'illegal'; from: string; to: string; cause: string }
  | { kind: 'node_conflict'; field: string; actual: number };

/** StoredEvent is one row of a run's event stream as stored. */
export interface StoredEvent { seq: number; kind: string; payload: string; at: string }

type LoopRedis = Redis & { loopStep(run: string, nodes: string, events: string, def: string, step: string): Promise<(number | string)[]> };

/**
 * LoopStore is the Redis side of loop runs: one script (loop-step-4.lua) writes a run's state; reads are plain
 * pipelines. It holds no state of its own but a cache of executed definitions (immutable once a run exists).
 */
export class LoopStore {
  readonly redis: LoopRedis;
  readonly keys: LoopKeys;
  private readonly defs = new Map<string, string>();

  constructor(redis: Redis, keys: Keys) {
    this.redis = redis as LoopRedis;
    this.keys = new LoopKeys(keys.prefix);
    defineScripts();
  }

  /** step applies one step atomically, or writes nothing and says why. */
  async step(runId: string, op: StepOp & { at?: string }): Promise<StepResult> {
    const k = this.keys;
    const r = await this.redis.loopStep(k.run(runId), k.nodes(runId), k.events(runId), k.def(runId), JSON.stringify({ ...op, at: op.at ?? new Date().toISOString() }));
    switch (Number(r[0])) {
      case 1: return { kind: 'ok', seq: Number(r[1]), status: String(r[2]) };
      case -1: return { kind: 'missing' };
      case -2: return { kind: 'expectation', field: String(r[1]), actual: String(r[2]) };
      case -3: return { kind: 'illegal', from: String(r[1]), to: String(r[2]), cause: String(r[3]) };
      case -4: return { kind: 'node_conflict', field: String(r[1]), actual: Number(r[2]) };
      default: throw new Error(`loop-step answered an unknown code ${r[0]}`);
    }
  }

  /** readRun reads a run's hash (undefined when it does not exist). */
  async readRun(runId: string): Promise<Record<string, string> | undefined> {
    const h = await this.redis.hgetall(this.keys.run(runId));
    return Object.keys(h).length ? h : undefined;
  }

  /** readRuns reads several runs' hashes in one round trip. */
  async readRuns(ids: string[]): Promise<(Record<string, string> | undefined)[]> {
    if (!ids.length) return [];
    // NOTE: each run has its own tag, so one command per run (all in flight at once), not a pipeline: a cluster
    // refuses a pipeline whose keys span slots.
    const res = await Promise.all(ids.map((id) => this.redis.hgetall(this.keys.run(id))));
    return res.map((h) => (h && Object.keys(h).length ? h : undefined));
  }

  /** readState reads a run's hash and every node record in one round trip. */
  async readState(runId: string): Promise<{ run: Record<string, string>; nodes: Record<string, string> } | undefined> {
    const res = (await this.redis.pipeline().hgetall(this.keys.run(runId)).hgetall(this.keys.nodes(runId)).exec())!;
    const run = res[0][1] as Record<string, string>;
    if (!run || !Object.keys(run).length) return undefined;
    return { run, nodes: (res[1][1] as Record<string, string>) ?? {} };
  }

  /** readNode reads one node record. */
  async readNode(runId: string, field: string): Promise<string | null> {
    return this.redis.hget(this.keys.nodes(runId), field);
  }

  /** status reads only a run's status ('' when the run is gone). */
  async status(runId: string): Promise<string> {
    return (await this.redis.hget(this.keys.run(runId), 'status')) ?? '';
  }

  /** statuses reads several runs' statuses in one round trip. */
  async statuses(ids: string[]): Promise<string[]> {
    if (!ids.length) return [];
    // NOTE: one command per run (each its own tag), all in flight at once.
    return (await Promise.all(ids.map((id) => this.redis.hget(this.keys.run(id), 'status')))).map((s) => s ?? '');
  }

  /** readDef reads a run's executed definition (JSON), cached: it never changes once the run exists. */
  async readDef(runId: string): Promise<string | undefined> {
    const hit = this.defs.get(runId);
    if (hit) return hit;
    const def = await this.redis.get(this.keys.def(runId));
    if (def === null) return undefined;
    if (this.defs.size > 10_000) this.defs.delete(this.defs.keys().next().value!);
    this.defs.set(runId, def);
    return def;
  }

  /** events returns up to `count` events with a sequence above `after`, in order. */
  async events(runId: string, after: number, count = 1000): Promise<StoredEvent[]> {
    const rows = (await this.redis.xrange(this.keys.events(runId), `${after + 1}-0`, '+', 'COUNT', count)) as [string, string[]][];
    return rows.map(parseEntry);
  }

  /** waitEvents blocks up to `blockMs` on a connection the caller owns for events with a sequence above `after`. */
  async waitEvents(conn: Redis, runId: string, after: number, blockMs: number, count = 1000): Promise<StoredEvent[]> {
    const res = (await conn.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', this.keys.events(runId), `${after}-0`)) as [string, [string, string[]][]][] | null;
    return res ? res[0][1].map(parseEntry) : [];
  }

  /** index adds a new run to its workspace's index and the live set (before the run exists; see LoopKeys). */
  async index(workspaceId: string, runId: string, createdMs: number, nextLookMs: number): Promise<void> {
    await this.redis.pipeline().zadd(this.keys.workspaceRuns(workspaceId), createdMs, runId).zadd(this.keys.live, nextLookMs, runId).exec();
  }

  /** runIds lists a workspace's run ids, newest first, at most `limit`. */
  async runIds(workspaceId: string, limit: number): Promise<string[]> {
    return this.redis.zrevrange(this.keys.workspaceRuns(workspaceId), 0, limit - 1);
  }

  /** unindex removes run ids from a workspace's index (runs that expired). */
  async unindex(workspaceId: string, ids: string[]): Promise<void> {
    if (ids.length) await this.redis.zrem(this.keys.workspaceRuns(workspaceId), ...ids);
  }

  /** dueLive lists live runs whose next look is due, at most `limit`. */
  async dueLive(nowMs: number, limit: number): Promise<string[]> {
    return this.redis.zrangebyscore(this.keys.live, '-inf', nowMs, 'LIMIT', 0, limit);
  }

  /** lookLater sets when the watchdog should next look at live runs (ms). */
  async lookLater(ids: string[], atMs: number): Promise<void> {
    if (!ids.length) return;
    const pipe = this.redis.pipeline();
    for (const id of ids) pipe.zadd(this.keys.live, 'XX', atMs, id);
    await pipe.exec();
  }

  /** ended removes runs from the live set. */
  async ended(ids: string[]): Promise<void> {
    if (ids.length) await this.redis.zrem(this.keys.live, ...ids);
  }
}

function parseEntry([id, f]: [string, string[]]): StoredEvent {
  const get = (name: string) => f[f.indexOf(name) + 1];
  return { seq: Number(id.slice(0, id.indexOf('-'))), kind: get('k'), payload: get('p'), at: get('t') };
}
