import type { Redis } from 'ioredis';
import { defineScripts } from './scripts.ts';

/**
 * TaskKeys names the task family's keys. They all carry the one hash tag `{tasks}`: a claim looks across tasks
 * (a task's ancestors' pause flags, its status, the scheduler pause) and a commit across dependent tasks, so
 * they must live in one slot for a Lua script to touch them atomically (see README "Tasks").
 */
export class TaskKeys {
  constructor(readonly prefix = 'svc:{tasks}:') {}
  task(id: string) { return `${this.prefix}task:${id}`; }
  rev(id: string) { return `${this.prefix}trev:${id}`; }
  get tasks() { return `${this.prefix}tasks`; }
  runs(taskId: string) { return `${this.prefix}runs:${taskId}`; }
  run(id: string) { return `${this.prefix}run:${id}`; }
  queue(scope: string) { return `${this.prefix}queue:${scope}`; }
  get queues() { return `${this.prefix}queues`; }
  get leases() { return `${this.prefix}leases`; }
  sessionLease(sid: string) { return `${this.prefix}slease:${sid}`; }
  dependents(id: string) { return `${this.prefix}dependents:${id}`; }
  children(id: string) { return `${this.prefix}children:${id}`; }
  idem(scope: string, key: string) { return `${this.prefix}idem:${scope}:${key}`; }
  get scheduler() { return `${this.prefix}scheduler`; }
  force(actor: string, taskId: string, minute: number) { return `${this.prefix}force:${actor}:${taskId}:${minute}`; }
  get wakeChannel() { return `${this.prefix}wake`; }
}

/** CommitPlan is one atomic write of the task family (store/scripts/commit-tasks-1.lua). */
export interface CommitPlan {
  checks: [string, number][];
  absent?: string[];
  hset?: [string, string[]][];
  del?: string[];
  set?: [string, string, number][];
  zadd?: [string, number, string][];
  zrem?: [string, string][];
  sadd?: [string, string][];
  srem?: [string, string][];
  delif?: [string, string][];
  /** the scheduler must be neither paused nor draining at commit (an operator claim) */
  open?: boolean;
  /** the runs this plan creates, [task_id, run_id, attempt, max_attempts]: the script enforces the run rule on them */
  enqueue?: [string, string, number, number][];
}

/**
 * CommitOutcome is what commit-tasks-1.lua answers: committed, or why nothing was written. `live`, `attempts` and
 * `attempt_taken` are the run rule (one live run per task; attempts unique, increasing, ≤ max_attempts).
 */
export type CommitOutcome =
  | { kind: 'ok' | 'conflict' | 'exists' | 'paused' }
  | { kind: 'live'; taskId: string; runId: string; status: string }
  | { kind: 'attempts'; taskId: string; attempt: number; maxAttempts: number }
  | { kind: 'attempt_taken'; taskId: string; attempt: number; runId: string };

export interface ClaimArgs {
  queue: string; nowMs: number; sessionId: string; capabilities: string[]; channel: string; maxScore: string;
  leaseMs: number; tokenHash: string; idemKey: string; claimedBy: string; scanLimit: number;
  /** the claiming session's agent */
  agentName?: string;
  /** 'peek' chooses without claiming; target claims only that run (the peeked one) */
  mode?: 'peek'; target?: string;
  /** answer the claimed run's and task's fields with the outcome (the API's claim answer), and the task's snapshot */
  withRecords?: boolean;
}
export type ClaimOutcome =
  | { kind: 'ok' | 'peek'; runId: string; taskId: string; run?: Record<string, string>; task?: Record<string, string>; snapshot?: TaskSnapshot }
  | { kind: 'idem' | 'held'; runId: string } | { kind: 'paused' | 'none' };

type TaskRedis = Redis & {
  commitTasks(key: string, prefix: string, plan: string): Promise<(number | string)[]>;
  claimRun(key: string, ...args: (string | number)[]): Promise<unknown[]>;
  loadTask(key: string, prefix: string, taskId: string, runId: string): Promise<[string, string[], string, string[][], string[]] | []>;
};

/** TaskSnapshot is one task as load-task-1.lua read it: fields (undefined: no such task), revision, runs, dependents. */
export interface TaskSnapshot {
  taskId: string;
  fields: Record<string, string> | undefined;
  rev: number;
  runs: Record<string, string>[];
  dependents: string[];
}

/** pairs turns a flat HGETALL reply from a script into a record (undefined when empty: no such hash). */
function pairs(flat: string[] | undefined): Record<string, string> | undefined {
  if (!flat?.length) return undefined;
  const out: Record<string, string> = {};
  for (let i = 0; i < flat.length; i += 2) out[flat[i]] = flat[i + 1];
  return out;
}

/** TaskStore is the Redis side of tasks, runs and leases: hashes per task and run, sorted-set queues, two scripts. */
export class TaskStore {
  readonly redis: TaskRedis;
  constructor(redis: Redis, readonly keys = new TaskKeys()) {
    this.redis = redis as TaskRedis;
    defineScripts();
  }

  /** readTasks reads tasks (hash fields) and their revisions in one round trip. */
  async readTasks(ids: string[]): Promise<{ fields: Record<string, string> | undefined; rev: number }[]> {
    if (!ids.length) return [];
    const pipe = this.redis.pipeline();
    for (const id of ids) pipe.hgetall(this.keys.task(id)).get(this.keys.rev(id));
    const res = (await pipe.exec())!;
    return ids.map((_, i) => {
      const h = res[2 * i][1] as Record<string, string>;
      return { fields: h && Object.keys(h).length ? h : undefined, rev: Number(res[2 * i + 1][1] ?? 0) };
    });
  }

