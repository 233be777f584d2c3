import { Queue, Worker, type ConnectionOptions } from 'bullmq';
import type { Logger } from 'pino';
import { quietQueue } from '../../store/connections.ts';
import type { ExtensionStore } from '../../store/extension-store.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { ResourceRecord } from '../../store/types.ts';
import { repeatedErrors } from '../process/repeated-errors.ts';
import { ownerOf, planChildren } from './children.ts';
import type { ExtensionRecord } from './types.ts';

/** EXTENSION_QUEUE is the BullMQ queue of extension projections (its own prefix `{q:extensions}`). */
export const EXTENSION_QUEUE = 'extensions';

/** Projection is what the last projection of an extension did, kept beside the record for its view. */
export interface Projection {
  generation: number;
  ready: boolean;
  reason: string;
  message: string;
  children: { kind: string; id: string }[];
  at: string;
}

/** ExtensionProjectorOptions wire the projector. */
export interface ExtensionProjectorOptions {
  extensions: ExtensionStore;
  resources: ResourceStore;
  connection: ConnectionOptions;
  queuePrefix: string;
  /** Where a record's artifact is unpacked in every process (ExtensionCache.dirOf): skills' `dir`. */
  dirOf: (sha256: string) => string;
  resyncIntervalMs: number;
  logger: Logger;
}

/**
 * ExtensionProjector keeps each extension's resource records in step with its record, as a bundle activation does
 * its children (controllers/bundle-activation.ts): an enabled extension's bundles, skills, agents, hooks, MCP servers
 * and daemon tools are records owned by `{kind: extension, id: <name>}` with the same source; a missing one is
 * created, a changed one updated, an extra one deleted, and all are deleted when the extension is disabled or
 * removed. Level-triggered through one deduplicated BullMQ job per name (`{q:extensions}`): enqueued by every
 * install, update, enable, disable and removal, by the change relay when a child is deleted by hand (so it
 * reappears), and by a resync (at start and on the resync interval) that also finds records whose extension is gone.
 */
export class ExtensionProjector {
  private readonly queue: Queue;
  private worker?: Worker;
  private timer?: NodeJS.Timeout;

  constructor(private readonly o: ExtensionProjectorOptions) {
    this.queue = quietQueue(new Queue(EXTENSION_QUEUE, { connection: o.connection, prefix: o.queuePrefix }));
  }

  /** enqueue asks for the projection of some extensions (deduplicated per name; a change during a run runs again). */
  async enqueue(names: string[]): Promise<void> {
    if (!names.length) return;
    await this.queue.addBulk([...new Set(names)].map((name) => ({
      name: 'project', data: { name },
      opts: { deduplication: { id: name, keepLastIfActive: true }, attempts: 10, backoff: { type: 'exponential', delay: 200 }, removeOnComplete: true, removeOnFail: 1000 },
    })));
  }

  /** startWorker runs projections in this (controller) process, after a resync of every extension. */
  async startWorker(): Promise<void> {
    this.worker = new Worker<{ name: string }>(EXTENSION_QUEUE, (job) => this.project(job.data.name), { connection: this.o.connection, prefix: this.o.queuePrefix, concurrency: 4 });
    this.worker.on('error', repeatedErrors.listener(this.o.logger, 'error', 'extension projection worker error'));
    await this.resync();
    this.timer = setInterval(() => void this.resync().catch((err) => this.o.logger.error({ err }, 'extension resync failed')), this.o.resyncIntervalMs);
    this.timer.unref();
  }

  /** resync enqueues every installed extension and every name that still owns records. */
  async resync(): Promise<void> {
    const { records } = await this.o.extensions.all();
    const owners = (await this.o.resources.list({})).filter((r) => r.owner.kind === 'extension').map((r) => r.owner.id);
    await this.enqueue([...Object.keys(records), ...owners]);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.worker?.close();
    await this.queue.close();
  }

  /** project is one level-triggered pass over one extension; running it twice is harmless. */
  async project(name: string): Promise<Projection> {
    const { extensions, resources } = this.o;
    const owner = ownerOf(name);
    const raw = await extensions.get(name);
    const record = raw ? (JSON.parse(raw) as ExtensionRecord) : undefined;
    const existing = await resources.list({ owner });
    const done = async (p: Omit<Projection, 'at' | 'generation'>): Promise<Projection> => {
      const out = { ...p, generation: record?.generation ?? 0, at: new Date().toISOString() };
      if (record) await extensions.setProjection(name, JSON.stringify(out));
      return out;
    };
    if (!record || !record.enabled) {
      for (const child of existing) await this.remove(child);
      return done({ ready: true, reason: record ? 'Disabled' : 'Removed', message: `deleted ${existing.length} records`, children: [] });
    }
    const plan = planChildren(record, this.o.dirOf(record.sha256));
    if (!plan.ok) return done({ ready: false, reason: 'InvalidChild', message: plan.message, children: [] });
    for (const child of plan.children) {
      const current = await resources.get(child.kind, child.id);
      if (current && (current.owner.kind !== owner.kind || current.owner.id !== owner.id)) {
        return done({ ready: false, reason: 'ChildConflict', message: `${child.kind} "${child.id}" exists and is owned by ${current.owner.kind} "${current.owner.id}"`, children: [] });
      }
      // NOTE: a version race (the child changed since the read) throws ConflictError: the job retries with backoff.
      await resources.put({ kind: child.kind, id: child.id, scope: { kind: 'global' }, owner, source: owner, spec: child.spec, expectedVersion: current?.version ?? 0 });
    }
    const wanted = new Set(plan.children.map((c) => `${c.kind} ${c.id}`));
    for (const extra of existing.filter((r) => !wanted.has(`${r.kind} ${r.id}`))) await this.remove(extra);
    return done({ ready: true, reason: 'Projected', message: `${plan.children.length} records projected`, children: plan.children.map((c) => ({ kind: c.kind, id: c.id })) });
  }

  private async remove(child: ResourceRecord): Promise<void> {
    try {
      await this.o.resources.delete(child.kind, child.id, child.version);
    } catch (err) {
      // NOTE: already gone is the goal; anything else (a newer version) is retried with backoff.
      if ((err as { status?: number }).status !== 404) throw err;
    }
  }
}
