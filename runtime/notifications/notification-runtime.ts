import type { ConnectionOptions } from 'bullmq';
import type { Logger } from 'pino';
import { RegistryCache } from '../../controllers/registry-controller.ts';
import type { ResourceKey } from '../../controllers/types.ts';
import type { EventBus } from '../../store/event-bus.ts';
import { NotificationStore } from '../../store/notification-store.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { Metrics } from '../process/metrics.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { DeliveryWorker } from './delivery-worker.ts';
import { NotificationQueue } from './notification-queue.ts';
import { NotificationRouter } from './router.ts';
import { DEFAULT_NOTIFICATION_SETTINGS, type NotificationSettings } from './types.ts';
import { WebhookClient } from './webhook.ts';

/** NotificationRuntimeOptions configures the controller role's notification delivery. */
export interface NotificationRuntimeOptions {
  resources: ResourceStore;
  bus: EventBus;
  /** A connection with `maxRetriesPerRequest: null`, as BullMQ workers need. */
  bullConnection: ConnectionOptions;
  queuePrefix: string;
  security: SecurityPolicy;
  logger: Logger;
  metrics?: Metrics;
  settings?: Partial<NotificationSettings>;
  /** Enqueues a reconcile (a bridge whose receiver failed a delivery is health-checked again). */
  reconcile?: (key: ResourceKey) => Promise<void>;
}

/**
 * NotificationRuntime is the controller role's part of notifications: the bus router (group `notify`), the
 * `notify` queue and its delivery worker. `bridgeHooks` hands the bridge.instance controller its health-check
 * interval and the way to retry a bridge's waiting deliveries at once when its receiver is back.
 */
export class NotificationRuntime {
  readonly store: NotificationStore;
  readonly queue: NotificationQueue;
  readonly settings: NotificationSettings;
  private readonly client: WebhookClient;
  private readonly router: NotificationRouter;
  private readonly worker: DeliveryWorker;

  constructor(o: NotificationRuntimeOptions) {
    const settings = (this.settings = { ...DEFAULT_NOTIFICATION_SETTINGS, ...o.settings });
    this.client = new WebhookClient(o.security.egress);
    this.store = new NotificationStore(o.resources.redis, o.resources.keys);
    this.queue = new NotificationQueue({ connection: o.bullConnection, prefix: o.queuePrefix, store: this.store, settings });
    const bridges = new RegistryCache(o.resources);
    this.router = new NotificationRouter({ bus: o.bus, store: this.store, queue: this.queue, bridges, logger: o.logger, metrics: o.metrics });
    this.worker = new DeliveryWorker({
      connection: o.bullConnection, prefix: o.queuePrefix, store: this.store, queue: this.queue, bus: o.bus, bridges, client: this.client, security: o.security,
      settings, metrics: o.metrics, logger: o.logger,
      onBridgeFailure: o.reconcile && ((id) => o.reconcile!({ kind: 'bridge.instance', id })),
      onBridgeRecovered: (id) => this.queue.promotePending(id).then(() => undefined),
    });
  }

  /** bridgeHooks is what the bridge.instance controller needs from delivery. */
  get bridgeHooks() {
    // NOTE: a deleted bridge's waiting deliveries are promoted too: their attempt finds no bridge and fails for good.
    const promote = (bridgeId: string) => this.queue.promotePending(bridgeId).then(() => undefined);
    return { healthIntervalMs: this.settings.healthIntervalMs, onConnected: promote, onDeleted: promote };
  }

  async start(): Promise<void> {
    this.worker.start();
    await this.router.start();
  }

  async stop(): Promise<void> {
    await this.router.stop();
    await this.worker.stop();
    await this.queue.close();
    this.client.close();
  }
}
