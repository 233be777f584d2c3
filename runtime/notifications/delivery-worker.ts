import { UnrecoverableError, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { WEBHOOK_PROVIDER, type WebhookProviderConfig } from '../../codecs/bridge-instance.ts';
import type { RegistryCache, RegistryEntry } from '../../controllers/registry-controller.ts';
import type { EventBus } from '../../store/event-bus.ts';
import type { NotificationStore } from '../../store/notification-store.ts';
import type { Metrics } from '../process/metrics.ts';
import { repeatedErrors } from '../process/repeated-errors.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { deliveryUpdated } from './delivery-events.ts';
import { BATCH_JOB, backoffDelay, NOTIFY_QUEUE, type NotificationQueue } from './notification-queue.ts';
import type { DeliveryBatch, DeliveryJob, DeliveryRecord, NotificationSettings } from './types.ts';
import {
  HEADER_ATTEMPT, HEADER_EVENT_TYPE, HEADER_IDEMPOTENCY, HEADER_SIGNATURE, HEADER_TIMESTAMP, resolveWebhookSecrets, webhookHeaders, webhookSignature, type WebhookClient,
} from './webhook.ts';

/** DeliveryWorkerOptions configures a DeliveryWorker. */
export interface DeliveryWorkerOptions {
  connection: ConnectionOptions;
  prefix: string;
  store: NotificationStore;
  /** Where a delivery its batch did not get through goes on as its own retry job. */
  queue: NotificationQueue;
  /** Where each row change is announced (notification.delivery_updated). */
  bus: EventBus;
  bridges: RegistryCache;
  client: WebhookClient;
  security: SecurityPolicy;
  settings: NotificationSettings;
  metrics?: Metrics;
  logger: Logger;
  /** Called when a receiver did not take a delivery, so the bridge's health is looked at again now. */
  onBridgeFailure?: (bridgeId: string) => Promise<void>;
  /**
   * Called when a delivery went through after the receiver refused one (a retry, or a new delivery after a fault seen
   * by this process): the receiver takes deliveries again, so the bridge's other waiting ones go now. NOTE: the probe alone can miss a recovery (a receiver whose health path answered while its POSTs failed).
   */
  onBridgeRecovered?: (bridgeId: string) => Promise<void>;
}

type BridgeSpec = { enabled?: boolean; notification_suppress?: boolean; extension_name?: string; provider_config?: WebhookProviderConfig };

/**
 * Target is what a bridge does with a delivery: end it for good (gone, disabled, not a webhook), wait (a secret
 * did not resolve: the attempt counts and is retried), or POST it with the bridge's resolved headers and key.
 */
type Target =
  | { kind: 'end'; status: 'failed' | 'skipped'; error: string }
  | { kind: 'wait'; error: string }
  | { kind: 'post'; url: string; headers: Record<string, string>; signingKey?: string };

/** Attempted is one delivery's attempt: its job, the row it leaves, and whether the receiver refused it. */
type Attempted = { job: DeliveryJob; row: DeliveryRecord; receiverFault: boolean };

/** Slots bounds the POSTs in flight across every job of one worker (NOTIFY_CONCURRENCY). */
class Slots {
  private readonly waiting: (() => void)[] = [];

  constructor(private free: number) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    }
  }
}

/**
 * DeliveryWorker runs the `notify` queue. A batch job carries a routed page's deliveries to one bridge: the bridge
 * and its secrets are read once, each delivery is POSTed once (at most NOTIFY_CONCURRENCY POSTs in flight per
 * process, on keep-alive connections), then every row is written in one transaction and announced in one bus
 * write. A delivery the receiver did not take goes on as its own `deliver` job (id = delivery id), retried with
 * backoff until delivered or failed after the last attempt. 2xx is delivered; anything else (another status, a
 * refused connection, a timeout) is retried; a bridge that is gone or does not deliver fails the delivery for
 * good; a disabled or suppressing bridge skips it. NOTE: a delivery whose worker dies after the POST but before
 * the row is written is POSTed again with the same Idempotency-Key (at least once); a batch POSTs only rows still
 * `pending` that no retry job owns (no attempt yet), so a batch run twice delivers nothing twice.
 */
