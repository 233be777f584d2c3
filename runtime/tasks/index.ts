import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { EventBus } from '../../store/event-bus.ts';
import { TaskStore } from '../../store/task-store.ts';
import { LeaseRecovery } from './leases.ts';
import { TaskService, type TaskDeps } from './service.ts';
import { ClaimWaiter } from './waiter.ts';

export { TaskService } from './service.ts';

/**
 * Tasks is the task family of one process: the service (every role), the long-poll waiter (api role) and the
 * lease-expiry loop (controller role).
 */
export class Tasks {
  readonly store: TaskStore;
  readonly service: TaskService;
  private waiter?: ClaimWaiter;
  private recovery?: LeaseRecovery;

  constructor(private readonly o: { redis: Redis; bus?: EventBus; logger?: Logger } & TaskDeps) {
    this.store = new TaskStore(o.redis);
    this.waiter = new ClaimWaiter(this.store);
    this.service = new TaskService({ store: this.store, bus: o.bus, logger: o.logger, waiter: this.waiter, gate: o.gate, gateBound: o.gateBound, workspaceRoot: o.workspaceRoot, session: o.session });
  }

  async startApi() { await this.waiter!.start(); }

  startController() {
    this.recovery = new LeaseRecovery(this.service, this.o.logger);
    this.recovery.start();
  }

  async stop() {
    await this.recovery?.stop();
    await this.waiter?.stop();
  }
}
