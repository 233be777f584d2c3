import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Keys } from './keys.ts';
import { StreamGroupReader, type StreamEntry } from './stream-group.ts';

/** Outcome ranks an event for notification filters (spec/gaps.md §6.6). */
export type Outcome = 'info' | 'success' | 'warning' | 'failure';

/**
 * BusEvent is one event of the service's event bus: every family publishes here (sessions, resources,
 * automation, hooks, tools), and the hook dispatcher, the trigger engine, the notification router and the
 * console read it. `type` is a catalog name (`session.post_stop`, `resource.applied`, `automation.run.failed`);
 * `data` is already redacted by the publisher: a secret never reaches the bus.
 */
export interface BusEvent {
  /** The stream entry id: unique, ordered, usable as a resume point. */
  id: string;
  type: string;
  timestamp: string;
  /** The family that emitted it: sessions, agents, tools, resources, automation, hooks, notifications. */
  source: string;
  scope: 'global' | 'workspace';
  workspace_id: string;
  session_id: string;
  agent_name: string;
  outcome: Outcome;
  summary: string;
  data: Record<string, unknown>;
}

/** BusEventInput is what a publisher gives; the rest is filled in. */
export type BusEventInput = Pick<BusEvent, 'type' | 'source'> & Partial<Omit<BusEvent, 'id' | 'timestamp' | 'type' | 'source'>>;

const DEFAULT_RETENTION = 100_000;

/**
 * EventBus is one Redis stream (its own hash tag, `{bus}`) that every family publishes to. Readers are consumer
 * groups (`reader`), each with its own position, so a slow or crashed reader delays only itself and resumes
 * where it stopped. The stream is capped at about `retention` entries.
 */
export class EventBus {
  readonly key: string;

  constructor(readonly redis: Redis, keys: Keys, private readonly retention = DEFAULT_RETENTION) {
    this.key = `${keys.prefix}{bus}:events`;
  }

  /** publish appends one event and returns it as stored. */
  async publish(input: BusEventInput): Promise<BusEvent> {
    const [ev] = await this.publishMany([input]);
    return ev;
  }

  /** publishMany appends events in order with one round trip. */
  async publishMany(inputs: BusEventInput[]): Promise<BusEvent[]> {
    const timestamp = new Date().toISOString();
    const events = inputs.map((i) => complete(i, timestamp));
    const pipe = this.redis.pipeline();
    for (const ev of events) pipe.xadd(this.key, 'MAXLEN', '~', this.retention, '*', 'e', JSON.stringify({ ...ev, id: undefined }));
    const res = (await pipe.exec()) ?? [];
    res.forEach(([err, id], i) => {
      if (err) throw err;
      events[i].id = String(id);
    });
    return events;
  }

  /** range returns up to `limit` events after the entry id `after` (exclusive; '' = from the oldest kept). */
  async range(after: string, limit: number): Promise<BusEvent[]> {
    const rows = (await this.redis.xrange(this.key, after ? `(${after}` : '-', '+', 'COUNT', limit)) as StreamEntry[];
    return rows.map(parseBusEntry);
  }

