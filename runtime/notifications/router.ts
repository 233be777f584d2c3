import type { Logger } from 'pino';
import type { RegistryCache, RegistryEntry } from '../../controllers/registry-controller.ts';
import type { BusEvent, EventBus } from '../../store/event-bus.ts';
import type { NotificationStore, StoredDelivery } from '../../store/notification-store.ts';
import type { StreamGroupReader } from '../../store/stream-group.ts';
import type { Metrics } from '../process/metrics.ts';
import { filterSubject, toDeliveredEvent } from './delivered-event.ts';
import { DELIVERY_UPDATED, deliveryUpdated } from './delivery-events.ts';
import { matchesEventPattern } from '../../codecs/event-names.ts';
import { evaluateFilter, parseFilter, type FilterExpr } from '../../codecs/event-filter.ts';
import { deliveryId, type NotificationQueue } from './notification-queue.ts';
import type { DeliveryBatch, DeliveryJob, DeliveryRecord, NotificationPreset } from './types.ts';

/** NOTIFY_GROUP is the bus consumer group of the router. */
export const NOTIFY_GROUP = 'notify';

type CompiledPreset = { preset: Pick<NotificationPreset, 'name' | 'enabled' | 'events' | 'targets'>; filter: FilterExpr | undefined };
type BridgeSpec = { enabled?: boolean; notification_suppress?: boolean; scope?: string; workspace_id?: string };

/** NotificationRouterOptions configures a NotificationRouter. */
export interface NotificationRouterOptions {
  bus: EventBus;
  store: NotificationStore;
  queue: NotificationQueue;
  bridges: RegistryCache;
  logger: Logger;
  metrics?: Metrics;
}

/**
 * NotificationRouter reads the event bus (consumer group `notify`) and, for each event, finds the enabled
 * presets whose events match its type and whose filter matches it, and records and enqueues one delivery per
 * (event, preset, target), enqueued as one batch job per bridge. A page is acknowledged only once its deliveries
 * are stored and enqueued; rows are created once per delivery id, a batch's job id is derived from its delivery
 * ids, and a delivery whose row left `pending` is neither enqueued again nor POSTed again by a batch, so a page
 * handed over twice delivers nothing twice.
 * A workspace-scoped bridge receives only its workspace's events; a disabled one records the delivery skipped.
 */
export class NotificationRouter {
  private reader?: StreamGroupReader;
  private readonly compiled = new Map<string, CompiledPreset>();

  constructor(private readonly o: NotificationRouterOptions) {}

  async start(): Promise<void> {
    // NOTE: a delivery's own events never route (they would notify about notifying).
    this.reader = this.o.bus.reader(NOTIFY_GROUP, this.o.logger, (events) => this.route(events), () => (t) => t !== DELIVERY_UPDATED);
    await this.reader.start();
  }

  async stop(): Promise<void> {
    await this.reader?.stop();
  }

  /** route handles one page of bus events. */
  async route(events: BusEvent[]): Promise<void> {
    const presets = await this.presets();
    if (!presets.length) return;
    const bridges = new Map(((await this.o.bridges.read(['bridge.instance'])).entries['bridge.instance'] as RegistryEntry<BridgeSpec>[]).map((b) => [b.id, b]));
    const rows: DeliveryRecord[] = [];
    const workspaces: string[] = [];
    const jobs = new Map<string, DeliveryJob>();
    const now = new Date().toISOString();
    for (const ev of events) {
      if (ev.type === DELIVERY_UPDATED) continue;
      const delivered = toDeliveredEvent(ev);
      const subject = filterSubject(delivered);
      for (const { preset, filter } of presets) {
        if (!preset.events.some((p) => matchesEventPattern(p, ev.type)) || !evaluateFilter(filter, subject)) continue;
        for (const t of preset.targets) {
          const bridge = bridges.get(t.bridge_id);
          if (bridge?.scope.kind === 'workspace' && bridge.scope.id !== ev.workspace_id) continue;
          const id = deliveryId(ev.id, preset.name, t.bridge_id);
          const skip = !bridge ? `bridge "${t.bridge_id}" does not exist`
            : !bridge.spec.enabled ? 'the bridge is disabled'
            : bridge.spec.notification_suppress ? 'the bridge suppresses notifications' : '';
          const row: DeliveryRecord = {
            id, event_id: ev.id, event_type: ev.type, preset: preset.name, bridge_id: t.bridge_id, status: skip ? (bridge ? 'skipped' : 'failed') : 'pending',
            attempts: 0, last_error: skip, last_status: 0, created_at: now, updated_at: now, delivered_at: '',
          };
          rows.push(row);
          workspaces.push(ev.workspace_id);
          if (!skip) jobs.set(id, { delivery_id: id, preset: preset.name, bridge_id: t.bridge_id, created_at: now, event: delivered });
        }
      }
    }
    if (!rows.length) return;
    const created = await this.o.store.createDeliveries(rows);
    // NOTE: a row that already existed (a page handed over again) is re-enqueued only while still pending: the
    // batch's job id makes that a no-op if its job is there, and restores it if the first pass died before adding
    // it; the worker skips any row that is no longer pending or that a retry job owns. A page handed over again
    // with other bounds (a claim that merged two dead readers' pages, presets changed in between) makes another
    // batch id: a delivery not attempted yet may then be POSTed by both, with the same Idempotency-Key.
    const existing = rows.filter((r, i) => !created[i] && jobs.has(r.id));
    const stored = await this.o.store.deliveries(existing.map((r) => r.id));
    stored.forEach((raw, i) => {
      if (raw && (JSON.parse(raw) as StoredDelivery).status !== 'pending') jobs.delete(existing[i].id);
    });
    // One batch per bridge: its deliveries are POSTed together and their rows and events written together.
    const batches = new Map<string, DeliveryBatch>();
    for (const j of jobs.values()) {
      const b = batches.get(j.bridge_id) ?? { bridge_id: j.bridge_id, deliveries: [] };
      b.deliveries.push(j);
      batches.set(j.bridge_id, b);
    }
    await this.o.queue.addBatches([...batches.values()]);
    for (const r of rows) if (r.status !== 'pending') this.o.metrics?.notificationDeliveries.inc({ outcome: r.status });
    const fresh = rows.flatMap((r, i) => (created[i] ? [deliveryUpdated(r, workspaces[i])] : []));
    // NOTE: after the enqueue, so a reader that sees the event finds the row; a failed publish delays only readers.
    if (fresh.length) await this.o.bus.publishMany(fresh).catch((err) => this.o.logger.warn({ err: (err as Error).message }, 'delivery events not published'));
    await this.o.store.trim();
  }

  /** presets reads the enabled presets, compiling each filter once per distinct definition. */
  private async presets(): Promise<CompiledPreset[]> {
    const out: CompiledPreset[] = [];
    const live = new Set<string>();
    for (const json of Object.values(await this.o.store.presets())) {
      live.add(json);
      let c = this.compiled.get(json);
      if (!c) {
        const preset = JSON.parse(json) as NotificationPreset;
        const parsed = parseFilter(preset.filter ?? '');
        // NOTE: filters are checked on write; one that no longer parses matches nothing rather than everything.
        c = { preset, filter: parsed.ok ? parsed.expr : { kind: 'cmp', field: 'severity', op: '=', value: '\u0000never' } };
        this.compiled.set(json, c);
      }
      if (c.preset.enabled && c.preset.targets.length) out.push(c);
    }
    for (const k of this.compiled.keys()) if (!live.has(k)) this.compiled.delete(k);
    return out;
  }
}
