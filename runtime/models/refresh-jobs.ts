import { Queue, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { ChannelSignals } from '../../store/channel-signals.ts';
import { repeatedErrors } from '../process/repeated-errors.ts';
import { quietQueue } from '../../store/connections.ts';
import { Refresher, type RefreshTarget } from './refresher.ts';

/** MODELS_QUEUE is the BullMQ queue model catalog refreshes run on (its own hash tag, `{q:model-catalog}`). */
export const MODELS_QUEUE = 'model-catalog';
/** SCHEDULER_ID is the job scheduler whose ticks look for sources due a refresh. */
const SCHEDULER_ID = 'model-catalog-tick';
/** MAX_TICK_MS: a tick looks for due sources at least this often, so a provider added to the settings is refreshed soon. */
const MAX_TICK_MS = 60_000;

/** RefreshJob is one job's data: a source (and for a live source its provider), and whether freshness is ignored. */
interface RefreshJob { source_id: string; provider_id: string; force: boolean }

/** RefreshJobsOptions wire the refresh jobs. */
export interface RefreshJobsOptions {
  /** A BullMQ connection (maxRetriesPerRequest: null). */
  connection: ConnectionOptions;
  /** The queue's key prefix: `<prefix>{q:model-catalog}`. */
  queuePrefix: string;
  /** The store's connection: the refreshed channel is published and subscribed on it. */
  redis: Redis;
  /** The channel that announces finished jobs: `<prefix>{models}:refreshed`. */
  channel: string;
  refresher: Refresher;
  /** The targets a tick or a refresh-all covers (read at each, so the settings' providers are current). */
  targets: () => Promise<RefreshTarget[]>;
  ttlMs: number;
  logger: Logger;
  /** Refreshes a controller process runs at once. */
  concurrency?: number;
}

/**
 * jobIdOf is a target's job id, the deduplication key: one pending or running refresh per (provider, source), so
 * twenty concurrent refresh calls add one job and make one upstream request. NOTE: BullMQ ids may not hold `:`.
 */
export const jobIdOf = (t: { source_id: string }) => t.source_id.replace(/:/g, '--');

/**
 * RefreshJobs runs catalog refreshes as BullMQ jobs: on demand (the refresh routes, `?refresh=true`) and on a
 * schedule (a job scheduler ticking every min(MODEL_CATALOG_REFRESH, 1 min); each tick adds a job for every source
 * whose refresh is due, so each source keeps its own TTL). Any controller process runs them; any api process adds
 * them and waits for them through the `refreshed` channel.
 */
export class RefreshJobs {
  private readonly queue: Queue<RefreshJob>;
  private worker?: Worker<RefreshJob>;
  private readonly signals: ChannelSignals;

  constructor(private readonly o: RefreshJobsOptions) {
    this.queue = quietQueue(new Queue<RefreshJob>(MODELS_QUEUE, { connection: o.connection, prefix: o.queuePrefix }));
    this.signals = new ChannelSignals(o.redis, o.channel);
  }

  /** add queues a refresh of each target (merged into one already pending or running) and returns their job ids. */
  async add(targets: RefreshTarget[], force: boolean): Promise<string[]> {
    const jobs = targets.map((t) => {
      const k = Refresher.keyOf(t);
      const jobId = jobIdOf(k);
      return { name: 'refresh', data: { ...k, force }, opts: { jobId, removeOnComplete: true, removeOnFail: true, attempts: 1 } };
    });
    if (jobs.length) await this.queue.addBulk(jobs);
    return jobs.map((j) => j.opts.jobId);
  }

  /** wait resolves true once every job id has finished (is gone, completed or failed), false at the time limit. */
  async wait(jobIds: string[], timeoutMs: number): Promise<boolean> {
    const finished = (s: string) => s === 'unknown' || s === 'completed' || s === 'failed';
    const results = await Promise.all(jobIds.map((id) => this.signals.until(id, () => this.queue.getJobState(id), finished, { timeoutMs, recheckMs: 500, pollMs: 100 })));
    return results.every((s) => finished(s));
  }

  /** startWorker runs refreshes in this process (controller role) and schedules the ticks. */
  async startWorker(): Promise<void> {
    const { o } = this;
    this.worker = new Worker<RefreshJob>(MODELS_QUEUE, (job) => this.run(job), { connection: o.connection, prefix: o.queuePrefix, concurrency: o.concurrency ?? 4 });
    this.worker.on('error', repeatedErrors.listener(o.logger, 'error', 'model catalog worker error'));
    // NOTE: announced once BullMQ has moved the job to finished, so a waiter that reads its state then sees it done.
    const announce = (job?: Job<RefreshJob>) => { if (job?.id) void o.redis.publish(o.channel, job.id).catch(() => undefined); };
    this.worker.on('completed', announce);
    this.worker.on('failed', announce);
    await this.queue.upsertJobScheduler(SCHEDULER_ID, { every: Math.min(o.ttlMs, MAX_TICK_MS) }, { name: 'tick', data: { source_id: '', provider_id: '', force: false }, opts: { removeOnComplete: true, removeOnFail: true } });
    // NOTE: at start, so sources never refreshed (a new install, a provider added while stopped) are not left until the first tick.
    await this.add(await o.targets(), false);
  }

  private async run(job: Job<RefreshJob>): Promise<void> {
    const { o } = this;
    if (job.name === 'tick') {
      const due: RefreshTarget[] = [];
      for (const t of await o.targets()) if (!(await o.refresher.fresh(t))) due.push(t);
      await this.add(due, false);
      return;
    }
    const target = (await o.targets()).find((t) => {
      const k = Refresher.keyOf(t);
      return k.source_id === job.data.source_id && k.provider_id === job.data.provider_id;
    });
    // NOTE: a provider removed from the settings after its job was queued has nothing left to refresh.
    if (target) await o.refresher.refresh(target, job.data.force);
  }

  async stop(): Promise<void> {
    await this.worker?.close();
    this.signals.stop();
    await this.queue.close();
  }
}
