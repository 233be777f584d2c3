import type { Logger } from 'pino';
import type { TaskService } from './service.ts';

/**
 * LeaseRecovery is the controller role's lease-expiry loop: it sleeps until the earliest lease deadline (at most
 * `tickMs`), then requeues every expired run (`task.run_lease_expired`). Every controller may run it: each
 * requeue is an optimistic transaction, so exactly one process wins a given run; leases of a SIGKILLed process
 * are recovered by any surviving controller within about `tickMs` of their deadline.
 */
export class LeaseRecovery {
  private timer?: NodeJS.Timeout;
  private running = false;
  private stopped = false;

  constructor(private readonly tasks: TaskService, private readonly logger?: Logger, private readonly tickMs = 250) {}

  start() { this.stopped = false; this.schedule(0); }

  async stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    while (this.running) await new Promise((r) => setTimeout(r, 10));
  }

  private schedule(ms: number) {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), ms);
  }

  private async tick() {
    this.running = true;
    let next = this.tickMs;
    try {
      await this.tasks.recoverExpired();
      await this.tasks.checkDrain();
      const deadline = await this.tasks.store.nextLeaseDeadline();
      if (deadline !== undefined) next = Math.max(5, Math.min(this.tickMs, deadline - Date.now() + 5));
    } catch (err) {
      this.logger?.warn({ err: (err as Error).message }, 'lease recovery failed; retrying');
    } finally {
      this.running = false;
      this.schedule(next);
    }
  }
}
