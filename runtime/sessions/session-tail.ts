import type { Redis } from 'ioredis';
import type { SessionEvent, SessionStore } from '../../store/session-store.ts';
import { duplicateConnection } from '../../store/connections.ts';

type Deliver = (events: SessionEvent[]) => void;

interface Listener { last: number; deliver: Deliver; busy: boolean; again: boolean }

/** Tail is one blocking reader of one session's event stream, shared by every local subscriber. */
interface Tail { conn: Redis; last: number; listeners: Set<Listener>; batch: SessionEvent[]; running: boolean; idle?: NodeJS.Timeout }

/** How long a tail with no subscribers stays open, so the next prompt of a session reuses its connection. */
const IDLE_MS = 30_000;

/**
 * SessionTailHub fans a session's new events out to every subscriber in this API process: one blocking
 * XREAD per session (not one Redis connection per stream), after which each subscriber takes the events
 * after its own cursor (from the batch just read, or with a range read if it is behind), so every
 * subscriber sees each event once, in order, with no gap, whatever replica wrote it.
 */
export class SessionTailHub {
  private readonly tails = new Map<string, Tail>();

  constructor(private readonly sessions: SessionStore, private readonly redis: Redis) {}

  /** subscribe delivers the session's events after `after`, backlog first; the returned function unsubscribes. */
  subscribe(sessionId: string, after: number, deliver: Deliver): () => void {
    let tail = this.tails.get(sessionId);
    if (!tail) {
      tail = { conn: duplicateConnection(this.redis), last: -1, listeners: new Set(), batch: [], running: true };
      this.tails.set(sessionId, tail);
      void this.run(sessionId, tail);
    }
    clearTimeout(tail.idle);
    const listener: Listener = { last: after, deliver, busy: false, again: false };
    tail.listeners.add(listener);
    void this.catchUp(sessionId, tail, listener);
    const t = tail;
    return () => {
      t.listeners.delete(listener);
      if (t.listeners.size > 0 || this.tails.get(sessionId) !== t) return;
      clearTimeout(t.idle);
      t.idle = setTimeout(() => {
        if (t.listeners.size > 0) return;
        t.running = false;
        t.conn.disconnect();
        this.tails.delete(sessionId);
      }, IDLE_MS);
      t.idle.unref();
    };
  }

  private async run(sessionId: string, tail: Tail): Promise<void> {
    tail.last = await this.sessions.lastSequence(sessionId);
    while (tail.running) {
      try {
        const events = await this.sessions.readAfter(tail.conn, sessionId, tail.last, 5000);
        if (!events.length) continue;
        tail.batch = events;
        tail.last = events.at(-1)!.sequence;
        for (const l of tail.listeners) void this.catchUp(sessionId, tail, l);
      } catch {
        if (tail.running) await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** catchUp delivers what a listener has not seen: from the last batch when it can, else by a range read. */
  private async catchUp(sessionId: string, tail: Tail, l: Listener): Promise<void> {
    if (l.busy) { l.again = true; return; }
    l.busy = true;
    try {
      do {
        l.again = false;
        const first = tail.batch[0]?.sequence ?? Infinity;
        const events = l.last >= first - 1 ? tail.batch.filter((e) => e.sequence > l.last) : await this.sessions.events(sessionId, { afterSequence: l.last });
        if (events.length) {
          l.last = events.at(-1)!.sequence;
          l.deliver(events);
        }
      } while (l.again);
    } finally {
      l.busy = false;
    }
  }

  /** close stops every tail. */
  close(): void {
    for (const t of this.tails.values()) { clearTimeout(t.idle); t.running = false; t.conn.disconnect(); }
    this.tails.clear();
  }
}
