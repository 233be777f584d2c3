import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { KINDS } from '../codecs/index.ts';
import type { Metrics } from '../runtime/process/metrics.ts';
import type { SecurityPolicy } from '../runtime/security/policy.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { EventBus } from '../store/event-bus.ts';
import { BridgeInstanceController, type BridgeHooks } from './bridge-instance.ts';
import type { AutomationStore } from '../store/automation-store.ts';
import type { AutomationQueue } from '../runtime/automation/queue.ts';
import { AutomationJobController } from './automation-job.ts';
import { AutomationTriggerController } from './automation-trigger.ts';
import { curationConditions, DEPENDS_ON_AGENTS, modelConditions, secretEnvProblems, type ModelChecker } from './dependencies.ts';
import { BundleActivationController } from './bundle-activation.ts';
import { HookBindingController } from './hook-binding.ts';
import { LoopController } from './loop.ts';
import { McpServerController } from './mcp-server.ts';
import { ReconcileQueues } from './queues.ts';
import { RegistryController } from './registry-controller.ts';
import { ReconcileWorker } from './reconcile-worker.ts';
import { ChangeRelay } from './relay.ts';
import { BatchReconciler } from './batch-reconciler.ts';
import { Resync } from './resync.ts';
import type { KindController } from './types.ts';

export { ReconcileQueues } from './queues.ts';
export { readRegistry } from './registry-controller.ts';

/** ControllerManagerOptions configures the controller role. */
export interface ControllerManagerOptions {
  store: ResourceStore;
  queues: ReconcileQueues;
  /** A connection with `maxRetriesPerRequest: null`, as BullMQ workers need. */
  bullConnection: Redis;
  queuePrefix: string;
  concurrency: number;
  resyncIntervalMs: number;
  metrics: Metrics;
  logger: Logger;
  /** Re-checks stored executables at reconcile time (EXEC_ALLOWLIST may have tightened since the write). */
  security: SecurityPolicy;
  /** The event bus: the relay publishes every resource change on it. */
  bus: EventBus;
  /** Notification delivery's hooks for the bridge.instance controller (NotificationRuntime.bridgeHooks). */
  bridgeHooks?: BridgeHooks;
  /** With it, automation.job records own their schedules on the `automation` queue (AutomationJobController). */
  automation?: { queue: AutomationQueue; runs: AutomationStore };
  /** The model catalog: an agent naming a model it does not know gets a ModelKnown False condition (a warning). */
  models?: ModelChecker;
  /** Owners that are not kinds (extensions): the relay hands them the ids whose children were deleted (ChangeRelay). */
  ownerHooks?: Record<string, (ids: string[]) => Promise<void>>;
}

/**
 * buildControllers returns one controller per kind. Every kind but bundle.activation is a registry
 * projection; a change to a bundle re-enqueues every activation, since activations resolve bundles by name, and a
 * change to an agent every automation job and trigger, whose status says whether their agent exists.
 * With `security`, a record whose executables EXEC_ALLOWLIST no longer allows is Degraded (CommandNotAllowed),
 * and mcp_server records are observed (McpServerController): connected, with how many tools, or why not;
 * bridge.instance records too (BridgeInstanceController): whether their webhook receiver answers.
 */
export function buildControllers(store: ResourceStore, queues: ReconcileQueues, security?: SecurityPolicy, bridgeHooks?: BridgeHooks, automation?: ControllerManagerOptions['automation'], models?: ModelChecker): KindController[] {
  return KINDS.map((kind): KindController => {
    if (kind === 'bundle.activation') return new BundleActivationController({ store });
    if (kind === 'automation.job' && automation) return new AutomationJobController({ store, queue: automation.queue, runs: automation.runs });
    if (kind === 'mcp_server' && security) return new McpServerController({ store, security });
    if (kind === 'bridge.instance' && security) return new BridgeInstanceController({ store, security, hooks: bridgeHooks });
    if (kind === 'hook.binding') return new HookBindingController({ store, security });
    if (kind === 'automation.trigger') return new AutomationTriggerController({ store, security });
    // NOTE: a loop names other loops (run-loop), so a loop's change re-reconciles every loop.
    if (kind === 'loop') return new LoopController({ store, security, onChange: async () => queues.enqueueMany((await store.idsOf('loop')).map((id) => ({ kind: 'loop', id }))) });
    const dependents = kind === 'bundle' ? ['bundle.activation'] : kind === 'agent' ? DEPENDS_ON_AGENTS : [];
    const onChange = dependents.length
      ? async () => queues.enqueueMany((await Promise.all(dependents.map(async (k) => (await store.idsOf(k)).map((id) => ({ kind: k, id }))))).flat())
      : undefined;
    // NOTE: agents and skills start processes with secret_env; a ref that does not resolve is a Degraded reason
    // (SecretNotFound for a vault ref: writing the secret re-reconciles them), not only a failed start later.
    const dependencies = security && (kind === 'agent' || kind === 'skill') ? (spec: unknown) => secretEnvProblems(security, spec) : undefined;
    const warnings = models && kind === 'agent' ? (spec: unknown) => modelConditions(models, spec)
      : models && kind === 'model.curation' ? (spec: unknown) => curationConditions(models, spec) : undefined;
    return new RegistryController({ kind, store, onChange, dependencies, warnings, commandRefusal: security && ((k, spec) => security.commandRefusal(k, spec)) });
  });
}

/** ControllerManager runs the controller role: one worker per kind, the change relay and the resync. */
export class ControllerManager {
  private readonly workers: ReconcileWorker[];
  private readonly relay: ChangeRelay;
  private readonly resync: Resync;
  running = false;

  constructor(o: ControllerManagerOptions) {
    const controllers = buildControllers(o.store, o.queues, o.security, o.bridgeHooks, o.automation, o.models);
    // NOTE: projection-only kinds are reconciled from the relay's pages (one script pair per page); their
    // queues still take resyncs, retries and keys another reconcile held. Kinds that act on the world keep BullMQ.
    const batch = new BatchReconciler({ store: o.store, controllers: controllers.filter((c): c is RegistryController => c instanceof RegistryController), metrics: o.metrics, logger: o.logger });
    this.workers = controllers.map((controller) => new ReconcileWorker({
      controller, store: o.store, connection: o.bullConnection, prefix: o.queuePrefix,
      concurrency: o.concurrency, metrics: o.metrics, logger: o.logger,
      requeue: (key, delayMs) => o.queues.enqueueMany([key], delayMs),
    }));
    this.relay = new ChangeRelay({ store: o.store, queues: o.queues, logger: o.logger, ownerKinds: ['bundle.activation'], bus: o.bus, batch, ownerHooks: o.ownerHooks });
    this.resync = new Resync({ store: o.store, queues: o.queues, kinds: KINDS, intervalMs: o.resyncIntervalMs, logger: o.logger });
  }

  async start(): Promise<void> {
    for (const w of this.workers) w.start();
    await this.relay.start();
    await this.resync.start();
    this.running = true;
  }

  /** stop stops taking work and waits for in-flight reconciles to finish. */
  async stop(): Promise<void> {
    this.running = false;
    this.resync.stop();
    await this.relay.stop();
    await Promise.all(this.workers.map((w) => w.stop()));
  }
}
