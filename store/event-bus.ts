import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Keys } from './keys.ts';
import { defineScripts } from './scripts.ts';
import { compareStreamIds, StreamGroupReader, type StreamEntry } from './stream-group.ts';
import { atTurnEnd } from './turn.ts';

/** Outcome ranks an event for notification filters. */
export type Outcome = 'info' | 'success' | 'warning' | 'failure';

/**
 * BusEvent is one event of the service's event bus: every family publishes here (sessions, resources,
 * automation, hooks, tools), and the hook dispatcher, the trigger engine, the notification router and the
 * console read it. `type` is a catalog name (`session.post_stop`, `resource.applied`, `automation.run.failed`);
 * publishers redact what they know to be secret, and the bus masks every value of the process's masking set in
 * every field as it appends (EventBus.maskWith).
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
/** A turn's append takes no more calls past this many events (one script call holds Redis for its whole run). */
const BATCH_MAX = 500;
/** Batch is the events of one turn's publishMany calls, with each call's share of them. */
interface Batch {
  json: string[];
  calls: { from: number; n: number; resolve(ids: string[]): void; reject(err: Error): void }[];
}
type BusScripts = { busAppend(key: string, retention: number, ...events: string[]): Promise<string[]> };

/** BusMask masks secret values in a JSON value (runtime/security/secret-mask.ts SecretMask). */
export interface BusMask {
  value<T>(v: T): T;
}

/**
 * EventBus is one Redis stream (its own hash tag, `{bus}`) that every family publishes to. Readers are consumer
 * groups (`reader`), each with its own position, so a slow or crashed reader delays only itself and resumes
 * where it stopped. The stream is capped at about `retention` entries.
 */
export class EventBus {
  readonly key: string;
  /** The events of this turn's publishMany calls, not yet sent (see publishMany). */
  private batch?: Batch;
  /** Gives the mask of the moment for each publishMany call (maskWith). */
  private mask?: () => Promise<BusMask>;

  constructor(readonly redis: Redis, keys: Keys, private readonly retention = DEFAULT_RETENTION) {
    this.key = `${keys.prefix}{bus}:events`;
    defineScripts();
  }

  /**
   * maskWith masks every string of every event appended from now on (object keys too) with the mask `current` gives
   * at the time of each publishMany call. NOTE: here, not per event type or per publisher, so an event a publisher
   * did not think of as carrying a secret (a hook's payload, a prompt's text) cannot carry one onto the bus.
   */
  maskWith(current: () => Promise<BusMask>): void {
    this.mask = current;
  }

  /** publish appends one event and returns it as stored. */
  async publish(input: BusEventInput): Promise<BusEvent> {
    const [ev] = await this.publishMany([input]);
    return ev;
  }

  /**
   * publishMany appends events in order, the events of one call adjacent on the stream. The calls of one event-loop
   * turn go to Redis together, as one script call (Redis runs it as one step): under load, every request and reply
   * handled in one turn publishes, and one round trip instead of one each is the bus's share of a task claim or a
   * firing. A failed append fails every call it carried.
   */
  async publishMany(inputs: BusEventInput[]): Promise<BusEvent[]> {
    if (!inputs.length) return [];
    const timestamp = new Date().toISOString();
    const mask = await this.mask?.();
    const events = inputs.map((i) => (mask ? mask.value(complete(i, timestamp)) : complete(i, timestamp)));
    const ids = await this.append(events.map((ev) => JSON.stringify({ ...ev, id: undefined })));
    ids.forEach((id, i) => { events[i].id = id; });
    return events;
  }

  /** append adds one call's events to this turn's batch and resolves to their entry ids. */
  private append(json: string[]): Promise<string[]> {
    if (!this.batch || this.batch.json.length + json.length > BATCH_MAX) {
      const next: Batch = (this.batch = { json: [], calls: [] });
      atTurnEnd(() => void this.flush(next));
    }
    const batch = this.batch;
    return new Promise((resolve, reject) => {
      batch.calls.push({ from: batch.json.length, n: json.length, resolve, reject });
      batch.json.push(...json);
    });
  }

  private async flush(b: Batch): Promise<void> {
    if (this.batch === b) this.batch = undefined;
    try {
      const ids = await (this.redis as Redis & BusScripts).busAppend(this.key, this.retention, ...b.json);
      for (const c of b.calls) c.resolve(ids.slice(c.from, c.from + c.n));
    } catch (err) {
      for (const c of b.calls) c.reject(err as Error);
    }
  }

