import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { member } from '../store/keys.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { ResourceRecord, ResourceStatus } from '../store/types.ts';
import type { Metrics } from '../runtime/process/metrics.ts';
import { LEASE_MS } from './reconcile-worker.ts';
import type { RegistryController } from './registry-controller.ts';
import { reconcileStatus } from './status.ts';
import type { ResourceKey } from './types.ts';

/** PAGE bounds the keys of one script call (the relay hands pages of up to 500 changes). */
const PAGE = 500;

/** BatchReconcilerOptions configures a BatchReconciler. */
export interface BatchReconcilerOptions {
  store: ResourceStore;
  /** The projection-only controllers (RegistryController): they decide without acting on the world. */
  controllers: RegistryController[];
  metrics: Metrics;
  logger: Logger;
}

interface Planned { key: ResourceKey; mode: 'p' | 's' | 'r'; entry: string; status: string; outcome: string }

/**
 * BatchReconciler reconciles the projection-only keys of a relay page without BullMQ: one script takes every
 * key's reconcile lease (the one the ReconcileWorker takes, so no two reconciles of a key ever run at once) and
 * reads the records at one revision, the controllers decide in memory, and one script projects the registry
 * entries, writes each status and observed revision, releases the leases and announces the keys. Each key is
 * still one reconcile with its own status. A key whose lease is held (a reconcile is running), or whose
 * reconcile threw, or a page whose scripts failed, goes back to the caller for its kind's queue, which keeps
 * the queue's guarantees for it: a reconcile after the running one (keepLastIfActive) and retries with backoff.
 */
export class BatchReconciler {
  private readonly byKind = new Map<string, RegistryController>();

  constructor(private readonly o: BatchReconcilerOptions) {
    for (const c of o.controllers) this.byKind.set(c.kind, c);
  }

  /** reconcile reconciles the keys of the kinds it handles; it returns the keys left to the queues. */
  async reconcile(keys: ResourceKey[]): Promise<ResourceKey[]> {
    const rest: ResourceKey[] = [];
    const mine = new Map<string, ResourceKey>();
    for (const k of keys) {
      if (!this.byKind.has(k.kind)) rest.push(k);
      else mine.set(member(k.kind, k.id), k);
    }
    const all = [...mine.values()];
    for (let i = 0; i < all.length; i += PAGE) rest.push(...(await this.page(all.slice(i, i + PAGE))));
    return rest;
  }

  private async page(keys: ResourceKey[]): Promise<ResourceKey[]> {
    const { store, metrics, logger } = this.o;
    const { keys: k } = store;
    const token = `${process.pid}:batch:${randomUUID()}`;
    const started = process.hrtime.bigint();
    let read: (string | number | null)[];
    try {
      const readKeys: string[] = [k.revision];
      for (const { kind, id } of keys) readKeys.push(k.lock(`reconciling:${kind}:${id}`), k.record(kind, id), k.status(kind, id));
      read = await store.redis.reconcileRead(readKeys.length, ...readKeys, token, LEASE_MS);
    } catch (err) {
      logger.warn({ err, keys: keys.length }, 'batch reconcile read failed; queueing its keys');
      return keys;
    }
    const revision = Number(read[0] ?? 0);
    const rest: ResourceKey[] = [];
    // NOTE: the keys are planned together, not one after another: a plan may read Redis (the model catalog, a vault
    // ref), and each read waits for the event loop's next turn, which under load is milliseconds; a page of 500 keys
    // planned in turn took seconds, and every `?wait=true` write behind it waited as long.
    const plans = await Promise.all(keys.map((key, i) => {
      if (read[1 + 3 * i] === 1) return this.plan(key, read[2 + 3 * i] as string | null, read[3 + 3 * i] as string | null);
      // NOTE: another reconcile holds the key; its queue runs one more reconcile after it.
      metrics.reconcileDeferrals.inc({ kind: key.kind });
      return undefined;
    }));
    const planned: Planned[] = [];
    plans.forEach((p, i) => {
      if (p) planned.push(p);
      if (!p || p.mode === 'r') rest.push(keys[i]);
    });
    if (!planned.length) return rest;
    let done: number[];
    try {
      const writeKeys: string[] = [k.observed, k.lock('reconcile-overlaps')];
      const args: (string | number)[] = [token, revision, k.reconciled, k.registryChannel];
      for (const p of planned) {
        const { kind, id } = p.key;
        writeKeys.push(k.lock(`reconciling:${kind}:${id}`), k.record(kind, id), k.status(kind, id), k.registry(kind), k.registryRevision(kind));
        args.push(member(kind, id), id, p.mode, p.entry, p.status);
      }
      done = await store.redis.reconcileWrite(writeKeys.length, ...writeKeys, ...args);
    } catch (err) {
      // NOTE: the leases lapse after LEASE_MS; the queue defers these keys until then.
      logger.warn({ err, keys: planned.length }, 'batch reconcile write failed; queueing its keys');
      return [...rest, ...planned.filter((p) => p.mode !== 'r').map((p) => p.key)];
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const changed: ResourceKey[] = [];
    planned.forEach((p, i) => {
      if (done[i] & 2) metrics.reconcileOverlaps.inc({ kind: p.key.kind });
      if (p.mode === 'r') return;
      if (done[i] & 1) changed.push(p.key);
      metrics.reconciles.inc({ kind: p.key.kind, outcome: p.outcome });
      metrics.reconcileDuration.observe({ kind: p.key.kind }, seconds);
    });
    const byKind = new Map<string, ResourceKey[]>();
    for (const key of changed) byKind.set(key.kind, [...(byKind.get(key.kind) ?? []), key]);
    // NOTE: once per kind for the page: the hooks re-enqueue a kind's dependents whatever key changed.
    for (const [kind, ks] of byKind) await this.byKind.get(kind)!.changed(ks);
    return rest;
  }

  /** plan decides one leased key's reconcile; a controller that throws gives mode 'r' (retried on the queue). */
  private async plan(key: ResourceKey, json: string | null, prevJson: string | null): Promise<Planned> {
    try {
      const record = json ? JSON.parse(json) as ResourceRecord : undefined;
      const prev = prevJson ? JSON.parse(prevJson) as ResourceStatus : undefined;
      const { result, entry } = await this.byKind.get(key.kind)!.planWithDependencies(record);
      const status = record ? JSON.stringify(reconcileStatus(prev, record.version, result, true)) : '';
      return { key, mode: entry === undefined ? 's' : 'p', entry: entry ?? '', status, outcome: result.outcome };
    } catch (err) {
      // NOTE: a reconcile that threw retries on the queue, with backoff; its lease is released with the page's.
      this.o.logger.warn({ kind: key.kind, id: key.id, err: err instanceof Error ? err.message : String(err) }, 'reconcile failed; queueing it for retry');
      this.o.metrics.reconciles.inc({ kind: key.kind, outcome: 'error' });
      return { key, mode: 'r', entry: '', status: '', outcome: 'error' };
    }
  }
}
