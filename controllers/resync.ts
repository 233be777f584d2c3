import type { Logger } from 'pino';
import { onReconnect } from '../store/connections.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { ReconcileQueues } from './queues.ts';

/** ResyncOptions configures a Resync. */
export interface ResyncOptions {
  store: ResourceStore;
  queues: ReconcileQueues;
  kinds: readonly string[];
  intervalMs: number;
  logger: Logger;
}

/**
 * Resync enqueues every key of every kind at start-up, on an interval, and after Redis came back from a dropped
 * connection, so drift in runtime state is corrected and a lost event heals itself. Keys present only in a registry
 * (a record deleted while no controller ran) are included so their stale entries are removed.
 */
export class Resync {
  private timer?: NodeJS.Timeout;
  private stopReconnects?: () => void;
  /** The pass after a reconnect: one at a time, and one more when Redis reconnected again during it. */
  private reconnectPassing = false;
  private reconnectedAgain = false;

  constructor(private readonly o: ResyncOptions) {}

  async start(): Promise<void> {
    // NOTE: the start-up pass always runs (a restarted replica must heal what it missed); the periodic one
    // runs on one replica per interval, chosen by a lock.
    await this.run();
    this.timer = setInterval(() => {
      this.runIfLeader().catch((err) => this.o.logger.error({ err }, 'resync failed'));
    }, this.o.intervalMs);
    this.timer.unref();
    // NOTE: after a failover the promoted replica may lack a reconcile's status write that its old master answered,
    // while the change-log entry behind it was acknowledged on the new master: nothing would reconcile that key
    // until the next interval (a Sentinel test read observed_version 0 for 90 s). Every replica runs this pass:
    // the lock the interval uses may be one of the lost writes, and the queues collapse the duplicates.
    this.stopReconnects = onReconnect(this.o.store.redis, () => void this.afterReconnect());
  }

  stop(): void {
    clearInterval(this.timer);
    this.stopReconnects?.();
  }

  private async afterReconnect(): Promise<void> {
    if (this.reconnectPassing) {
      this.reconnectedAgain = true;
      return;
    }
    this.reconnectPassing = true;
    do {
      this.reconnectedAgain = false;
      await this.run().catch((err) => this.o.logger.error({ err }, 'resync after a Redis reconnect failed'));
    } while (this.reconnectedAgain);
    this.reconnectPassing = false;
  }

  private async runIfLeader(): Promise<void> {
    const { store, intervalMs } = this.o;
    const got = await store.redis.set(store.keys.lock('resync'), String(process.pid), 'PX', Math.max(1000, Math.floor(intervalMs * 0.9)), 'NX');
    if (got) await this.run();
  }

  /** run enqueues every key once. */
  async run(): Promise<number> {
    const { store, queues, kinds } = this.o;
    let total = 0;
    for (const kind of kinds) {
      const ids = new Set([...(await store.idsOf(kind)), ...(await store.redis.hkeys(store.keys.registry(kind)))]);
      await queues.enqueueMany([...ids].map((id) => ({ kind, id })));
      total += ids.size;
    }
    this.o.logger.info({ keys: total }, 'resync enqueued every key');
    return total;
  }
}
