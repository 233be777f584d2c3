import type { ConnectionOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { EventBus } from '../../store/event-bus.ts';
import { LoopStore } from '../../store/loop-store.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { ResourceService } from '../resources/resource-service.ts';
import type { WorkspaceService } from '../workspaces/workspace-service.ts';
import { LoopDefinitions } from './definitions.ts';
import { LOOP_QUEUE, LoopEngine, type LoopSettings } from './engine.ts';
import { builtinExecutors, ExecutorRegistry, RunLoopExecutor } from './executors/index.ts';
import { LoopRunViews } from './runs.ts';

export { LOOP_QUEUE, LoopEngine } from './engine.ts';
export { ExecutorRegistry } from './executors/index.ts';

/** LoopsOptions wire the loop family of one process. */
export interface LoopsOptions {
  redis: Redis;
  resources: ResourceStore;
  workspaces: Pick<WorkspaceService, 'get'>;
  bus?: EventBus;
  connection: ConnectionOptions;
  logger: Logger;
  settings?: Partial<LoopSettings>;
  /** Extra executors (the node kinds that call other families), registered beside the built-in ones. */
  registry?: ExecutorRegistry;
}

/**
 * Loops is the loop family of one process: the definition views, the engine (starts and controls in every
 * role; node workers and the watchdog in a controller process) and the run views. The queue's keys carry their own
 * hash tag, `<prefix>{q:loop-node}`.
 */
export class Loops {
  readonly store: LoopStore;
  readonly definitions: LoopDefinitions;
  readonly registry: ExecutorRegistry;
  readonly engine: LoopEngine;
  readonly runs: LoopRunViews;

  constructor(private readonly o: LoopsOptions) {
    this.store = new LoopStore(o.redis, o.resources.keys);
    this.definitions = new LoopDefinitions({ store: o.resources, workspaces: o.workspaces });
    this.registry = o.registry ?? new ExecutorRegistry();
    for (const e of builtinExecutors()) if (!this.registry.has(e.kind)) this.registry.register(e);
    if (!this.registry.has('run-loop')) this.registry.register(new RunLoopExecutor(() => this.engine));
    this.engine = new LoopEngine({
      store: this.store, definitions: this.definitions, registry: this.registry, bus: o.bus, connection: o.connection,
      queuePrefix: `${o.resources.keys.prefix}{q:${LOOP_QUEUE}}`, logger: o.logger, settings: o.settings,
    });
    this.runs = new LoopRunViews({ store: this.store, engine: this.engine, redis: o.redis });
  }

  /** withWrites gives the definition views the resource write path (api role). */
  withWrites(resources: ResourceService): LoopDefinitions {
    return new LoopDefinitions({ store: this.o.resources, workspaces: this.o.workspaces, resources });
  }

  startWorkers(): void { this.engine.startWorkers(); }
  async stop(): Promise<void> { await this.engine.stop(); }
}
