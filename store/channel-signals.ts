import type { Redis } from 'ioredis';
import { duplicateConnection } from './connections.ts';

/** How long the subscriber connection stays open with nobody listening, so a burst of waits shares it. */
const IDLE_MS = 10_000;
/**
 * How long a wait waits for its subscription before it polls instead: a subscribe that does not answer (a Redis
 * Cluster connection still finding its nodes) must never hold a wait past its own time limit.
 */
const READY_WAIT_MS = 2_000;

/** readyWithin is `ready`, or false once `ms` passed without an answer. */
function readyWithin(ready: Promise<boolean>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([ready, new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(false), ms); })]).finally(() => clearTimeout(timer));
}

/** KeyWait is one wait for signals of one key: `ready` once the subscription listens, `next(ms)` for a signal or the time. */
export interface KeyWait {
  /** Resolves once signals are heard (true), or could not be subscribed to (false: the caller polls). */
  ready: Promise<boolean>;
  /** Resolves at the key's next signal (or at once if one came since the last call), after `ms`, or at `signal`'s abort. */
  next(ms: number, signal?: AbortSignal): Promise<void>;
  close(): void;
}

interface Waiter { fired: boolean; wake?: () => void }

/**
 * ChannelSignals is a process's one subscription to a Redis pub/sub channel whose messages name keys (several per
 * message, one per line; the key `*` signals every key): opened at the first wait or listener, closed once none is
 * left for IDLE_MS. A waiter (`until`, or `listen` for a wait of one's own) reads its state after `ready`, so a change
 * signalled before it listened is seen in that read; after a reconnect, which may have lost signals, every waiter is
 * woken to read again and every listener is handed `*`. The reconcile waiter (`?wait=true`, the status watch), the
 * session start wait and the task claim long-poll use it.
 */
export class ChannelSignals {
  private conn?: Redis;
  private subscribed?: Promise<boolean>;
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly listeners = new Set<(keys: string[]) => void>();
  private idle?: NodeJS.Timeout;
  private count = 0;

  constructor(private readonly redis: Redis, private readonly channel: string) {}

  /** listen starts a wait for signals of `key`; close it when done. */
  listen(key: string): KeyWait {
    const w: Waiter = { fired: false };
    let set = this.waiters.get(key);
    if (!set) this.waiters.set(key, (set = new Set()));
    set.add(w);
    const release = this.hold();
    return {
      ready: this.subscribe(),
      next: (ms, signal) => new Promise<void>((resolve) => {
        if (w.fired || signal?.aborted) {
          w.fired = false;
          resolve();
          return;
        }
        const end = () => { clearTimeout(t); signal?.removeEventListener('abort', end); w.wake = undefined; resolve(); };
        const t = setTimeout(end, Math.max(0, ms));
        signal?.addEventListener('abort', end);
        w.wake = () => { w.fired = false; end(); };
      }),
      close: () => {
        if (!set.has(w)) return;
        w.wake?.();
        set.delete(w);
        if (!set.size) this.waiters.delete(key);
        release();
      },
    };
  }

  /**
   * until calls `read` until `done` accepts what it returned, reading again at each signal of `key`, and returns the
   * last read: accepted, or not once `o.timeoutMs` has passed or `o.signal` aborted. It listens before its first
   * read, so a change signalled between a read and the wait still wakes it. Between reads it sleeps at most
   * `o.recheckMs` while subscribed (what a lost signal costs; default: until the time limit), else `o.pollMs`.
   */
  async until<T>(key: string, read: () => Promise<T>, done: (value: T) => boolean, o: { timeoutMs: number; recheckMs?: number; pollMs: number; signal?: AbortSignal }): Promise<T> {
    const deadline = Date.now() + o.timeoutMs;
    const w = this.listen(key);
    try {
      const pause = (await readyWithin(w.ready, READY_WAIT_MS)) ? o.recheckMs ?? o.timeoutMs : o.pollMs;
      for (;;) {
        const value = await read();
        const left = deadline - Date.now();
        if (done(value) || left <= 0) return value;
        await w.next(Math.min(left, pause), o.signal);
        if (o.signal?.aborted) return value;
      }
    } finally {
      w.close();
    }
  }

  /**
   * onMessage hands `listen` the keys of every message until closed; read state only after `ready`. `*` among them
   * means any key may have changed (a message naming it, or the subscription back after signals may have been lost).
   */
  onMessage(listen: (keys: string[]) => void): { ready: Promise<boolean>; close(): void } {
    this.listeners.add(listen);
    const release = this.hold();
    return {
      ready: this.subscribe(),
      close: () => {
        if (this.listeners.delete(listen)) release();
      },
    };
  }

  /** stop closes the subscription now (process shutdown). */
  stop(): void {
    clearTimeout(this.idle);
    this.disconnect();
  }

  /** hold counts one more waiter or listener; the returned function counts it out (the last one starts the idle timer). */
  private hold(): () => void {
    clearTimeout(this.idle);
    this.count++;
    return () => {
      if (--this.count > 0) return;
      this.idle = setTimeout(() => this.disconnect(), IDLE_MS);
      this.idle.unref();
    };
  }

  private subscribe(): Promise<boolean> {
    if (!this.subscribed) {
      const conn = (this.conn = duplicateConnection(this.redis));
      conn.on('message', (_channel: string, message: string) => {
        const keys = message.split('\n');
        this.fire(keys.includes('*') ? [...this.waiters.values()] : keys.map((key) => this.waiters.get(key)));
        for (const listen of this.listeners) listen(keys);
      });
      this.subscribed = conn.subscribe(this.channel).then(() => {
        // NOTE: ioredis subscribes again after a reconnect, but a signal sent while the connection was down is lost:
        // once the channel is heard again every waiter reads its state again, so a lost signal costs a read, not the
        // wait's whole time limit. Listened for only now, as the first connection's `ready` came before.
        conn.on('ready', () => {
          if (this.conn !== conn) return;
          conn.subscribe(this.channel).then(() => {
            if (this.conn !== conn) return;
            this.fire([...this.waiters.values()]);
            for (const listen of this.listeners) listen(['*']);
          }, () => undefined);
        });
        return true;
      }, () => {
        // NOTE: no subscription (Redis unreachable): the waiters poll; the next wait tries again.
        if (this.conn === conn) this.disconnect();
        return false;
      });
    }
    return this.subscribed;
  }

  /** fire wakes every waiter of `sets` (a waiter not waiting yet finds the signal at its next wait). */
  private fire(sets: (Set<Waiter> | undefined)[]): void {
    for (const set of sets) {
      for (const w of set ?? []) {
        w.fired = true;
        w.wake?.();
      }
    }
  }

  private disconnect(): void {
    this.conn?.disconnect();
    this.conn = undefined;
    this.subscribed = undefined;
  }
}
