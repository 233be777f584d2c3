import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { BusEvent, EventBus } from '../../../store/event-bus.ts';
import type { LoopStore } from '../../../store/loop-store.ts';
import type { StreamGroupReader } from '../../../store/stream-group.ts';
import { filterSubject, toDeliveredEvent } from '../../notifications/delivered-event.ts';
import { evaluateFilter, parseFilter, type FilterExpr } from '../../../codecs/event-filter.ts';
import { fieldOf, type NodeRecord } from '../planner.ts';
import { isTerminal, LOOP_LIMITS, type LoopEngineControl, type NodeContext, type NodeExecutor, type NodeKey, type NodeOutcome } from '../types.ts';

/** Subscription is one `{kind, filter}` of a watch-events node: an event name and a preset filter. */
export interface Subscription { kind: string; filter?: string }

/** WatchRecord is a registered wait: the node execution, its run's workspace, its subscriptions and bus cursor. */
export interface WatchRecord {
  key: NodeKey;
  workspace_id: string;
  subscriptions: Subscription[];
  /** The bus entry id the wait started after: events after it may wake the node (a catch-up scan reads from it). */
  after: string;
  registered_at: string;
}

/**
 * WatchKeys names the registry of waiting watch-events nodes. NOTE: one hash tag `{loopwatch}` for the whole
 * registry (two keys written together: the records and a revision the watchers poll): one write per watch that
 * starts or ends, so this slot bounds how often watches start, not how many events are matched.
 */
export class WatchKeys {
  constructor(readonly prefix: string) {}
  get subs() { return `${this.prefix}{loopwatch}:subs`; }
  get rev() { return `${this.prefix}{loopwatch}:rev`; }
  /** cursor keeps a wait's first bus position under its run's tag, so a retried attempt does not skip events. */
  cursor(k: NodeKey) { return `${this.prefix}{loop:${k.runId}}:watch:${fieldOf(k.generation, k.nodeId, k.itemIndex)}`; }
}

const fieldOfKey = (k: NodeKey) => `${k.runId}|${fieldOf(k.generation, k.nodeId, k.itemIndex)}`;
const CURSOR_TTL_S = 7 * 24 * 3600;

/** subscriptionsOf reads a node's `events` (the lint checked their shape, kinds and filters). */
export function subscriptionsOf(events: unknown): Subscription[] {
  if (!Array.isArray(events)) return [];
  return events.filter((e): e is Subscription => Boolean(e) && typeof (e as Subscription).kind === 'string')
    .map((e) => ({ kind: e.kind, ...(typeof e.filter === 'string' && e.filter.trim() ? { filter: e.filter } : {}) }));
}

/**
 * WatchEventsExecutor runs a `watch-events` node: it registers the node's subscriptions (event names of the hook
 * catalog, each with a filter in the notification presets' grammar; the original used CEL expressions here) with the
 * bus position it starts from, and parks the node `waiting` on `event`. LoopEventWatcher wakes it with the first
 * matching event of the run's workspace (or a global one) as its output; while only such waits are in flight the run
 * shows `watching`.
 *
 * NOTE: exactly once. Registering is idempotent (the cursor is set once per node execution, the record rewritten
 * with it), and the wake goes through the engine's completeWaiting, which ends a waiting node once.
 */
export class WatchEventsExecutor implements NodeExecutor {
  readonly kind = 'watch-events';
  readonly sideEffects = 'exactly-once' as const;
  private readonly keys: WatchKeys;

  constructor(private readonly o: { redis: Redis; bus: EventBus; prefix: string }) {
    this.keys = new WatchKeys(o.prefix);
  }

  async run(ctx: NodeContext): Promise<NodeOutcome> {
    const subscriptions = subscriptionsOf(ctx.node.events);
    if (!subscriptions.length) return { outcome: 'failed', error: 'a watch-events node needs events: [{kind, filter?}]' };
    for (const s of subscriptions) {
      const f = parseFilter(s.filter ?? '');
      if (!f.ok) return { outcome: 'failed', error: `events filter "${s.filter}": ${f.error}` };
    }
    const cursorKey = this.keys.cursor(ctx.key);
    const { last } = await this.o.bus.position();
    await this.o.redis.set(cursorKey, last, 'EX', CURSOR_TTL_S, 'NX');
    const after = (await this.o.redis.get(cursorKey)) ?? last;
    const rec: WatchRecord = { key: ctx.key, workspace_id: ctx.run.workspace_id, subscriptions, after, registered_at: new Date().toISOString() };
    await this.o.redis.multi().hset(this.keys.subs, fieldOfKey(ctx.key), JSON.stringify(rec)).incr(this.keys.rev).exec();
    return { outcome: 'waiting', wait: { kind: 'event', ref: subscriptions.map((s) => s.kind).join(','), detail: { subscriptions, after } } };
  }
}

