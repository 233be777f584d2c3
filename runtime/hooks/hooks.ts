import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type client from 'prom-client';
import { RegistryCache } from '../../controllers/registry-controller.ts';
import type { EventBus } from '../../store/event-bus.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { HookDispatcher } from './dispatcher.ts';
import { HookGate, type Gate, type GateOptions, type GateResult } from './gate.ts';
import { HookMetrics, HookRuns } from './runs.ts';
import type { Binding } from './matcher.ts';

/** HooksConfig is the hooks' part of the process configuration (HOOK_* variables). */
export interface HooksConfig {
  /** A hook's timeout when its binding sets none (HOOK_TIMEOUT), in ms. */
  timeoutMs: number;
  /** Tries of an async run before it is dead-lettered (HOOK_ATTEMPTS). */
  attempts: number;
  /** The first retry's delay; each next one doubles (HOOK_RETRY_BACKOFF), in ms. */
  backoffMs: number;
  /** Async runs at once per controller process (HOOK_CONCURRENCY). */
  concurrency: number;
  /** Runs and dead letters kept for GET /api/hooks/runs and /dead-letters (HOOK_RUNS_KEPT). */
  runsKept: number;
}

/** HooksOptions is what the composition root gives the hooks. */
export interface HooksOptions {
  store: ResourceStore;
  bus: EventBus;
  /** A connection with maxRetriesPerRequest: null, for BullMQ. */
  bull: Redis;
  queuePrefix: string;
  security: SecurityPolicy;
  registry: client.Registry;
  logger: Logger;
  dataDir: string;
  config: HooksConfig;
}

/**
 * Hooks is the hook.binding runtime of one process: the sync gate every role can call, the run records, and
 * (controller role, `startDispatcher`) the async dispatcher and its workers. See runtime/hooks/README section in
 * the project README.
 */
export class Hooks implements Gate {
  readonly runs: HookRuns;
  readonly metrics: HookMetrics;
  private readonly gateImpl: HookGate;
  private readonly registries: RegistryCache;
  private dispatcher?: HookDispatcher;

  constructor(private readonly o: HooksOptions) {
    this.registries = new RegistryCache(o.store);
    this.metrics = new HookMetrics(o.registry);
    this.runs = new HookRuns({ redis: o.store.redis, bus: o.bus, prefix: o.store.keys.prefix, metrics: this.metrics, logger: o.logger, kept: o.config.runsKept });
    this.gateImpl = new HookGate({
      registries: this.registries, bus: o.bus, runs: this.runs, security: o.security, logger: o.logger, defaultTimeoutMs: o.config.timeoutMs, dataDir: o.dataDir,
    });
  }

  /** gate is HookGate.gate: publish the event, run the sync hooks, answer allow or deny. */
  gate(event: string, payload: Record<string, unknown>, opts?: GateOptions): Promise<GateResult> {
    return this.gateImpl.gate(event, payload, opts);
  }

  /**
   * bound says whether any enabled binding (sync or async) is stored for `event`: a gated point whose gate is
   * costly to prepare (task.run.pre_claim's peek) skips it when nothing would run or receive the event.
   */
  async bound(event: string): Promise<boolean> {
    const r = await this.registries.read(['hook.binding']);
    return (r.entries['hook.binding'] as Binding[]).some((b) => b.spec.event === event && b.spec.enabled !== false);
  }

  /** startDispatcher starts the async side (controller role). */
  async startDispatcher(): Promise<void> {
    const { o } = this;
    this.dispatcher = new HookDispatcher({
      redis: o.store.redis, bull: o.bull, queuePrefix: o.queuePrefix, keyPrefix: o.store.keys.prefix, bus: o.bus, registries: this.registries,
      runs: this.runs, metrics: this.metrics, security: o.security, logger: o.logger, dataDir: o.dataDir,
      defaultTimeoutMs: o.config.timeoutMs, attempts: o.config.attempts, backoffMs: o.config.backoffMs, concurrency: o.config.concurrency,
    });
    await this.dispatcher.start();
  }

  async stop(): Promise<void> {
    await this.dispatcher?.stop();
  }
}
