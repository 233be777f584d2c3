import type { Redis } from 'ioredis';
import { duplicateConnection } from '../../store/connections.ts';
import type { Keys } from '../../store/keys.ts';

/**
 * startedChannel is the Redis pub/sub channel on which a runtime announces that a session left `starting`
 * (active, or stopped because it could not start); the message is the session id. Every api replica hears it.
 */
export const startedChannel = (keys: Keys) => `${keys.prefix}sessions:started`;

/** signalStarted announces a session's start (or failed start); an outage only costs the waiter a poll. */
export async function signalStarted(redis: Redis, keys: Keys, sessionId: string): Promise<void> {
  await redis.publish(startedChannel(keys), sessionId).catch(() => undefined);
}

/** How long the subscriber connection stays open with nobody waiting, so a burst of creates shares it. */
const IDLE_MS = 10_000;

/** StartWait is one session's wait: `ready` once the subscription listens, `next(ms)` for a signal or the time. */
export interface StartWait {
  /** Resolves once signals for the session are heard (true), or could not be subscribed to (false). */
  ready: Promise<boolean>;
  /** Resolves at the session's next signal (or at once if one came since the last call), or after `ms`. */
  next(ms: number): Promise<void>;
  close(): void;
}

interface Waiter { fired: boolean; wake?: () => void }

/**
 * StartSignals lets the API wait for a session's start without polling its record: one subscriber connection per
 * process (opened at the first wait, closed when idle) hears `startedChannel` and wakes the local waiters of that
 * session. A waiter reads the session after `ready`, so a start that was signalled before it listened is seen
 * in the record; a signal lost to a reconnect is made up by the caller's slow poll.
 */
export class StartSignals {
  private conn?: Redis;
  private subscribed?: Promise<boolean>;
  private readonly waiters = new Map<string, Set<Waiter>>();
  private idle?: NodeJS.Timeout;
  private count = 0;

  constructor(private readonly redis: Redis, private readonly keys: Keys) {}

  listen(sessionId: string): StartWait {
    clearTimeout(this.idle);
    this.count++;
    const w: Waiter = { fired: false };
    let set = this.waiters.get(sessionId);
    if (!set) this.waiters.set(sessionId, (set = new Set()));
    set.add(w);
    const ready = this.subscribe();
    let closed = false;
    return {
      ready,
      next: (ms) => new Promise<void>((resolve) => {
        if (w.fired) {
          w.fired = false;
          resolve();
          return;
        }
        const t = setTimeout(() => { w.wake = undefined; resolve(); }, Math.max(0, ms));
        w.wake = () => { clearTimeout(t); w.wake = undefined; w.fired = false; resolve(); };
      }),
      close: () => {
        if (closed) return;
        closed = true;
        w.wake?.();
        set.delete(w);
        if (!set.size) this.waiters.delete(sessionId);
        if (--this.count === 0) {
          this.idle = setTimeout(() => this.disconnect(), IDLE_MS);
          this.idle.unref();
        }
      },
    };
  }

  private subscribe(): Promise<boolean> {
    if (!this.subscribed) {
      const conn = (this.conn = duplicateConnection(this.redis));
      conn.on('message', (_channel: string, id: string) => {
        for (const w of this.waiters.get(id) ?? []) {
          w.fired = true;
          w.wake?.();
        }
      });
      this.subscribed = conn.subscribe(startedChannel(this.keys)).then(() => true, () => {
        // NOTE: no subscription (Redis unreachable): the waiters poll; the next wait tries again.
        if (this.conn === conn) this.disconnect();
        return false;
      });
    }
    return this.subscribed;
  }

  private disconnect(): void {
    this.conn?.disconnect();
    this.conn = undefined;
    this.subscribed = undefined;
  }
}
