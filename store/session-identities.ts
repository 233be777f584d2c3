import type { Redis } from 'ioredis';
import { TrustedSubscription } from './registry-watch.ts';

/** How many sessions' identities a process keeps: one per agent calling it, a few MB at most. */
const KEPT = 10_000;
/**
 * A kept identity is read again after this long even without a change message: the one way it could change
 * unannounced is an operator's write to the store itself (a flush, a restore).
 */
const MAX_AGE_MS = 10_000;

/**
 * SessionIdentities keeps the identity fields of the sessions whose agents call this process (the task lease routes
 * check each call's session: its state, token, workspace and agent), so a call costs no read of its session while
 * the session is unchanged. Every write that sets one of those fields or deletes the session (SessionStore) publishes
 * the session's key on `keys.sessionChannel` in the same step, and the message drops the kept copy. Trust follows
 * RegistryWatch's rules: only while the subscription is up, only what was read in the current generation, and a read
 * during which any change message arrived is not kept (the message may be about it).
 * NOTE: another process's stop is seen here when its message arrives, within the round trip of the stop's own reply;
 * not on a Redis Cluster, where the composition root starts none (as for RegistryWatch, messages there arrived late).
 */
export class SessionIdentities<T> extends TrustedSubscription {
  private changes = 0;
  private readonly kept = new Map<string, { value: T; gen: number; at: number }>();

  constructor(redis: Redis, channel: string) {
    super(redis, channel, 'session-identities');
  }

  protected onMessage(key: string): void {
    this.changes++;
    this.kept.delete(key);
  }

  protected onDown(): void {
    this.kept.clear();
  }

  /** get answers a session's identity as kept, or as `read` answers it now (kept when trusted; a miss is never kept). */
  async get(key: string, read: () => Promise<T | undefined>): Promise<T | undefined> {
    const gen = this.generation();
    const k = this.kept.get(key);
    const now = Date.now();
    if (k && gen !== undefined && k.gen === gen && now - k.at < MAX_AGE_MS) return k.value;
    const changes = this.changes;
    const value = await read();
    if (value !== undefined && gen !== undefined && this.generation() === gen && this.changes === changes) {
      this.kept.delete(key);
      if (this.kept.size >= KEPT) this.kept.delete(this.kept.keys().next().value!);
      this.kept.set(key, { value, gen, at: now });
    }
    return value;
  }
}
