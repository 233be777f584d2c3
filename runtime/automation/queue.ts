import { Queue, type ConnectionOptions, type JobsOptions } from 'bullmq';
import { parseDuration } from '../../codecs/duration.ts';
import { quietQueue } from '../../store/connections.ts';
import { AUTOMATION_QUEUE, type FireData } from './types.ts';

/** Schedule is a job's `schedule` as the codec leaves it. */
export interface Schedule {
  mode: 'cron' | 'every' | 'at';
  expr?: string;
  interval?: string;
  time?: string;
  timezone?: string;
}

/** Retry is a job's or trigger's `retry`. */
export interface Retry {
  strategy: string;
  max_retries: number;
  base_delay: string;
}

/** DesiredSchedule is what a job's BullMQ side should be: a repeating scheduler, a one-off delayed job, or nothing. */
export type DesiredSchedule =
  | { type: 'scheduler'; pattern?: string; tz?: string; every?: number }
  | { type: 'at'; at: number }
  | { type: 'none' };

/** INTERNAL_ATTEMPTS are the extra BullMQ attempts a firing gets beyond its retries: they absorb a crash or a Redis blip. */
const INTERNAL_ATTEMPTS = 2;

/**
 * jobOptionsFor is a firing's BullMQ options: attempts cover the record's retries (the executor decides whether a
 * failed run is retried; see AutomationExecutor) plus INTERNAL_ATTEMPTS, with the record's backoff base.
 */
export function jobOptionsFor(retry: Retry | undefined): JobsOptions {
  const backoff = retry?.strategy === 'backoff' ? parseDuration(retry.base_delay) ?? 1000 : 1000;
  return {
    attempts: (retry?.strategy === 'backoff' ? retry.max_retries : 0) + 1 + INTERNAL_ATTEMPTS,
    backoff: { type: 'exponential', delay: backoff },
    removeOnComplete: { count: 1000 },
    removeOnFail: { count: 1000 },
  };
}

/** maxAttemptsOf is how many times a run of a record may be tried (1 + max_retries with backoff). */
export const maxAttemptsOf = (retry: Retry | undefined) => (retry?.strategy === 'backoff' ? retry.max_retries : 0) + 1;

/** desiredSchedule maps an enabled job's schedule to its BullMQ side (a pure function). */
export function desiredSchedule(enabled: boolean, schedule: Schedule): DesiredSchedule {
  if (!enabled) return { type: 'none' };
  if (schedule.mode === 'cron') return { type: 'scheduler', pattern: schedule.expr!, tz: schedule.timezone || 'UTC' };
  if (schedule.mode === 'every') return { type: 'scheduler', every: parseDuration(schedule.interval ?? '') ?? 0 };
  return { type: 'at', at: Date.parse(schedule.time ?? '') };
}

/** atJobId is the stable BullMQ job id of a one-off (`at`) firing, so adding it twice adds it once. */
export const atJobId = (jobId: string, at: number) => `at.${jobId}.${at}`;

/** scheduledAtOf reads the due time of a scheduler tick from its job id (`repeat:<scheduler id>:<ms>`). */
export function scheduledAtOf(bullJobId: string | undefined): number | undefined {
  const m = /^repeat:.+:(\d+)$/.exec(bullJobId ?? '');
  return m ? Number(m[1]) : undefined;
}

/**
 * AutomationQueue is the `automation` BullMQ queue seen from the side that adds work: the job controller's
 * schedulers (one per enabled job, the scheduler id is the record id) and one-off `at` jobs, and the firings
 * triggers, webhooks and "fire now" add with stable job ids.
 */
export class AutomationQueue {
  readonly queue: Queue;

  constructor(connection: ConnectionOptions, readonly prefix: string) {
    this.queue = quietQueue(new Queue(AUTOMATION_QUEUE, { connection, prefix }));
  }

  /** upsertScheduler makes a job's scheduler repeat as `d` says (replacing any other schedule). */
  async upsertScheduler(jobId: string, d: Extract<DesiredSchedule, { type: 'scheduler' }>, retry: Retry | undefined): Promise<void> {
    const repeat = d.pattern ? { pattern: d.pattern, tz: d.tz } : { every: d.every };
    const data: FireData = { kind: 'job', job_id: jobId };
    await this.queue.upsertJobScheduler(jobId, repeat, { name: 'fire', data, opts: jobOptionsFor(retry) });
  }

  /** scheduler reads a job's scheduler: its repeat options, template and next due time; undefined when none. */
  async scheduler(jobId: string) {
    return (await this.queue.getJobScheduler(jobId)) ?? undefined;
  }

  /** removeScheduler removes a job's scheduler and its pending tick. */
  async removeScheduler(jobId: string): Promise<void> {
    await this.queue.removeJobScheduler(jobId);
  }

  /** addAt adds a job's one-off firing at `at` (at once when it is past); adding the same one again is a no-op. */
  async addAt(jobId: string, at: number, retry: Retry | undefined): Promise<void> {
    const data: FireData = { kind: 'job', job_id: jobId, fire_key: atJobId(jobId, at), scheduled_at: at };
    await this.queue.add('fire', data, { ...jobOptionsFor(retry), jobId: atJobId(jobId, at), delay: Math.max(0, at - Date.now()) });
  }

  /** atState is the state of a job's one-off firing (delayed, waiting, active, completed, failed) or undefined. */
  async atState(jobId: string, at: number): Promise<string | undefined> {
    const job = await this.queue.getJob(atJobId(jobId, at));
    return job ? await job.getState() : undefined;
  }

  /** removeAt removes a job's pending one-off firings (any `at` time); an active one finishes. */
  async removeAt(jobId: string): Promise<void> {
    const delayed = await this.queue.getDelayed(0, -1);
    await Promise.all(delayed.filter((j) => j.id?.startsWith(`at.${jobId}.`)).map((j) => j.remove().catch(() => undefined)));
  }

  /** fire adds one firing with a stable BullMQ job id: a second add with the same id while the first is kept is a no-op. */
  async fire(data: FireData, bullJobId: string, retry: Retry | undefined): Promise<void> {
    await this.queue.add('fire', data, { ...jobOptionsFor(retry), jobId: bullJobId });
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
