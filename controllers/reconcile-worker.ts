import { DelayedError, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { repeatedErrors } from '../runtime/process/repeated-errors.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { Metrics } from '../runtime/process/metrics.ts';
import { queuePrefix } from '../store/keys.ts';
import { queueName } from './queues.ts';
import { reconcileStatus } from './status.ts';
import type { KindController, ReconcileResult, ResourceKey } from './types.ts';

/** LEASE_MS bounds a reconcile's hold on its key (reconciles take milliseconds); DEFER_MS spaces retries of a deferred run. */
export const LEASE_MS = 10_000;
const DEFER_MS = 100;

type Snapshot = Awaited<ReturnType<ResourceStore['snapshot']>>;

/** ReconcileWorkerOptions configures the executor of one kind's controller. */
export interface ReconcileWorkerOptions {
  controller: KindController;
  store: ResourceStore;
  connection: ConnectionOptions;
  /** The store's key prefix: the kind's queue has its own hash tag under it (store/keys.ts queuePrefix). */
  prefix: string;
  concurrency: number;
  metrics: Metrics;
  logger: Logger;
  /** requeue adds a delayed reconcile of a key (a result's `requeueAfterMs`); a write still reconciles it at once. */
  requeue?: (key: ResourceKey, delayMs: number) => Promise<void>;
}

/**
 * ReconcileWorker runs one kind's controller on its BullMQ queue: read the record and the revision, reconcile,
 * and map the outcome to a status in one place. A thrown error retries with exponential backoff (BullMQ) and
 * leaves the observed revision alone, so `?wait=true` keeps waiting; `degraded` is terminal.
 */
export class ReconcileWorker {
  private worker?: Worker;

  constructor(private readonly o: ReconcileWorkerOptions) {}

  start(): void {
    const { controller, connection, prefix, concurrency } = this.o;
    this.worker = new Worker(queueName(controller.kind), (job, token) => this.process(job, token), {
      connection, prefix: queuePrefix(prefix, queueName(controller.kind)), concurrency, autorun: true,
      // NOTE: a killed controller's active job is picked up by another worker once its lock lapses.
      lockDuration: 10_000,
      stalledInterval: 5_000,
    });
    this.worker.on('error', repeatedErrors.listener(this.o.logger, 'error', 'reconcile worker error', { kind: controller.kind }));
  }

  /** stop finishes in-flight reconciles and closes the worker. */
  async stop(): Promise<void> {
    await this.worker?.close();
  }

  private async process(job: Job<{ id: string }>, token?: string): Promise<void> {
    const { controller, store, metrics } = this.o;
    const kind = controller.kind;
    const id = job.data.id;
    // NOTE: BullMQ runs one job per key, except when a worker's job lock lapses (a starved event loop) and the
    // stalled checker hands the still-running job to another worker. A per-key lease closes that gap: a run
    // that finds the key leased is deferred, never run alongside. A run that finishes without its lease (it
    // outlived LEASE_MS) may have overlapped; that is counted (metric and Redis) so it can be alerted on and tested.
    const lease = store.keys.lock(`reconciling:${kind}:${id}`);
    const holder = `${process.pid}:${job.id}:${token}`;
    // NOTE: the snapshot is read in the same round trip, after the lease on the one connection; unused if deferred.
    const [took, snapshot] = await Promise.all([store.redis.set(lease, holder, 'PX', LEASE_MS, 'NX'), store.snapshot(kind, id)]);
    if (took !== 'OK') {
      metrics.reconcileDeferrals.inc({ kind });
      await job.moveToDelayed(Date.now() + DEFER_MS, token);
      throw new DelayedError();
    }
    const end = metrics.reconcileDuration.startTimer({ kind });
    // NOTE: the release is issued right after the status write (not after its reply): one connection runs
    // them in that order, and the key's next reconcile waits on the lease, not on this reply.
    let released: Promise<number> | undefined;
    const release = () => (released ??= store.redis.releaseLease(lease, holder));
    try {
      await this.reconcileOnce(kind, id, snapshot, job, end, release);
    } finally {
      if ((await release()) !== 1) {
        metrics.reconcileOverlaps.inc({ kind });
        await store.redis.incr(store.keys.lock('reconcile-overlaps'));
      }
    }
  }

  private async reconcileOnce(kind: string, id: string, snapshot: Snapshot, job: Job<{ id: string }>, end: () => void, release: () => Promise<number>): Promise<void> {
    const { controller, store, metrics, logger } = this.o;
    const { record, revision, status: prev } = snapshot;
    let result: ReconcileResult;
    try {
      result = await controller.reconcile({ kind, id }, record, prev);
    } catch (err) {
      end();
      metrics.reconciles.inc({ kind, outcome: 'error' });
      const message = err instanceof Error ? err.message : String(err);
      logger.warn({ kind, id, attempt: job.attemptsMade + 1, err: message }, 'reconcile failed; will retry');
      if (record) {
        const failed = reconcileStatus(prev, prev?.observed_version ?? 0, { outcome: 'degraded', reason: 'ReconcileError', message }, false);
        await store.writeStatus(kind, id, failed, 0);
      }
      throw err;
    }
    end();
    metrics.reconciles.inc({ kind, outcome: result.outcome });
    const status = record ? reconcileStatus(prev, record.version, result, true) : undefined;
    await Promise.all([store.writeStatus(kind, id, status, revision), release()]);
    if (record && result.requeueAfterMs !== undefined) await this.o.requeue?.({ kind, id }, result.requeueAfterMs);
  }
}
