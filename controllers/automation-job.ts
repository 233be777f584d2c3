import { runIdOf, type AutomationStore } from '../store/automation-store.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { ResourceRecord } from '../store/types.ts';
import { atJobId, desiredSchedule, jobOptionsFor, type AutomationQueue, type DesiredSchedule, type Retry, type Schedule } from '../runtime/automation/queue.ts';
import { parseDuration } from '../codecs/duration.ts';
import { missingAgent } from './dependencies.ts';
import { RegistryCache, RegistryController } from './registry-controller.ts';
import type { KindController, ReconcileResult, ResourceKey } from './types.ts';

/** AutomationJobControllerOptions configures an AutomationJobController. */
export interface AutomationJobControllerOptions {
  store: ResourceStore;
  queue: AutomationQueue;
  runs: AutomationStore;
}

interface JobSpec {
  enabled: boolean;
  agent_name?: string;
  starting_deadline?: string;
  schedule: Schedule;
  retry?: Retry;
}

/** ObservedScheduler is what BullMQ holds for a job's scheduler (the fields a plan compares). */
export interface ObservedScheduler {
  pattern?: string | null;
  every?: number | null;
  tz?: string | null;
  next?: number | null;
  opts?: { attempts?: number; backoff?: unknown };
}

/**
 * schedulerUpToDate: the scheduler repeats as desired, with the desired retry options, and has a next tick
 * (a pure function, tested as a table). NOTE: upserting an unchanged scheduler would move its pending tick, so
 * a resync must not do it.
 */
export function schedulerUpToDate(want: Extract<DesiredSchedule, { type: 'scheduler' }>, retry: Retry | undefined, got: ObservedScheduler | undefined): boolean {
  if (!got?.next) return false;
  const opts = jobOptionsFor(retry);
  const same = want.pattern ? got.pattern === want.pattern && (got.tz ?? 'UTC') === want.tz && !got.every : Number(got.every) === want.every && !got.pattern;
  return same && got.opts?.attempts === opts.attempts && JSON.stringify(got.opts?.backoff) === JSON.stringify(opts.backoff);
}

/**
 * AutomationJobController reconciles `automation.job` records the way a Kubernetes CronJob controller does: it
 * projects the record into its registry (as every registry kind does), then makes the `automation` queue match
 * it: an enabled `cron` or `every` job owns a BullMQ job scheduler (scheduler id = record id; `cron` in its
 * `schedule.timezone`, UTC by default), an enabled `at` job one delayed firing with a stable job id (never again
 * once its run exists), and a disabled, deleted or undecodable job neither. Status says what is scheduled:
 * `next_fire_at` and `schedule`.
 */
export class AutomationJobController implements KindController {
  readonly kind = 'automation.job';
  private readonly registry: RegistryController;
  private readonly registries: RegistryCache;

  constructor(private readonly o: AutomationJobControllerOptions) {
    this.registry = new RegistryController({ kind: this.kind, store: o.store });
    this.registries = new RegistryCache(o.store);
  }

  async reconcile(key: ResourceKey, record: ResourceRecord | undefined): Promise<ReconcileResult> {
    const projected = await this.registry.reconcile(key, record);
    const spec = record?.spec as JobSpec | undefined;
    // NOTE: a job whose agent does not exist would only fail when it fires; it holds no schedule until the agent
    // is written, which re-reconciles it (DEPENDS_ON_AGENTS).
    const missing = record && spec?.enabled && projected.outcome === 'ready' ? await missingAgent(this.registries, spec.agent_name, record.scope) : undefined;
    const want = record && spec && projected.outcome === 'ready' && !missing ? desiredSchedule(spec.enabled, spec.schedule) : { type: 'none' as const };
    const { queue } = this.o;
    if (want.type !== 'scheduler') await queue.removeScheduler(key.id);
    if (want.type !== 'at') await queue.removeAt(key.id);
    if (projected.outcome === 'degraded') return projected;
    if (!record) return { outcome: 'ready', message: 'removed: no schedule' };
    if (missing) return { outcome: 'degraded', reason: 'AgentNotFound', message: `${missing}: the job does not fire until it does`, fields: { next_fire_at: null, schedule: 'waiting for its agent' } };
    if (want.type === 'none') return { outcome: 'ready', message: 'disabled: no schedule', fields: { next_fire_at: null, schedule: 'disabled' } };
    if (want.type === 'at') {
      if (Number.isNaN(want.at)) return { outcome: 'degraded', reason: 'InvalidSchedule', message: 'schedule.time is not a time' };
      const due = new Date(want.at).toISOString();
      const schedule = `at ${spec!.schedule.time}`;
      const fired = await this.o.runs.get(runIdOf(atJobId(key.id, want.at)));
      if (fired) return { outcome: 'ready', message: `fired once, due at ${due}: run ${fired.id} ${fired.status}${fired.reason ? ` (${fired.reason})` : ''}`, fields: { next_fire_at: null, schedule } };
      // NOTE: as CronJob's startingDeadlineSeconds decides: a one-shot whose time passed fires at once, unless it is
      // later than its starting_deadline, when it never fires.
      const deadline = spec!.starting_deadline ? parseDuration(spec!.starting_deadline) : undefined;
      const late = Date.now() - want.at;
      if (deadline && late > deadline) return { outcome: 'ready', message: `missed: due at ${due}, more than its starting_deadline ${spec!.starting_deadline} ago, so it does not fire`, fields: { next_fire_at: null, schedule } };
      await queue.addAt(key.id, want.at, spec!.retry);
      const message = late > 0 ? `was due at ${due}, which has passed: fires once now` : `fires once at ${due}`;
      return { outcome: 'ready', message, fields: { next_fire_at: new Date(Math.max(want.at, Date.now())).toISOString(), schedule } };
    }
    const got = await queue.scheduler(key.id) as ObservedScheduler | undefined;
    if (!schedulerUpToDate(want, spec!.retry, got ? { ...got, opts: (got as { template?: { opts?: ObservedScheduler['opts'] } }).template?.opts } : undefined)) {
      await queue.upsertScheduler(key.id, want, spec!.retry);
    }
    const next = (await queue.scheduler(key.id))?.next;
    const schedule = want.pattern ? `cron ${want.pattern} (${want.tz})` : `every ${spec!.schedule.interval}`;
    return { outcome: 'ready', message: `scheduled: ${schedule}`, fields: { next_fire_at: next ? new Date(next).toISOString() : null, schedule } };
  }
}
