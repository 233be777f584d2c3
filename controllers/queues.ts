import { Queue, type ConnectionOptions } from 'bullmq';
import { quietQueue } from '../store/connections.ts';
import { queuePrefix } from '../store/keys.ts';
import type { ResourceKey } from './types.ts';

/** queueName is the BullMQ queue of a kind's reconciles. */
export const queueName = (kind: string) => `reconcile-${kind}`;

/** ReconcileQueues holds one BullMQ queue per kind and adds deduplicated reconcile jobs to them. */
export class ReconcileQueues {
  private readonly queues = new Map<string, Queue>();

  /** `keyPrefix` is the store's key prefix; each kind's queue gets its own hash tag under it (store/keys.ts queuePrefix). */
  constructor(kinds: readonly string[], connection: ConnectionOptions, readonly keyPrefix = 'svc:') {
    for (const kind of kinds) this.queues.set(kind, quietQueue(new Queue(queueName(kind), { connection, prefix: queuePrefix(keyPrefix, queueName(kind)) })));
  }

  /**
   * enqueue adds a reconcile of one key. NOTE: `keepLastIfActive` keeps one waiting job per key and, when
   * the key is being reconciled, one more after it, so a write during a reconcile is never missed and a
   * key is never reconciled by two workers at once.
   */
  async enqueue(key: ResourceKey): Promise<void> {
    await this.enqueueMany([key]);
  }

  /**
   * enqueueMany adds reconciles for many keys with one round trip per kind, after `delayMs` when given (a
   * controller's requeue-after). NOTE: `replace` lets an immediate reconcile (a write) take the place of a
   * delayed one, so a backoff never holds up a change.
   */
  async enqueueMany(keys: ResourceKey[], delayMs = 0): Promise<void> {
    const byKind = new Map<string, ResourceKey[]>();
    for (const k of keys) {
      if (!this.queues.has(k.kind)) continue;
      if (!byKind.has(k.kind)) byKind.set(k.kind, []);
      byKind.get(k.kind)!.push(k);
    }
    const chunks: [string, ResourceKey[]][] = [];
    for (const [kind, ks] of byKind) for (let i = 0; i < ks.length; i += 1000) chunks.push([kind, ks.slice(i, i + 1000)]);
    await Promise.all(chunks.map(([kind, ks]) => this.queues.get(kind)!.addBulk(ks.map(({ id }) => ({
      name: 'reconcile',
      data: { id },
      opts: {
        deduplication: { id, keepLastIfActive: true, replace: true },
        ...(delayMs > 0 ? { delay: delayMs } : {}),
        attempts: 10,
        backoff: { type: 'exponential', delay: 200 },
        removeOnComplete: true,
        removeOnFail: 1000,
      },
    })))));
  }

  /** depth returns the waiting, delayed and active reconciles of each kind. */
  async depth(): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    await Promise.all([...this.queues].map(async ([kind, q]) => {
      const c = await q.getJobCounts('waiting', 'delayed', 'active', 'prioritized');
      out.set(kind, Object.values(c).reduce((a, b) => a + b, 0));
    }));
    return out;
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
  }
}
