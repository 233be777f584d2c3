import type { Redis } from 'ioredis';
import { duplicateConnection } from './connections.ts';

/**
 * RegistryWatch tells a process's registry caches (controllers/registry-controller.ts RegistryCache) that a runtime
 * registry changed, so a read whose registries did not change costs no round trip: project-entry-2.lua publishes the
 * registry's revision key on one channel in the same atomic step that bumps the revision. A cache entry is trusted
 * only while the subscription is up and only if it was read in the current generation: every (re)subscription starts
 * a new one, since a message may have been lost while the connection was down, so each registry is checked against
 * its revision (one MGET) once again. Before `start` and while down, readers check the revision on every read.
 * NOTE: a change is seen by this process when its message arrives, within the same round trip as the projection's
 * own reply; a projection is asynchronous to the write that caused it in any case (the reconcile queue).
 */
export class RegistryWatch {
  private conn?: Redis;
  private gen = 0;
  private live = false;
  private readonly stamps = new Map<string, number>();

  constructor(private readonly redis: Redis, readonly channel: string) {}

  /** start subscribes; it resolves once the subscription listens (or failed: readers then check every read). */
  async start(): Promise<void> {
    const conn = (this.conn = duplicateConnection(this.redis, 'registry-watch'));
    conn.on('message', (_channel: string, revisionKey: string) => this.stamps.set(revisionKey, (this.stamps.get(revisionKey) ?? 0) + 1));
    const down = () => {
      this.live = false;
      this.gen++;
    };
    conn.on('close', down);
    conn.on('reconnecting', down);
    await this.listen(conn);
    // NOTE: ioredis re-subscribes after a reconnect; trust returns only once SUBSCRIBE has been answered again.
    // Listened for only now: the first connection's `ready` would start a second generation for nothing.
    conn.on('ready', () => { if (this.conn === conn) void this.listen(conn); });
  }

  private async listen(conn: Redis): Promise<void> {
    try {
      await conn.subscribe(this.channel);
      if (this.conn !== conn) return;
      this.gen++;
      this.live = true;
    } catch {
      this.live = false;
    }
  }

  /** generation is the current trust generation, or undefined while the subscription is not up. */
  generation(): number | undefined {
    return this.live ? this.gen : undefined;
  }

  /**
   * recheck stops trusting every cache entry read so far (each registry is checked against its revision on its next
   * read). A reader that learned of a reconcile over another connection calls it: Redis may deliver that evidence
   * (a `?wait=true` caller's observed-revision reply) before this subscription's change message, so trusting the
   * cache then would answer the registry from before the reconcile the caller just waited for.
   */
  recheck(): void {
    if (this.live) this.gen++;
  }

  /** stamp counts the change messages seen for a registry revision key. */
  stamp(revisionKey: string): number {
    return this.stamps.get(revisionKey) ?? 0;
  }

  stop(): void {
    this.live = false;
    this.conn?.disconnect();
    this.conn = undefined;
  }
}