export class DeliveryWorker {
  private worker?: Worker<DeliveryJob | DeliveryBatch>;
  /** The bridges whose receiver refused a delivery in this process since one last went through. */
  private readonly faulted = new Set<string>();
  private readonly slots: Slots;

  constructor(private readonly o: DeliveryWorkerOptions) {
    this.slots = new Slots(o.settings.concurrency);
  }

  start(): void {
    const { connection, prefix, settings } = this.o;
    this.worker = new Worker<DeliveryJob | DeliveryBatch>(NOTIFY_QUEUE, (job) => (job.name === BATCH_JOB ? this.deliverBatch(job as Job<DeliveryBatch>) : this.deliver(job as Job<DeliveryJob>)), {
      connection, prefix, concurrency: settings.concurrency, autorun: true,
      lockDuration: Math.max(30_000, settings.timeoutMs * 3),
      // NOTE: a retry job counts on from the attempts its batch made, so its backoff goes on doubling from there.
      settings: { backoffStrategy: (attemptsMade, _type, _err, job) => backoffDelay(attemptsMade + ((job?.data as DeliveryJob | undefined)?.attempts_made ?? 0), settings) },
    });
    this.worker.on('error', repeatedErrors.listener(this.o.logger, 'error', 'notification worker error'));
  }

  async stop(): Promise<void> {
    await this.worker?.close();
  }

  /** deliverBatch attempts a page's deliveries to one bridge once each; see the class comment. */
  private async deliverBatch(job: Job<DeliveryBatch>): Promise<void> {
    const { bridge_id: bridgeId, deliveries } = job.data;
    const stored = await this.o.store.deliveries(deliveries.map((d) => d.delivery_id));
    const todo: DeliveryJob[] = [];
    const owned: DeliveryJob[] = [];
    deliveries.forEach((d, i) => {
      // NOTE: a row trimmed away by retention before its first attempt is still delivered (at least once).
      const row = stored[i] ? (JSON.parse(stored[i]!) as DeliveryRecord) : undefined;
      if (!row) todo.push(d);
      else if (row.status !== 'pending') return;
      else if (row.attempts > 0) owned.push({ ...d, attempts_made: row.attempts });
      else todo.push(d);
    });
    // A batch that died after writing its rows but before adding its retries adds them now (a no-op if they exist).
    await this.o.queue.retry(owned);
    if (!todo.length) return;
    const last = this.o.settings.attempts <= 1;
    const target = await this.target(bridgeId);
    const done = await Promise.all(todo.map(async (d) => this.attempt(d, 1, last, target)));
    await this.record(bridgeId, done);
    await this.o.queue.retry(done.filter((a) => a.row.status === 'pending').map((a) => ({ ...a.job, attempts_made: 1 })));
  }

  /** deliver is one retry of one delivery; it throws to have BullMQ retry it with backoff, or fail it. */
  private async deliver(job: Job<DeliveryJob>): Promise<void> {
    const made = job.data.attempts_made ?? 0;
    const attempt = made + job.attemptsMade + 1;
    const last = attempt >= made + (job.opts.attempts ?? this.o.settings.attempts);
    const target = await this.target(job.data.bridge_id);
    const a = await this.attempt(job.data, attempt, last, target);
    await this.record(job.data.bridge_id, [a]);
    if (a.row.status === 'delivered' || a.row.status === 'skipped') return;
    if (target.kind === 'end') throw new UnrecoverableError(a.row.last_error);
    throw new Error(a.row.last_error);
  }

  /** target reads a bridge and resolves its secrets, once per job. */
  private async target(bridgeId: string): Promise<Target> {
    const bridge = (await this.o.bridges.read(['bridge.instance'])).entries['bridge.instance'].find((b) => b.id === bridgeId) as RegistryEntry | undefined;
    const spec = bridge?.spec as BridgeSpec | undefined;
    if (!spec) return { kind: 'end', status: 'failed', error: `bridge "${bridgeId}" does not exist` };
    if (!spec.enabled || spec.notification_suppress) return { kind: 'end', status: 'skipped', error: spec.enabled ? 'the bridge suppresses notifications' : 'the bridge is disabled' };
    if (spec.extension_name !== WEBHOOK_PROVIDER || !spec.provider_config) {
      return { kind: 'end', status: 'failed', error: `bridge provider "${spec.extension_name}" is not installed; only the built-in webhook provider delivers` };
    }
    const cfg = spec.provider_config;
    const secrets = await resolveWebhookSecrets(cfg, this.o.security);
    if (secrets.problem) return { kind: 'wait', error: secrets.problem };
    return { kind: 'post', url: cfg.url, headers: webhookHeaders(cfg, secrets), signingKey: secrets.signingKey };
  }

