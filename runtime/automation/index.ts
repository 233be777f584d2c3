import type { TaskCreator } from './executor.ts';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { AutomationStore } from '../../store/automation-store.ts';
import type { EventBus } from '../../store/event-bus.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import { SessionStore } from '../../store/session-store.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import type { SessionService } from '../sessions/session-service.ts';
import type { WorkspaceService } from '../workspaces/workspace-service.ts';
import { AutomationService } from './automation-service.ts';
import { AutomationExecutor } from './executor.ts';
import { AutomationQueue } from './queue.ts';
import { TriggerEngine } from './triggers.ts';
import type { Gate } from '../hooks/gate.ts';
import { WebhookReceiver } from './webhooks.ts';

export { AutomationService } from './automation-service.ts';
export { WebhookReceiver, RateLimitedError, signWebhook, TIMESTAMP_HEADER, SIGNATURE_HEADER, DELIVERY_HEADER } from './webhooks.ts';
export type { AutomationReader, AutomationView } from './types.ts';

/** AutomationOptions is what the automation family needs from the process. */
export interface AutomationOptions {
  store: ResourceStore;
  bus: EventBus;
  /** A connection with `maxRetriesPerRequest: null`, as BullMQ needs. */
  bullConnection: Redis;
  queuePrefix: string;
  security: SecurityPolicy;
  /** The process's workspace and session services (sessions are created and prompted through their hook gates). */
  workspaces: WorkspaceService;
  sessions: SessionService;
  logger: Logger;
  /** Runs in flight at once per controller process (AUTOMATION_CONCURRENCY). */
  concurrency: number;
  /** Webhook deliveries accepted per endpoint per minute (WEBHOOK_RATE_LIMIT). */
  webhookRateLimit: number;
  /** The pre-fire hook gate (runtime/hooks/): a denial records the run `skipped` with reason hook_denied. */
  gate: Gate;
  /** The task family: a job with a `task` section creates a task when it fires. */
  tasks?: TaskCreator;
}

/**
 * Automation is the automation family of one process: the run store and the `automation` queue every role uses,
 * the read-and-fire service and the webhook receiver the api role serves, and, in the controller role
 * (`startController`), the run executor and the event trigger reader. The job controller
 * (controllers/automation-job.ts) takes `queue` and `runs` from here.
 */
export class Automation {
  readonly runs: AutomationStore;
  readonly queue: AutomationQueue;
  readonly service: AutomationService;
  readonly webhooks: WebhookReceiver;
  private executor?: AutomationExecutor;
  private triggers?: TriggerEngine;

  constructor(private readonly o: AutomationOptions) {
    this.runs = new AutomationStore(o.store.redis, o.store.keys);
    this.queue = new AutomationQueue(o.bullConnection, o.queuePrefix);
    this.service = new AutomationService({ resources: o.store, store: this.runs, queue: this.queue, workspaces: o.workspaces, bus: o.bus });
    this.webhooks = new WebhookReceiver({ automation: this.service, store: this.runs, workspaces: o.workspaces, security: o.security, rateLimit: { max: o.webhookRateLimit, windowMs: 60_000 } });
  }

  /** startController starts the run executor and the trigger reader (the controller role). */
  async startController(): Promise<void> {
    const { o } = this;
    this.executor = new AutomationExecutor({
      store: this.runs, resources: o.store, bus: o.bus, sessions: o.sessions, sessionStore: new SessionStore(o.store.redis, o.store.keys), connection: o.bullConnection, prefix: o.queuePrefix,
      concurrency: o.concurrency, logger: o.logger, gate: o.gate, tasks: o.tasks,
    });
    this.triggers = new TriggerEngine({ bus: o.bus, store: o.store, queue: this.queue, logger: o.logger });
    await this.executor.start();
    await this.triggers.start();
  }

  async stop(): Promise<void> {
    await this.triggers?.stop();
    await this.executor?.stop();
    await this.queue.close();
  }
}
