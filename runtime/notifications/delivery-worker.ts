import { UnrecoverableError, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { WEBHOOK_PROVIDER, type WebhookProviderConfig } from '../../codecs/bridge-instance.ts';
import type { RegistryCache, RegistryEntry } from '../../controllers/registry-controller.ts';
import type { EventBus } from '../../store/event-bus.ts';
import type { NotificationStore } from '../../store/notification-store.ts';
import type { Metrics } from '../process/metrics.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { deliveryUpdated } from './delivery-events.ts';
import { NOTIFY_QUEUE } from './notification-queue.ts';
import type { DeliveryJob, DeliveryRecord, NotificationSettings } from './types.ts';
import {
  HEADER_ATTEMPT, HEADER_EVENT_TYPE, HEADER_IDEMPOTENCY, HEADER_SIGNATURE, HEADER_TIMESTAMP, resolveWebhookSecrets, webhookSignature, type WebhookClient,
} from './webhook.ts';

/** DeliveryWorkerOptions configures a DeliveryWorker. */
export interface DeliveryWorkerOptions {
  connection: ConnectionOptions;
  prefix: string;
  store: NotificationStore;
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

/** backoffDelay is the wait before retry `attempt` (1-based): doubling from backoffMs up to maxBackoffMs, ±10% jitter. */
export function backoffDelay(attempt: number, s: Pick<NotificationSettings, 'backoffMs' | 'maxBackoffMs'>, random = Math.random): number {
  const base = Math.min(s.maxBackoffMs, s.backoffMs * 2 ** Math.min(30, Math.max(0, attempt - 1)));
  return Math.round(base * (0.9 + 0.2 * random()));
}

/**
 * DeliveryWorker runs the `notify` queue: each job POSTs one delivered event to one bridge. 2xx is delivered;
 * anything else (another status, a refused connection, a timeout) throws, so BullMQ retries with backoff; the
 * delivery row says where it stands after every attempt. A bridge that is gone or does not deliver fails the
 * delivery for good; a disabled or suppressing bridge skips it. Each row written is announced on the bus. NOTE: a delivery whose worker dies after the
 * POST but before the row is written is POSTed again with the same Idempotency-Key (at least once).
 */
export class DeliveryWorker {
  private worker?: Worker<DeliveryJob>;
  /** The bridges whose receiver refused a delivery in this process since one last went through. */
  private readonly faulted = new Set<string>();

  constructor(private readonly o: DeliveryWorkerOptions) {}

  start(): void {
    const { connection, prefix, settings } = this.o;
    this.worker = new Worker<DeliveryJob>(NOTIFY_QUEUE, (job) => this.deliver(job), {
      connection, prefix, concurrency: settings.concurrency, autorun: true,
      lockDuration: Math.max(30_000, settings.timeoutMs * 3),
      settings: { backoffStrategy: (attemptsMade) => backoffDelay(attemptsMade, settings) },
    });
    this.worker.on('error', (err) => this.o.logger.error({ err: err.message }, 'notification worker error'));
  }

  async stop(): Promise<void> {
    await this.worker?.close();
  }

  private async deliver(job: Job<DeliveryJob>): Promise<void> {
    const { settings, metrics } = this.o;
    const { event, bridge_id: bridgeId, preset, delivery_id: id } = job.data;
    const ws = event.workspace_id;
    const attempt = job.attemptsMade + 1;
    const last = attempt >= (job.opts.attempts ?? settings.attempts);
    const row = (status: DeliveryRecord['status'], extra: Partial<DeliveryRecord> = {}): DeliveryRecord => ({
      id, event_id: event.id, event_type: event.type, preset, bridge_id: bridgeId, status, attempts: attempt,
      last_error: '', last_status: 0, created_at: job.data.created_at, updated_at: new Date().toISOString(), delivered_at: '', ...extra,
    });
    const bridge = (await this.o.bridges.read(['bridge.instance'])).entries['bridge.instance'].find((b) => b.id === bridgeId) as RegistryEntry | undefined;
    const spec = bridge?.spec as { enabled?: boolean; notification_suppress?: boolean; extension_name?: string; provider_config?: WebhookProviderConfig } | undefined;
    if (!spec) return this.fail(row('failed', { last_error: `bridge "${bridgeId}" does not exist` }), ws);
    if (!spec.enabled || spec.notification_suppress) {
      metrics?.notificationDeliveries.inc({ outcome: 'skipped' });
      await this.save(row('skipped', { last_error: spec.enabled ? 'the bridge suppresses notifications' : 'the bridge is disabled' }), ws);
      return;
    }
    if (spec.extension_name !== WEBHOOK_PROVIDER || !spec.provider_config) {
      return this.fail(row('failed', { last_error: `bridge provider "${spec.extension_name}" is not installed; only the built-in webhook provider delivers` }), ws);
    }
    const cfg = spec.provider_config;
    const secrets = await resolveWebhookSecrets(cfg, this.o.security);
    if (secrets.problem) return this.retry(row(last ? 'failed' : 'pending', { last_error: secrets.problem }), ws, last, false);
    const body = JSON.stringify(event);
    const timestamp = String(Math.floor(Date.now() / 1000));
    const headers: Record<string, string> = {
      ...(cfg.headers ?? {}), ...secrets.headers,
      [HEADER_IDEMPOTENCY]: id, [HEADER_EVENT_TYPE]: event.type, [HEADER_ATTEMPT]: String(attempt), [HEADER_TIMESTAMP]: timestamp,
      ...(secrets.signingKey ? { [HEADER_SIGNATURE]: webhookSignature(secrets.signingKey, timestamp, body) } : {}),
    };
    const res = await this.o.client.post(cfg.url, headers, body, settings.timeoutMs);
    if (res.status >= 200 && res.status < 300) {
      const now = new Date();
      metrics?.notificationDeliveries.inc({ outcome: 'delivered' });
      metrics?.notificationLatency.observe(Math.max(0, (now.getTime() - Date.parse(event.timestamp)) / 1000));
      await this.save(row('delivered', { last_status: res.status, delivered_at: now.toISOString() }), ws);
      // NOTE: a retry that went through, or the first delivery through after a fault here, means the receiver is back.
      if (this.faulted.delete(bridgeId) || attempt > 1) await this.o.onBridgeRecovered?.(bridgeId).catch((err) => this.o.logger.warn({ err: (err as Error).message, bridge: bridgeId }, 'waiting deliveries not promoted'));
      return;
    }
    // NOTE: the receiver's body is never read into the row: it could echo what it was sent.
    const why = res.status ? `the receiver answered ${res.status}` : `the receiver is unreachable (${res.error ?? 'no answer'})`;
    return this.retry(row(last ? 'failed' : 'pending', { last_error: why, last_status: res.status }), ws, last, true);
  }

  /** save writes a delivery's row and announces it; a failed announcement is logged, never fails the delivery. */
  private async save(r: DeliveryRecord, workspaceId: string | undefined): Promise<void> {
    await this.o.store.updateDelivery(r);
    await this.o.bus.publish(deliveryUpdated(r, workspaceId)).catch((err) => this.o.logger.warn({ err: (err as Error).message, delivery: r.id }, 'delivery event not published'));
  }

  private async fail(r: DeliveryRecord, workspaceId: string | undefined): Promise<never> {
    this.o.metrics?.notificationDeliveries.inc({ outcome: 'failed' });
    await this.save(r, workspaceId);
    throw new UnrecoverableError(r.last_error);
  }

  private async retry(r: DeliveryRecord, workspaceId: string | undefined, last: boolean, receiverFault: boolean): Promise<never> {
    const bridgeId = r.bridge_id;
    this.o.metrics?.notificationDeliveries.inc({ outcome: last ? 'failed' : 'retry' });
    await this.save(r, workspaceId);
    if (receiverFault) this.faulted.add(bridgeId);
    if (receiverFault) await this.o.onBridgeFailure?.(bridgeId).catch((err) => this.o.logger.warn({ err: (err as Error).message, bridge: bridgeId }, 'bridge re-check not enqueued'));
    throw new Error(r.last_error);
  }
}