/** Compiled is a registered wait with its filters parsed. */
interface Compiled { field: string; rec: WatchRecord; filters: Map<string, (FilterExpr | undefined)[]> }

/** LoopEventWatcherOptions wire the watcher to the bus, the run store and the engine. */
export interface LoopEventWatcherOptions {
  redis: Redis;
  bus: EventBus;
  store: LoopStore;
  control: LoopEngineControl;
  prefix: string;
  logger: Logger;
  /** How often registered waits are swept: catch-up scans, the `watching` status, pruning (default 1 s). */
  sweepMs?: number;
}

/** MAX_EVENT_DATA bounds the event data a woken node's output keeps (its payload limit is 16 KiB). */
const MAX_EVENT_DATA = LOOP_LIMITS.eventPayloadBytes / 2;
const CATCH_UP_PAGE = 500;

/**
 * LoopEventWatcher wakes watch-events nodes: a consumer group on the event bus (every controller reads a share of the
 * events, each matching them against every registered wait) plus a sweep that catches up each wait from its cursor
 * (events published before the wait was registered or while no watcher ran), moves a run whose only work in flight
 * is event waits to `watching` (cause watch_events) and back to `running` when one wakes, and drops waits whose node
 * or run has ended.
 */
export class LoopEventWatcher {
  private readonly keys: WatchKeys;
  private reader?: StreamGroupReader;
  private timer?: NodeJS.Timeout;
  private running = false;
  private rev = '';
  private byKind = new Map<string, Compiled[]>();
  private all: Compiled[] = [];
  private sweeping?: Promise<void>;

  constructor(private readonly o: LoopEventWatcherOptions) {
    this.keys = new WatchKeys(o.prefix);
  }