  /** attempt POSTs one delivery (or not, per its target) and says which row that leaves. */
  private async attempt(job: DeliveryJob, attempt: number, last: boolean, target: Target): Promise<Attempted> {
    const { event } = job;
    const row = (status: DeliveryRecord['status'], extra: Partial<DeliveryRecord> = {}): DeliveryRecord => ({
      id: job.delivery_id, event_id: event.id, event_type: event.type, preset: job.preset, bridge_id: job.bridge_id, status, attempts: attempt,
      last_error: '', last_status: 0, created_at: job.created_at, updated_at: new Date().toISOString(), delivered_at: '', ...extra,
    });
    const retryable = last ? 'failed' : 'pending';
    if (target.kind === 'end') return { job, row: row(target.status, { last_error: target.error }), receiverFault: false };
    if (target.kind === 'wait') return { job, row: row(retryable, { last_error: target.error }), receiverFault: false };
    const body = JSON.stringify(event);
    const timestamp = String(Math.floor(Date.now() / 1000));
    const headers: Record<string, string> = {
      ...target.headers,
      [HEADER_IDEMPOTENCY]: job.delivery_id, [HEADER_EVENT_TYPE]: event.type, [HEADER_ATTEMPT]: String(attempt), [HEADER_TIMESTAMP]: timestamp,
      ...(target.signingKey ? { [HEADER_SIGNATURE]: webhookSignature(target.signingKey, timestamp, body) } : {}),
    };
    const res = await this.slots.run(() => this.o.client.post(target.url, headers, body, this.o.settings.timeoutMs));
    if (res.status >= 200 && res.status < 300) {
      const now = new Date();
      this.o.metrics?.notificationLatency.observe(Math.max(0, (now.getTime() - Date.parse(event.timestamp)) / 1000));
      return { job, row: row('delivered', { last_status: res.status, delivered_at: now.toISOString() }), receiverFault: false };
    }
    // NOTE: the receiver's body is never read into the row: it could echo what it was sent.
    const why = res.status ? `the receiver answered ${res.status} (http_status)` : `the receiver is unreachable (${res.error ?? 'no answer'})`;
    return { job, row: row(retryable, { last_error: why, last_status: res.status }), receiverFault: true };
  }

  /**
   * record writes the rows of one job's attempts and announces them (a failed announcement is logged, never fails
   * the deliveries), then tells the bridge controller once what the receiver did.
   */
  private async record(bridgeId: string, done: Attempted[]): Promise<void> {
    const { store, bus, metrics, logger } = this.o;
    await store.updateDeliveries(done.map((a) => a.row));
    await bus.publishMany(done.map((a) => deliveryUpdated(a.row, a.job.event.workspace_id)))
      .catch((err) => logger.warn({ err: (err as Error).message, bridge: bridgeId }, 'delivery events not published'));
    for (const { row } of done) metrics?.notificationDeliveries.inc({ outcome: row.status === 'pending' ? 'retry' : row.status });
    if (done.some((a) => a.receiverFault)) {
      this.faulted.add(bridgeId);
      await this.o.onBridgeFailure?.(bridgeId).catch((err) => logger.warn({ err: (err as Error).message, bridge: bridgeId }, 'bridge re-check not enqueued'));
    } else if (done.some((a) => a.row.status === 'delivered') && (this.faulted.delete(bridgeId) || done.some((a) => a.row.attempts > 1))) {
      // NOTE: a retry that went through, or the first delivery through after a fault here, means the receiver is back.
      await this.o.onBridgeRecovered?.(bridgeId).catch((err) => logger.warn({ err: (err as Error).message, bridge: bridgeId }, 'waiting deliveries not promoted'));
    }
  }
}
