import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { ChannelSignals } from '../../store/channel-signals.ts';
import type { EventBus } from '../../store/event-bus.ts';
import { TaskStore } from '../../store/task-store.ts';
import { LeaseRecovery } from './leases.ts';
import { TaskService, type TaskDeps } from './service.ts';

export { TaskService } from './service.ts';

/**
 * Tasks is the task family of one process: the service (every role; its claim long-polls listen for queue wakes
 * on one subscription, opened at the first) and the lease-expiry loop (controller role).
 */
export class Tasks {
  readonly store: TaskStore;
  readonly service: TaskService;
  private readonly claimWakes: ChannelSignals;
  private recovery?: LeaseRecovery;

  constructor(private readonly o: { redis: Redis; bus?: EventBus; logger?: Logger } & TaskDeps) {
    this.store = new TaskStore(o.redis);
    this.claimWakes = new ChannelSignals(o.redis, this.store.keys.wakeChannel);
    this.service = new TaskService({ store: this.store, bus: o.bus, logger: o.logger, claimWakes: this.claimWakes, gate: o.gate, gateBound: o.gateBound, workspace: o.workspace, session: o.session });
  }

  startController() {
    this.recovery = new LeaseRecovery(this.service, this.o.logger);
    this.recovery.start();
  }

  async stop() {
    await this.recovery?.stop();
    this.claimWakes.stop();
  }
}