  /**
   * readAfter blocks up to `blockMs` for events after the entry id `after`, at most `count` of them, on a connection
   * the caller owns (XREAD BLOCK holds it; see duplicateConnection).
   */
  async readAfter(conn: Redis, after: string, blockMs: number, count = 500): Promise<BusEvent[]> {
    const res = (await conn.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', this.key, after)) as [string, StreamEntry[]][] | null;
    return res ? res[0][1].filter(([, fields]) => fields).map(parseBusEntry) : [];
  }

  /**
   * readTypesAfter is readAfter for a follower of a few types: it answers the events whose type `wants` accepts,
   * parsing no other, and `last`, the id to read after next (the newest entry read, wanted or not; `after` if none).
   */
  async readTypesAfter(conn: Redis, after: string, blockMs: number, wants: (type: string) => boolean, count = 500): Promise<{ last: string; events: BusEvent[] }> {
    const res = (await conn.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', this.key, after)) as [string, StreamEntry[]][] | null;
    const entries = res?.[0][1] ?? [];
    return { last: entries.at(-1)?.[0] ?? after, events: entries.filter((e) => e[1] && wants(busEntryType(e))).map(parseBusEntry) };
  }

  /**
   * position is where the stream stands, from one XINFO STREAM: `last`, the id of the newest event ever added (`0-0`
   * when none), and `resumableFrom`, the lowest id a reader may resume after without having lost events to the
   * retention cap. NOTE: Redis records the first kept entry, not the greatest dropped one, so a reader whose last
   * event was itself the last one dropped is told it lost events too (it lists again; nothing is missed).
   */
  async position(): Promise<{ last: string; resumableFrom: string }> {
    let info: unknown[];
    try {
      info = (await this.redis.xinfo('STREAM', this.key)) as unknown[];
    } catch (err) {
      // NOTE: no event was ever published (or the store was flushed): the stream key does not exist yet.
      if (/no such key/i.test((err as Error).message)) return { last: '0-0', resumableFrom: '0-0' };
      throw err;
    }
    const field = (name: string) => info[info.indexOf(name) + 1];
    const last = String(field('last-generated-id'));
    const length = Number(field('length'));
    if (Number(field('entries-added')) === length) return { last, resumableFrom: '0-0' };
    // NOTE: every entry dropped: only the newest id is a safe resume point.
    if (!length) return { last, resumableFrom: last };
    const first = String(field('recorded-first-entry-id'));
    const deleted = String(field('max-deleted-entry-id'));
    return { last, resumableFrom: compareBusIds(first, deleted) >= 0 ? first : deleted };
  }

  /** latest returns the newest `limit` events, oldest first. */
  async latest(limit: number): Promise<BusEvent[]> {
    const rows = (await this.redis.xrevrange(this.key, '+', '-', 'COUNT', limit)) as StreamEntry[];
    return rows.map(parseBusEntry).reverse();
  }

  /**
   * reader returns a consumer group reader (not started) that hands `handle` each page of events (with `types`,
   * only the events of those types); a page is acknowledged only once `handle` resolves (at least once: handlers
   * dedupe by event id).
   */
  reader(group: string, logger: Logger, handle: (events: BusEvent[]) => Promise<void>, types?: ReadonlySet<string>): StreamGroupReader {
    // NOTE: a reader of a few types (`types`) gets only those: the others are acknowledged without being parsed.
    const pick = types ? (entries: StreamEntry[]) => entries.filter((e) => types.has(busEntryType(e))) : (entries: StreamEntry[]) => entries;
    return new StreamGroupReader({ redis: this.redis, stream: this.key, group, logger, handle: (entries) => handle(pick(entries).map(parseBusEntry)) });
  }
}

/** complete fills an event in. NOTE: `type` is its first stored key (`id` is left out), which busEntryType relies on. */
function complete(i: BusEventInput, timestamp: string): BusEvent {
  return {
    id: '', type: i.type, timestamp, source: i.source,
    scope: i.scope ?? (i.workspace_id ? 'workspace' : 'global'), workspace_id: i.workspace_id ?? '',
    session_id: i.session_id ?? '', agent_name: i.agent_name ?? '', outcome: i.outcome ?? 'info', summary: i.summary ?? '', data: i.data ?? {},
  };
}

/** BUS_ID matches a bus event id (a Redis stream entry id, `<ms>-<n>`). */
export const BUS_ID = /^\d{1,20}-\d{1,20}$/;

/** compareBusIds orders two bus event ids as the stream does: negative, zero or positive. */
export function compareBusIds(a: string, b: string): number {
  const [am, an] = a.split('-').map(BigInt);
  const [bm, bn] = b.split('-').map(BigInt);
  return am !== bm ? (am < bm ? -1 : 1) : an === bn ? 0 : an < bn ? -1 : 1;
}

const TYPE_PREFIX = '{"type":"';

/**
 * busEntryType reads an entry's event type without parsing the whole event, so a reader that wants a few types
 * skips the rest cheaply: publishMany writes `type` first, and catalog names hold no quote or escape.
 */
export function busEntryType([, fields]: StreamEntry): string {
  const raw = fields[fields.indexOf('e') + 1];
  if (raw.startsWith(TYPE_PREFIX)) return raw.slice(TYPE_PREFIX.length, raw.indexOf('"', TYPE_PREFIX.length));
  return String((JSON.parse(raw) as { type?: unknown }).type ?? '');
}

/** parseBusEntry decodes one stream entry (field `e` holds the event's JSON). */
export function parseBusEntry([id, fields]: StreamEntry): BusEvent {
  const at = fields.indexOf('e');
  return { ...(JSON.parse(fields[at + 1]) as BusEvent), id };
}