  /**
   * load reads a task (or the task of a run: `{ runId }`) with its revision, runs and dependents in one round trip
   * (store/scripts/load-task-1.lua); undefined when the run named does not exist.
   */
  async load(by: { taskId: string } | { runId: string }): Promise<TaskSnapshot | undefined> {
    const r = await this.redis.loadTask(this.keys.scheduler, this.keys.prefix, 'taskId' in by ? by.taskId : '', 'runId' in by ? by.runId : '');
    if (!r.length) return undefined;
    const [taskId, fields, rev, runs, dependents] = r;
    return { taskId, fields: pairs(fields), rev: Number(rev), runs: runs.map((h) => pairs(h)!), dependents };
  }

  async runIdsOf(taskId: string): Promise<string[]> { return this.redis.zrange(this.keys.runs(taskId), 0, -1); }

  async readRuns(ids: string[]): Promise<(Record<string, string> | undefined)[]> {
    if (!ids.length) return [];
    const pipe = this.redis.pipeline();
    for (const id of ids) pipe.hgetall(this.keys.run(id));
    const res = (await pipe.exec())!;
    return res.map(([, h]) => (h && Object.keys(h as object).length ? (h as Record<string, string>) : undefined));
  }

  async get(key: string): Promise<string | null> { return this.redis.get(key); }
  async members(key: string): Promise<string[]> { return this.redis.smembers(key); }

  /**
   * commit applies a plan if the tasks it read are unchanged and the run rule holds: `conflict` (a task changed),
   * `exists` (an absent key exists), `paused` (plan.open) and the run rule's refusals write nothing.
   */
  async commit(plan: CommitPlan): Promise<CommitOutcome> {
    const [code, a, b, c] = await this.redis.commitTasks(this.keys.scheduler, this.keys.prefix, JSON.stringify(plan));
    switch (code) {
      case 1: return { kind: 'ok' };
      case 0: return { kind: 'conflict' };
      case -1: return { kind: 'exists' };
      case -2: return { kind: 'paused' };
      case -3: return { kind: 'live', taskId: String(a), runId: String(b), status: String(c) };
      case -4: return { kind: 'attempts', taskId: String(a), attempt: Number(b), maxAttempts: Number(c) };
      case -5: return { kind: 'attempt_taken', taskId: String(a), attempt: Number(b), runId: String(c) };
      default: throw new Error(`commit-tasks answered an unknown code ${code}`);
    }
  }

  /** claim runs the one atomic claim (store/scripts/claim-run-1.lua). */
  async claim(a: ClaimArgs): Promise<ClaimOutcome> {
    const r = await this.redis.claimRun(this.keys.scheduler, this.keys.prefix, a.queue, a.nowMs, new Date(a.nowMs).toISOString(), a.sessionId,
      JSON.stringify(a.capabilities), a.channel, a.maxScore, a.leaseMs, a.tokenHash, a.idemKey, a.claimedBy, a.scanLimit, a.mode ?? '', a.target ?? '', a.agentName ?? '', a.withRecords ? '1' : '');
    const kind = r[0] as ClaimOutcome['kind'];
    if (kind === 'ok') {
      const [, runId, taskId, run, task, rev, runs, dependents] = r as [string, string, string, string[]?, string[]?, string?, string[][]?, string[]?];
      if (!a.withRecords) return { kind, runId, taskId };
      const fields = pairs(task);
      return { kind, runId, taskId, run: pairs(run), task: fields, snapshot: { taskId, fields, rev: Number(rev), runs: runs!.map((h) => pairs(h)!), dependents: dependents! } };
    }
    if (kind === 'peek') return { kind, runId: r[1] as string, taskId: r[2] as string };
    if (kind === 'idem' || kind === 'held') return { kind, runId: r[1] as string };
    return { kind } as ClaimOutcome;
  }

  /** expiredLeases lists runs whose lease deadline has passed (the recovery loop's work). */
  async expiredLeases(nowMs: number, limit = 200): Promise<string[]> {
    return this.redis.zrangebyscore(this.keys.leases, '-inf', nowMs, 'LIMIT', 0, limit);
  }

  async nextLeaseDeadline(): Promise<number | undefined> {
    const r = await this.redis.zrange(this.keys.leases, 0, 0, 'WITHSCORES');
    return r.length ? Number(r[1]) : undefined;
  }

  async listTaskIds(offset: number, count: number): Promise<string[]> {
    return this.redis.zrange(this.keys.tasks, offset, offset + count - 1);
  }

  async scheduler(): Promise<Record<string, string>> { return this.redis.hgetall(this.keys.scheduler); }
  async setScheduler(fields: Record<string, string>): Promise<void> { await this.redis.hset(this.keys.scheduler, fields); }
  async queueNames(): Promise<string[]> { return this.redis.smembers(this.keys.queues); }
  async queued(scope: string, offset: number, count: number): Promise<string[]> { return this.redis.zrange(this.keys.queue(scope), offset, offset + count - 1); }
  async queueDepth(scope: string): Promise<number> { return this.redis.zcard(this.keys.queue(scope)); }
  async leaseCount(): Promise<number> { return this.redis.zcard(this.keys.leases); }

  /** countForce counts one force operation of an actor on a task in the current minute (the rate limit). */
  async countForce(actor: string, taskId: string, nowMs: number): Promise<number> {
    const key = this.keys.force(actor, taskId, Math.floor(nowMs / 60_000));
    const [[, n]] = (await this.redis.multi().incr(key).expire(key, 120).exec())! as [[null, number], unknown];
    return n;
  }

  /** wake tells every waiting claimer (all processes) that something may have become claimable in `scopes` (`*`: all). */
  async wake(scopes: string[]): Promise<void> {
    if (scopes.length) await this.redis.publish(this.keys.wakeChannel, scopes.join('\n'));
  }
}
