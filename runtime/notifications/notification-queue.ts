import { Job, Queue, type ConnectionOptions } from 'bullmq';
import type { NotificationStore } from '../../store/notification-store.ts';
import type { DeliveryJob, NotificationSettings } from './types.ts';

/** NOTIFY_QUEUE is the BullMQ queue of deliveries. */
export const NOTIFY_QUEUE = 'notify';

/** deliveryId is one delivery's id, job id and Idempotency-Key: stable per (event, preset, bridge). */
export const deliveryId = (eventId: string, preset: string, bridge: string) => `${eventId}:${preset}:${bridge}`;

/**
 * NotificationQueue adds deliveries to the `notify` queue: job id = delivery id, so adding the same delivery
 * again (a bus page handed over twice) is a no-op while the job exists; many attempts with a capped exponential
 * backoff (the worker's backoffStrategy), so a receiver that is down for a while gets everything once it is back.
 */
export class NotificationQueue {
  readonly queue: Queue;

  constructor(private readonly o: { connection: ConnectionOptions; prefix: string; store: NotificationStore; settings: NotificationSettings }) {
    this.queue = new Queue(NOTIFY_QUEUE, { connection: o.connection, prefix: o.prefix });
  }

  /** add enqueues deliveries (idempotent per delivery id). */
  async add(jobs: DeliveryJob[]): Promise<void> {
    if (!jobs.length) return;
    await this.queue.addBulk(jobs.map((data) => ({
      name: 'deliver', data,
      opts: {
        jobId: data.delivery_id, attempts: this.o.settings.attempts, backoff: { type: 'capped-exponential' },
        // NOTE: the delivery row (NotificationStore) is the readable record; finished jobs need not stay.
        removeOnComplete: true, removeOnFail: { age: 24 * 3600 },
      },
    })));
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
