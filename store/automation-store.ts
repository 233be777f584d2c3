import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import type { ScriptCommands } from './scripts.ts';

/** RunStatus is where an automation run stands; `succeeded`, `failed` and `skipped` are terminal. */
export type RunStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'skipped';
/** RunKind says what fired a run: a job's schedule, an event trigger, a webhook, or an operator ("fire now"). */
export type RunKind = 'job' | 'trigger' | 'webhook' | 'manual';
/** TERMINAL lists the statuses a run never leaves. */
export const TERMINAL: readonly RunStatus[] = ['succeeded', 'failed', 'skipped'];

/**
 * AutomationRun is one firing of a job or trigger (the spec's automation_runs row): what fired it, the session
 * it started, its attempt under `retry`, and its timings. `fire_key` names the firing (a scheduler tick's job
 * id, `${event id}:${trigger id}`, a webhook signature); the run id is derived from it, so a firing makes one run.
 */
export interface AutomationRun {
  id: string;
  fire_key: string;
  kind: RunKind;
  job_id: string;
  trigger_id: string;
  workspace_id: string;
  agent_name: string;
  status: RunStatus;
  /** Why a run was skipped or failed, as a code: fire_limit, hook_denied, tasks_not_available, workspace_required, … */
  reason: string;
  session_id: string;
  /** Sessions of earlier attempts (retry), oldest first. */
  previous_session_ids: string[];
  attempt: number;
  max_attempts: number;
  error: string;
  /** The bus event that fired a trigger run (trigger runs only). */
  event_id: string;
  /** The task a task job's run created (task jobs only). */
  task_id: string;
  scheduled_at: string;
  created_at: string;
  started_at: string;
  finished_at: string;
}

/** RunFilter selects runs for a list: by owner and status, newest first, at most `limit`. */
export interface RunFilter {
  job_id?: string;
  trigger_id?: string;
  status?: RunStatus;
  limit?: number;
}

/** FireLimit is a job's or trigger's `fire_limit`, in ms. */
export interface FireLimit {
  max: number;
  windowMs: number;
}

/** runIdOf derives a run's id from its firing: the same firing always names the same run. */
export const runIdOf = (fireKey: string) => `run_${createHash('sha256').update(fireKey).digest('hex').slice(0, 24)}`;

/**
 * AutomationStore keeps automation runs in Redis under one hash tag (`{auto}`): a JSON string per run, a global
 * index and one history per job or trigger (ZSETs by creation time, capped), and the fire_limit windows. A run
 * is created once per firing (create-run-4.lua, SET NX semantics with the limit check in the same step) and moves
 * on by compare-and-set on its status (update-run-1.lua).
 */
export class AutomationStore {
  readonly prefix: string;

  constructor(readonly redis: Redis & ScriptCommands, keys: Keys, private readonly retention = { global: 10_000, perOwner: 1_000 }) {
    this.prefix = `${keys.prefix}{auto}:`;
  }

  runKey(id: string) { return `${this.prefix}run:${id}`; }
  private get index() { return `${this.prefix}runs`; }
  private ownerIndex(owner: 'job' | 'trigger', id: string) { return `${this.prefix}runs:${owner}:${id}`; }
  private window(owner: 'job' | 'trigger', id: string) { return `${this.prefix}fires:${owner}:${id}`; }
  /** key names another key of the family (webhook replay and rate-limit keys share the tag). */
  key(name: string) { return `${this.prefix}${name}`; }

  /**
   * create records a firing's run once; `created` is false when the firing's run existed already (it is returned
   * as it is). With a limit, a fire over it is recorded `skipped` with reason `fire_limit` and not counted.
   * `historyLimit` caps the owner's history below the per-owner retention (the newest are kept).
   */
  async create(run: AutomationRun, limit?: FireLimit, historyLimit?: number): Promise<{ created: boolean; run: AutomationRun }> {
    const owner = run.job_id ? 'job' : 'trigger';
    const ownerId = run.job_id || run.trigger_id;
    const now = Date.now();
    const [code, json] = await this.redis.createRun(
      this.runKey(run.id), this.index, this.ownerIndex(owner, ownerId), this.window(owner, ownerId),
      JSON.stringify(run), run.id, now, limit?.max ?? 0, limit?.windowMs ?? 0, this.retention.global, Math.min(historyLimit ?? Infinity, this.retention.perOwner),
      `${this.prefix}run:`, new Date(now).toISOString(),
    );
    return { created: code === 1, run: parseRun(json) };
  }

