import type { Redis } from 'ioredis';
import { duplicateConnection } from './connections.ts';

/**
 * TrustedSubscription is a process's subscription to one pub/sub channel whose messages say what changed, so what a
 * process kept may be trusted without reading it again. Trust lasts only while the subscription is up, and only for
 * what was read in the current generation: every (re)subscription starts a new one, since a message may have been
 * lost while the connection was down. Before `start` and while down there is no generation: readers read each time.
 */
export abstract class TrustedSubscription {
  private conn?: Redis;
  private gen = 0;
  private live = false;

  constructor(private readonly redis: Redis, readonly channel: string, private readonly name: string) {}

  /** onMessage takes one change message. */
  protected abstract onMessage(message: string): void;

  /** onDown is told the subscription went down (what was kept is no longer trusted). */
  protected onDown(): void {}

  /** start subscribes; it resolves once the subscription listens (or failed: readers then read every time). */
  async start(): Promise<void> {
    const conn = (this.conn = duplicateConnection(this.redis, this.name));
    conn.on('message', (_channel: string, message: string) => this.onMessage(message));
    const down = () => {
      this.live = false;
      this.gen++;
      this.onDown();
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

  /** recheck stops trusting everything read so far: each is read again on its next use. */
  recheck(): void {
    if (this.live) this.gen++;
  }

  stop(): void {
    this.live = false;
    this.conn?.disconnect();
    this.conn = undefined;
  }
}

/**
 * RegistryWatch tells a process's registry caches (controllers/registry-controller.ts RegistryCache) that a runtime
 * registry changed, so a read whose registries did not change costs no round trip: project-entry-2.lua publishes the
 * registry's revision key on one channel in the same atomic step that bumps the revision. A cache entry is trusted
 * as TrustedSubscription says; on each new generation each registry is checked against its revision (one MGET) again.
 * NOTE: a change is seen by this process when its message arrives, within the same round trip as the projection's
 * own reply; a projection is asynchronous to the write that caused it in any case (the reconcile queue).
 * NOTE: `recheck` is for a reader that learned of a reconcile over another connection: Redis may deliver that evidence
 * (a `?wait=true` caller's observed-revision reply) before this subscription's change message, so trusting the
 * cache then would answer the registry from before the reconcile the caller just waited for.
 */
export class RegistryWatch extends TrustedSubscription {
  private readonly stamps = new Map<string, number>();

  constructor(redis: Redis, channel: string) {
    super(redis, channel, 'registry-watch');
  }

  protected onMessage(revisionKey: string): void {
    this.stamps.set(revisionKey, (this.stamps.get(revisionKey) ?? 0) + 1);
  }

  /** stamp counts the change messages seen for a registry revision key. */
  stamp(revisionKey: string): number {
    return this.stamps.get(revisionKey) ?? 0;
  }
}
