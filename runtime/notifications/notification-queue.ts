import { createHash } from 'node:crypto';
import { Job, Queue, type ConnectionOptions, type JobsOptions } from 'bullmq';
import { quietQueue } from '../../store/connections.ts';
import type { NotificationStore } from '../../store/notification-store.ts';
import type { DeliveryBatch, DeliveryJob, NotificationSettings } from './types.ts';

/** NOTIFY_QUEUE is the BullMQ queue of deliveries. */
export const NOTIFY_QUEUE = 'notify';

/** The job names of the `notify` queue: a routed page's deliveries to one bridge, and one delivery's retry. */
export const BATCH_JOB = 'batch';
export const DELIVER_JOB = 'deliver';

/** deliveryId is one delivery's id, its retry job's id and Idempotency-Key: stable per (event, preset, bridge). */
export const deliveryId = (eventId: string, preset: string, bridge: string) => `${eventId}:${preset}:${bridge}`;

/**
 * batchJobId names a batch by the deliveries it carries, so the same page routed again while its batch waits
 * or runs adds nothing. NOTE: a hash, because a BullMQ custom id may hold ':' only as exactly two separators.
 */
export const batchJobId = (b: DeliveryBatch) =>
  `batch-${createHash('sha1').update(b.bridge_id).update('\n').update(b.deliveries.map((d) => d.delivery_id).join('\n')).digest('hex')}`;

/** backoffDelay is the wait before retry `attempt` (1-based): doubling from backoffMs up to maxBackoffMs, ±10% jitter. */
export function backoffDelay(attempt: number, s: Pick<NotificationSettings, 'backoffMs' | 'maxBackoffMs'>, random = Math.random): number {
  const base = Math.min(s.maxBackoffMs, s.backoffMs * 2 ** Math.min(30, Math.max(0, attempt - 1)));
  return Math.round(base * (0.9 + 0.2 * random()));
}

/**
 * NotificationQueue adds deliveries to the `notify` queue: a routed page's deliveries as one batch job per bridge,
 * and a delivery its batch did not get through as its own retry job (job id = delivery id) with many attempts and
 * a capped exponential backoff (the worker's backoffStrategy), so a receiver that is down for a while gets
 * everything once it is back. Both ids are stable, so adding the same again is a no-op while the job exists.
 */
export class NotificationQueue {
  readonly queue: Queue;

  constructor(private readonly o: { connection: ConnectionOptions; prefix: string; store: NotificationStore; settings: NotificationSettings }) {
    this.queue = quietQueue(new Queue(NOTIFY_QUEUE, { connection: o.connection, prefix: o.prefix }));
  }

  /** addBatches enqueues one job per batch (idempotent per set of delivery ids). */
  async addBatches(batches: DeliveryBatch[]): Promise<void> {
    if (!batches.length) return;
    await this.queue.addBulk(batches.map((data) => ({ name: BATCH_JOB, data, opts: { ...this.common(this.o.settings.attempts), jobId: batchJobId(data) } })));
  }

  /**
   * retry enqueues each delivery as its own job (idempotent per delivery id), due after the backoff of the
   * attempts it already made; its remaining attempts are what the settings allow beyond those.
   */
  async retry(jobs: DeliveryJob[]): Promise<void> {
    if (!jobs.length) return;
    await this.queue.addBulk(jobs.map((data) => {
      const made = data.attempts_made ?? 0;
      return {
        name: DELIVER_JOB, data,
        opts: { ...this.common(Math.max(1, this.o.settings.attempts - made)), jobId: data.delivery_id, delay: made ? backoffDelay(made, this.o.settings) : 0 },
      };
    }));
  }

  private common(attempts: number): JobsOptions {
    // NOTE: the delivery row (NotificationStore) is the readable record; finished jobs need not stay.
    return { attempts, backoff: { type: 'capped-exponential' }, removeOnComplete: true, removeOnFail: { age: 24 * 3600 } };
  }

  /**
   * promotePending retries at once every delivery to `bridge` that waits out a backoff (its receiver is back:
   * the bridge controller saw it answer again), instead of after the rest of the backoff.
   */
  async promotePending(bridge: string): Promise<number> {
    let promoted = 0;
    for (const id of (await this.o.store.pendingFor(bridge)).slice(0, 10_000)) {
      const job = await Job.fromId(this.queue, id);
      if (!job || !(await job.isDelayed())) continue;
      try {
        await job.promote();
        promoted++;
      } catch {
        // NOTE: the job left the delayed set in between (its timer fired): nothing to do.
      }
    }
    return promoted;
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