  /** update applies a patch when the run's status is one of `expected` (any when empty); `ok` says whether it did. */
  async update(id: string, patch: Partial<AutomationRun>, expected: RunStatus[] = []): Promise<{ ok: boolean; run?: AutomationRun }> {
    const res = await this.redis.updateRun(this.runKey(id), JSON.stringify(patch), expected.join(','));
    if (res[0] === -1) return { ok: false };
    return { ok: res[0] === 1, run: parseRun(res[1]!) };
  }

  /** get returns a run, or undefined. */
  async get(id: string): Promise<AutomationRun | undefined> {
    const raw = await this.redis.get(this.runKey(id));
    return raw ? parseRun(raw) : undefined;
  }

  /** list returns runs newest first: one job's or trigger's history, or all, filtered by status. */
  async list(f: RunFilter = {}): Promise<AutomationRun[]> {
    const limit = f.limit ?? 100;
    const key = f.job_id ? this.ownerIndex('job', f.job_id) : f.trigger_id ? this.ownerIndex('trigger', f.trigger_id) : this.index;
    const out: AutomationRun[] = [];
    // NOTE: pages of ids, newest first, until `limit` runs pass the filters (a trimmed run is skipped).
    for (let start = 0; out.length < limit; start += 200) {
      const ids = await this.redis.zrevrange(key, start, start + 199);
      if (!ids.length) break;
      const raws = await this.redis.mget(ids.map((id) => this.runKey(id)));
      for (const raw of raws) {
        if (!raw) continue;
        const run = parseRun(raw);
        if (f.status && run.status !== f.status) continue;
        if (f.job_id && run.job_id !== f.job_id) continue;
        if (f.trigger_id && run.trigger_id !== f.trigger_id) continue;
        out.push(run);
        if (out.length >= limit) break;
      }
    }
    return out;
  }

  /** last returns the newest run of a job or trigger, or undefined. */
  async last(owner: 'job' | 'trigger', id: string): Promise<AutomationRun | undefined> {
    const [runId] = await this.redis.zrevrange(this.ownerIndex(owner, id), 0, 0);
    return runId ? this.get(runId) : undefined;
  }

  /** claimOnce sets a marker key once for `ttlMs` (SET NX PX): false when it was set already (a replay). */
  async claimOnce(name: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(this.key(name), '1', 'PX', ttlMs, 'NX')) === 'OK';
  }

  /** claimed tells whether a claimOnce marker is set (a replay), without setting it. */
  async claimed(name: string): Promise<boolean> {
    return (await this.redis.exists(this.key(name))) === 1;
  }

  /**
   * rateLimit counts a hit in a fixed window of `windowMs` and answers 0 when it is within `max`, else the ms
   * until the window ends (for Retry-After).
   */
  async rateLimit(name: string, max: number, windowMs: number): Promise<number> {
    const key = this.key(`rate:${name}:${Math.floor(Date.now() / windowMs)}`);
    const [[, count]] = (await this.redis.multi().incr(key).pexpire(key, windowMs).exec()) as [[unknown, number]];
    return count <= max ? 0 : windowMs - (Date.now() % windowMs);
  }
}

/** parseRun reads a stored run; Lua's cjson writes an empty list as `{}`, so lists are normalized. */
function parseRun(raw: string): AutomationRun {
  const run = JSON.parse(raw) as AutomationRun;
  if (!Array.isArray(run.previous_session_ids)) run.previous_session_ids = [];
  return run;
}