  /** range returns up to `limit` events after the entry id `after` (exclusive; '' = from the oldest kept). */
  async range(after: string, limit: number): Promise<BusEvent[]> {
    const rows = (await this.redis.xrange(this.key, after ? `(${after}` : '-', '+', 'COUNT', limit)) as StreamEntry[];
    return rows.map(parseBusEntry);
  }

  /**
   * readAfter blocks up to `blockMs` for events after the entry id `after`, at most `count` of them, on a connection
   * the caller owns (XREAD BLOCK holds it; see duplicateConnection), and `last`, the id to read after next time. With
   * `wants`, only the events of those types are decoded and returned.
   */
  async readAfter(conn: Redis, after: string, blockMs: number, count = 500, wants?: TypeFilter): Promise<{ events: BusEvent[]; last: string }> {
    const res = (await conn.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', this.key, after)) as [string, StreamEntry[]][] | null;
    const entries = res?.[0][1] ?? [];
    return { events: parseWanted(entries, wants), last: entries.at(-1)?.[0] ?? after };
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
    return { last, resumableFrom: compareStreamIds(first, deleted) >= 0 ? first : deleted };
  }

  /** latest returns the newest `limit` events, oldest first. */
  async latest(limit: number): Promise<BusEvent[]> {
    const rows = (await this.redis.xrevrange(this.key, '+', '-', 'COUNT', limit)) as StreamEntry[];
    return rows.map(parseBusEntry).reverse();
  }

  /**
   * reader returns a consumer group reader (not started) that hands `handle` each page of events; a page is
   * acknowledged only once `handle` resolves (at least once: handlers dedupe by event id). With `wants`, asked once
   * per page (so it can read what the reader's interest depends on, e.g. its bindings, before the page is filtered),
   * `handle` gets only the events of the types it accepts (the others are acknowledged with their page, never
   * decoded), and is not called for a page without one. The reader gathers (a page that was not full is followed by
   * a short pause, GATHER_MS in stream-group.ts), so a busy bus costs each reader a read per pause, not per event.
   */
  reader(group: string, logger: Logger, handle: (events: BusEvent[]) => Promise<void>, wants?: () => TypeFilter | Promise<TypeFilter>): StreamGroupReader {
    return new StreamGroupReader({
      redis: this.redis, stream: this.key, group, logger, gather: true,
      handle: async (entries) => {
        const events = wants ? parseWanted(entries, await wants()) : entries.map(parseBusEntry);
        // NOTE: the page is the reader's own array; its text is not held while `handle` awaits (see StreamGroupReader).
        entries.length = 0;
        if (events.length) await handle(events);
      },
    });
  }
}

function complete(i: BusEventInput, timestamp: string): BusEvent {
  return {
    id: '', type: i.type, timestamp, source: i.source,
    scope: i.scope ?? (i.workspace_id ? 'workspace' : 'global'), workspace_id: i.workspace_id ?? '',
    session_id: i.session_id ?? '', agent_name: i.agent_name ?? '', outcome: i.outcome ?? 'info', summary: i.summary ?? '', data: i.data ?? {},
  };
}

/** BUS_ID matches a bus event id (a Redis stream entry id, `<ms>-<n>`). */
export const BUS_ID = /^\d{1,20}-\d{1,20}$/;

/** TypeFilter says whether a reader wants the events of one type. */
export type TypeFilter = (type: string) => boolean;

const TYPE_HEAD = '{"type":"';

/**
 * busEntryType reads an entry's event type without decoding the rest. NOTE: publishMany is the only writer of the
 * stream, and its JSON starts with the type (catalog names never hold a quote or a backslash); an entry that does not
 * is decoded instead. Every process runs several readers of each event (hooks, triggers, notifications, heartbeats,
 * turn and memory followers), most of which want a few types: decoding only those cuts a JSON.parse per reader.
 */
export function busEntryType([, fields]: StreamEntry): string {
  const json = fields[fields.indexOf('e') + 1] ?? '';
  if (json.startsWith(TYPE_HEAD)) {
    const end = json.indexOf('"', TYPE_HEAD.length);
    const type = json.slice(TYPE_HEAD.length, end);
    if (end > 0 && !type.includes('\\')) return type;
  }
  return (JSON.parse(json) as BusEvent).type;
}

function parseWanted(entries: StreamEntry[], wants: TypeFilter | undefined): BusEvent[] {
  const out: BusEvent[] = [];
  for (const e of entries) if (e[1] && (!wants || wants(busEntryType(e)))) out.push(parseBusEntry(e));
  return out;
}

/** parseBusEntry decodes one stream entry (field `e` holds the event's JSON). */
export function parseBusEntry([id, fields]: StreamEntry): BusEvent {
  const at = fields.indexOf('e');
  return { ...(JSON.parse(fields[at + 1]) as BusEvent), id };
}
