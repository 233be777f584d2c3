import { duplicateConnection } from '../../store/connections.ts';
import type { BusEvent, EventBus } from '../../store/event-bus.ts';
import { compareStreamIds } from '../../store/stream-group.ts';
import { eventMatches } from '../automation/triggers.ts';

/** BusStreamFilter narrows a bus stream: the event types to send (patterns; none = every type) and one workspace. */
export interface BusStreamFilter {
  /** Exact types (`task.created`) or prefix patterns (`task.*`), as trigger events are; any one matching sends it. */
  types: string[];
  /** Only events of this workspace (global events have none, so they are left out too). */
  workspaceId?: string;
}

/** BusFrame is one frame of a bus stream: an event (`id` its bus id, `event` its type), or `expired`. */
export interface BusFrame {
  id: string;
  event: string;
  data: unknown;
}

const NAME = '[a-z][a-z0-9_]*(?:\\.[a-z0-9_]+)*';
const TYPE_PATTERN = new RegExp(`^${NAME}(?:\\.\\*)?$`);

/**
 * typePatternProblem says why a stream's type pattern is refused, or undefined when it is valid: an event type
 * (lower-case dotted words) or such a prefix followed by `.*`.
 */
export function typePatternProblem(pattern: string): string | undefined {
  return TYPE_PATTERN.test(pattern) ? undefined : 'must be an event type (task.created) or a prefix pattern ending in ".*" (task.*)';
}

/** matchesBusFilter reports whether a stream with this filter sends the event. */
export function matchesBusFilter(f: BusStreamFilter, ev: BusEvent): boolean {
  if (f.workspaceId !== undefined && ev.workspace_id !== f.workspaceId) return false;
  return !f.types.length || f.types.some((p) => eventMatches(p, ev.type));
}

/** EVENT_STREAM_CONNECTION is the Redis client name of each open bus stream's connection (CLIENT LIST). */
export const EVENT_STREAM_CONNECTION = 'svc-event-stream';

/** How long one XREAD blocks before it looks at the abort signal again (an abort also ends it at once). */
const BLOCK_MS = 10_000;

/**
 * busFrames follows the event bus for one client: the matching events after `after` (a bus id; undefined = from
 * now), one frame each, then the live ones, until `signal` aborts. The start is read before this resolves, so an
 * event published once the stream has opened is always sent. When `after` is no longer (or never was) on the bus,
 * because the retention cap trimmed what followed it or the id is ahead of the bus, the first frame is `expired`:
 * its id is the bus's newest and the stream goes on from there, so the client lists again and misses nothing after.
 */
export async function busFrames(bus: EventBus, filter: BusStreamFilter, after: string | undefined, signal: AbortSignal): Promise<AsyncIterable<BusFrame>> {
  const pos = await bus.position();
  const lost = after !== undefined && (compareStreamIds(after, pos.resumableFrom) < 0 || compareStreamIds(after, pos.last) > 0);
  const expired: BusFrame | undefined = lost
    ? { id: pos.last, event: 'expired', data: { type: 'expired', last_event_id: after, resumed_after: pos.last, message: 'the event bus no longer holds the events after this id; list again' } }
    : undefined;
  return tail(bus, filter, lost || after === undefined ? pos.last : after, expired, signal);
}

async function* tail(bus: EventBus, filter: BusStreamFilter, from: string, first: BusFrame | undefined, signal: AbortSignal): AsyncGenerator<BusFrame> {
  if (first) yield first;
  // NOTE: its own connection, because XREAD BLOCK holds it; an abort disconnects it to end the read at once.
  const conn = duplicateConnection(bus.redis, EVENT_STREAM_CONNECTION);
  const stop = () => conn.disconnect();
  signal.addEventListener('abort', stop);
  let last = from;
  try {
    while (!signal.aborted) {
      const page = await bus.readAfter(conn, last, BLOCK_MS, 500, filter.types.length ? (t) => filter.types.some((p) => eventMatches(p, t)) : undefined);
      for (const ev of page.events) if (matchesBusFilter(filter, ev)) yield { id: ev.id, event: ev.type, data: ev };
      last = page.last;
    }
  } catch (err) {
    if (!signal.aborted) throw err;
  } finally {
    signal.removeEventListener('abort', stop);
    conn.disconnect();
  }
}