  async start(): Promise<void> {
    this.running = true;
    // NOTE: the waits are loaded once per page, before it is filtered: only the event kinds some wait is on are decoded.
    this.reader = this.o.bus.reader('loop-watch-events', this.o.logger, (events) => this.onEvents(events), async () => {
      await this.load();
      return (t) => this.byKind.has(t);
    });
    await this.reader.start();
    const tick = () => {
      if (!this.running) return;
      this.sweeping = this.sweep().catch((err) => this.o.logger.warn({ err: (err as Error).message }, 'loop watch sweep failed')).finally(() => {
        if (this.running) this.timer = setTimeout(tick, this.o.sweepMs ?? 1_000);
      });
    };
    tick();
  }

  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    await this.reader?.stop();
    await this.sweeping;
  }

  /** load re-reads the registry when its revision moved. */
  private async load(): Promise<void> {
    const rev = (await this.o.redis.get(this.keys.rev)) ?? '0';
    if (rev === this.rev) return;
    const raw = await this.o.redis.hgetall(this.keys.subs);
    const all: Compiled[] = [];
    const byKind = new Map<string, Compiled[]>();
    for (const [field, json] of Object.entries(raw)) {
      let rec: WatchRecord;
      try { rec = JSON.parse(json) as WatchRecord; } catch { continue; }
      const filters = new Map<string, (FilterExpr | undefined)[]>();
      for (const s of rec.subscriptions) {
        const f = parseFilter(s.filter ?? '');
        if (!f.ok) continue;
        filters.set(s.kind, [...(filters.get(s.kind) ?? []), f.expr]);
      }
      const c: Compiled = { field, rec, filters };
      all.push(c);
      for (const kind of filters.keys()) byKind.set(kind, [...(byKind.get(kind) ?? []), c]);
    }
    this.all = all;
    this.byKind = byKind;
    this.rev = rev;
  }

  /** matches says whether an event wakes a wait: its kind, its workspace (or a global event), a filter of that kind. */
  private matches(c: Compiled, ev: BusEvent): boolean {
    const filters = c.filters.get(ev.type);
    if (!filters) return false;
    if (ev.workspace_id && ev.workspace_id !== c.rec.workspace_id) return false;
    const subject = filterSubject(toDeliveredEvent(ev));
    return filters.some((f) => evaluateFilter(f, subject));
  }

  /** onEvents wakes the waits an event matches; the reader loaded the waits for this page. */
  private async onEvents(events: BusEvent[]): Promise<void> {
    for (const ev of events) {
      for (const c of this.byKind.get(ev.type) ?? []) {
        if (this.matches(c, ev)) await this.wake(c, ev);
      }
    }
  }

  /** node reads a wait's node record and its run's status. */
  private async node(c: Compiled): Promise<{ rec?: NodeRecord; status: string }> {
    const k = c.rec.key;
    const [raw, status] = await Promise.all([this.o.store.readNode(k.runId, fieldOf(k.generation, k.nodeId, k.itemIndex)), this.o.store.status(k.runId)]);
    return { rec: raw ? (JSON.parse(raw) as NodeRecord) : undefined, status };
  }

  private async drop(c: Compiled): Promise<void> {
    await this.o.redis.multi().hdel(this.keys.subs, c.field).incr(this.keys.rev).exec();
    await this.o.redis.del(this.keys.cursor(c.rec.key));
  }

  /**
   * wake ends a wait with the event: the run goes back to `running` (when it shows `watching`), then the engine
   * completes the node once. A node not yet recorded waiting keeps its wait (the sweep catches it up); one that
   * ended, or whose run ended, loses it.
   */
  private async wake(c: Compiled, ev: BusEvent): Promise<void> {
    const { rec, status } = await this.node(c);
    if (!status || isTerminal(status) || !rec || ['succeeded', 'failed', 'skipped'].includes(rec.state)) return this.drop(c);
    if (rec.state !== 'waiting' || rec.wait?.kind !== 'event') return;
    const k = c.rec.key;
    if (status === 'watching') {
      await this.o.store.step(k.runId, { expect: { status: ['watching'], generation: k.generation }, transition: { to: 'running', cause: 'watch_events', reason: `${ev.type} woke ${k.nodeId}` } });
    }
    const done = await this.o.control.completeWaiting(k, { outcome: 'succeeded', output: { event: eventOutput(ev) } });
    this.o.logger.debug({ run_id: k.runId, node_id: k.nodeId, event: ev.type, done }, 'loop watch-events woke');
    if (done) await this.drop(c);
  }

  /** sweep catches every wait up from its cursor, shows `watching` where only event waits are in flight, prunes. */
  private async sweep(): Promise<void> {
    await this.load();
    const runs = new Set<string>();
    for (const c of this.all) {
      if (!this.running) return;
      const { rec, status } = await this.node(c);
      if (!status || isTerminal(status) || (rec && ['succeeded', 'failed', 'skipped'].includes(rec.state))) { await this.drop(c); continue; }
      if (!rec || rec.state !== 'waiting' || rec.wait?.kind !== 'event') continue;
      const woke = await this.catchUp(c);
      if (!woke) runs.add(c.rec.key.runId);
    }
    for (const runId of runs) await this.showWatching(runId);
  }

  /** catchUp reads the bus after a wait's cursor (a page per sweep) and wakes it on the first match. */
  private async catchUp(c: Compiled): Promise<boolean> {
    const events = await this.o.bus.range(c.rec.after, CATCH_UP_PAGE);
    for (const ev of events) {
      if (this.matches(c, ev)) {
        await this.wake(c, ev);
        return true;
      }
    }
    const last = events.at(-1)?.id;
    if (last) {
      // NOTE: the cursor only moves past events that did not match, so nothing is skipped.
      c.rec.after = last;
      await this.o.redis.set(this.keys.cursor(c.rec.key), last, 'EX', CURSOR_TTL_S);
      await this.o.redis.hset(this.keys.subs, c.field, JSON.stringify(c.rec));
    }
    return false;
  }

  /** showWatching moves a running run to `watching` when every node in flight in its generation waits on an event. */
  private async showWatching(runId: string): Promise<void> {
    const state = await this.o.store.readState(runId);
    if (!state || state.run.status !== 'running') return;
    const gen = Number(state.run.generation);
    let watching = 0;
    for (const raw of Object.values(state.nodes)) {
      const r = JSON.parse(raw) as NodeRecord;
      if (r.generation !== gen || !['queued', 'running', 'waiting'].includes(r.state)) continue;
      if (r.state !== 'waiting' || r.wait?.kind !== 'event') return;
      watching++;
    }
    if (!watching) return;
    await this.o.store.step(runId, { expect: { status: ['running'], generation: gen }, transition: { to: 'watching', cause: 'watch_events', reason: `${watching} node(s) wait for events` } });
  }
}

/** eventOutput is what a woken node outputs of its event: the delivered-event fields, its data clipped. */
export function eventOutput(ev: BusEvent): Record<string, unknown> {
  const data = JSON.stringify(ev.data ?? {});
  return {
    id: ev.id, type: ev.type, timestamp: ev.timestamp, source: ev.source, workspace_id: ev.workspace_id, session_id: ev.session_id,
    agent_name: ev.agent_name, outcome: ev.outcome, summary: ev.summary,
    data: data.length <= MAX_EVENT_DATA ? ev.data : { truncated: true, bytes: data.length },
  };
}
