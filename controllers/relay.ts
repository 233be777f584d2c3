import type { Logger } from 'pino';
import { parseChange, type ResourceStore } from '../store/resource-store.ts';
import type { ReconcileQueues } from './queues.ts';
import type { ResourceKey } from './types.ts';
import { StreamGroupReader, type StreamEntry } from '../store/stream-group.ts';
import type { BusEventInput, EventBus } from '../store/event-bus.ts';
import type { BatchReconciler } from './batch-reconciler.ts';

const GROUP = 'relay';

/** ChangeRelayOptions configures a ChangeRelay. */
export interface ChangeRelayOptions {
  store: ResourceStore;
  queues: ReconcileQueues;
  logger: Logger;
  /** Kinds that own children: a deleted child also enqueues its owner, so the child reappears promptly. */
  ownerKinds: readonly string[];
  /** When set, every change is also published on the event bus. */
  bus?: EventBus;
  /** When set, reconciles the keys of projection-only kinds in the page itself; the rest go to the queues. */
  batch?: BatchReconciler;
  /**
   * Owners that are not resource kinds (an extension): a deleted child of one calls its hook with the owner ids, so
   * the child reappears as an activation's does.
   */
  ownerHooks?: Record<string, (ids: string[]) => Promise<void>>;
}

/**
 * ChangeRelay turns change-log entries into reconciles: projection-only kinds in the page (BatchReconciler),
 * reconcile jobs for the others. It reads the log through a consumer group
 * (StreamGroupReader) and acknowledges an entry only after its jobs are enqueued, so a crash between a write and
 * its enqueue loses nothing. NOTE: the group starts at the log's end: everything written before it exists is
 * enqueued by the start-up resync that follows (ControllerManager.start), so replaying the whole log would do
 * it twice. Each change is also published on the event bus as `resource.<op>` (for triggers and presets).
 */
export class ChangeRelay {
  private readonly reader: StreamGroupReader;

  constructor(private readonly o: ChangeRelayOptions) {
    this.reader = new StreamGroupReader({ redis: o.store.redis, stream: o.store.keys.changes, group: GROUP, logger: o.logger, handle: (e) => this.relay(e) });
  }

  start(): Promise<void> { return this.reader.start(); }
  stop(): Promise<void> { return this.reader.stop(); }

  private async relay(entries: StreamEntry[]): Promise<void> {
    const keys: ResourceKey[] = [];
    const events: BusEventInput[] = [];
    const hooked = new Map<string, string[]>();
    for (const [id, fields] of entries) {
      const change = parseChange(id, fields);
      keys.push({ kind: change.kind, id: change.id });
      const { scope, owner } = change.record;
      if (change.type === 'delete' && this.o.ownerKinds.includes(owner.kind)) keys.push({ kind: owner.kind, id: owner.id });
      if (change.type === 'delete' && this.o.ownerHooks?.[owner.kind]) hooked.set(owner.kind, [...(hooked.get(owner.kind) ?? []), owner.id]);
      if (this.o.bus) {
        events.push({
          type: change.type === 'delete' ? 'resource.deleted' : 'resource.applied', source: 'resources', scope: scope.kind, workspace_id: scope.id ?? '',
          summary: `${change.kind} ${change.id} ${change.type === 'delete' ? 'deleted' : `applied at version ${change.version}`}`,
          data: { kind: change.kind, id: change.id, version: change.version, revision: change.revision },
        });
      }
    }
    // NOTE: the page is acknowledged only after its batch reconciled or its keys were queued (crash-safe).
    await this.o.queues.enqueueMany(this.o.batch ? await this.o.batch.reconcile(keys) : keys);
    for (const [kind, ids] of hooked) await this.o.ownerHooks![kind](ids);
    if (events.length) await this.o.bus!.publishMany(events);
  }
}
