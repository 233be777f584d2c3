import type { Redis } from 'ioredis';
import { duplicateConnection } from '../../store/connections.ts';
import type { TaskStore } from '../../store/task-store.ts';

/** Armed is one claimer waiting for a wake of its queue. */
export interface Armed {
  wait(ms: number, signal?: AbortSignal): Promise<void>;
  cancel(): void;
}

/**
 * ClaimWaiter lets long-polling claimers (`wait:true`) sleep until something may have become claimable: every
 * write that queues a run, unblocks or resumes a task publishes the queue's scope on one pub/sub channel, and
 * this process's one subscriber wakes its local waiters of that scope. No polling of Redis; a missed message
 * (subscriber reconnecting) costs at most the safety re-check of `recheckMs`.
 */
export class ClaimWaiter {
  private sub?: Redis;
  private readonly waiting = new Map<string, Set<() => void>>();

  constructor(private readonly store: TaskStore, private readonly recheckMs = 5_000) {}

  async start(): Promise<void> {
    this.sub = duplicateConnection(this.store.redis);
    this.sub.on('message', (_channel: string, msg: string) => {
      for (const scope of msg.split(' ')) {
        const targets = scope === '*' ? [...this.waiting.values()] : [this.waiting.get(scope)];
        for (const set of targets) if (set) for (const fn of [...set]) fn();
      }
    });
    await this.sub.subscribe(this.store.keys.wakeChannel);
  }

  async stop(): Promise<void> {
    for (const set of this.waiting.values()) for (const fn of [...set]) fn();
    await this.sub?.quit().catch(() => undefined);
  }

  /** arm registers a waiter before the claim attempt, so a wake between a miss and the wait is not lost. */
  arm(scope: string): Armed {
    let fired = false;
    let done: (() => void) | undefined;
    const set = this.waiting.get(scope) ?? new Set();
    this.waiting.set(scope, set);
    const fire = () => { fired = true; done?.(); };
    set.add(fire);
    const cancel = () => {
      set.delete(fire);
      if (!set.size) this.waiting.delete(scope);
    };
    return {
      cancel,
      wait: (ms, signal) => new Promise<void>((resolve) => {
        const finish = () => { clearTimeout(timer); signal?.removeEventListener('abort', finish); cancel(); resolve(); };
        const timer = setTimeout(finish, Math.max(0, Math.min(ms, this.recheckMs)));
        signal?.addEventListener('abort', finish);
        done = finish;
        if (fired) finish();
      }),
    };
  }
}
