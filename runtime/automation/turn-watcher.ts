import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { duplicateConnection } from '../../store/connections.ts';
import type { BusEvent, EventBus } from '../../store/event-bus.ts';
import type { SessionStore } from '../../store/session-store.ts';
import { gather } from '../../store/stream-group.ts';

/** TurnOutcome is how a prompted turn ended: done, an error, or the session stopped under it. */
export type TurnOutcome = { ok: true } | { ok: false; error: string };

interface Waiter {
  turnId: string;
  resolve(o: TurnOutcome): void;
}

/** A waiter also looks at the session's own log this often, in case the bus tail missed its event (a reconnect). */
const POLL_MS = 5_000;
/**
 * While no turn is awaited the tail only keeps its place on the bus, so after a page it pauses this long instead of
 * GATHER_MS (a busy bus otherwise woke it, and its connection, for every few events); a new waiter ends the pause.
 */
const IDLE_MS = 250;

/**
 * TurnWatcher tells the run executor when a prompted turn ends. One tail of the event bus (XREAD on its own
 * connection, from the end) serves every waiting run: `turn.end` of the turn resolves it, `session.post_stop` of
 * its session fails it. A waiter first looks at the session's log itself (the turn may have ended before it
 * registered: a retried run after a crash), and again every POLL_MS. NOTE: a waiter registered before its prompt
 * is sent (`beforePrompt`) skips that first look: the turn's end is appended after the prompt, so the tail sees it;
 * the poll still covers an end the bus never got (a publish that failed).
 */
export class TurnWatcher {
  private conn?: Redis;
  private running = false;
  private loop?: Promise<void>;
  private readonly waiters = new Map<string, Set<Waiter>>();
  /** Ends the tail's idle pause (see IDLE_MS), while it pauses. */
  private wake?: () => void;

  constructor(private readonly o: { bus: EventBus; sessions: SessionStore; logger: Logger }) {}

  async start(): Promise<void> {
    this.conn = duplicateConnection(this.o.bus.redis);
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    this.conn?.disconnect();
    await this.loop;
    for (const set of this.waiters.values()) for (const w of set) w.resolve({ ok: false, error: 'automation executor stopped' });
    this.waiters.clear();
  }

  /**
   * wait resolves when the turn `turnId` of `sessionId` ends (or the session stops first). With `beforePrompt`, the
   * caller registers before it sends the turn's prompt, and calls `cancel` if it could not send it.
   */
  wait(sessionId: string, turnId: string, beforePrompt = false): Promise<TurnOutcome> {
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const w: Waiter = {
        turnId,
        resolve: (o) => {
          clearTimeout(timer);
          const set = this.waiters.get(sessionId);
          set?.delete(w);
          if (set && !set.size) this.waiters.delete(sessionId);
          resolve(o);
        },
      };
      if (!this.waiters.has(sessionId)) this.waiters.set(sessionId, new Set());
      this.waiters.get(sessionId)!.add(w);
      // NOTE: the tail's place is still before this turn's end (the prompt is not sent yet, or the log look covers it).
      this.wake?.();
      const look = async () => {
        try {
          const o = await this.fromLog(sessionId, turnId);
          if (o) return w.resolve(o);
        } catch (err) {
          this.o.logger.warn({ err: (err as Error).message, session_id: sessionId }, 'automation: reading a session log failed');
        }
        if (this.running) timer = setTimeout(look, POLL_MS);
      };
      if (beforePrompt) timer = setTimeout(look, POLL_MS);
      else void look();
    });
  }

  /** cancel ends the waits for a turn whose prompt was not sent (they resolve as failed with `error`). */
  cancel(sessionId: string, turnId: string, error: string): void {
    for (const w of [...(this.waiters.get(sessionId) ?? [])]) if (w.turnId === turnId) w.resolve({ ok: false, error });
  }

  /** fromLog reads the session's log for the turn's end: a `done` or `error` row, or the session stopped. */
  private async fromLog(sessionId: string, turnId: string): Promise<TurnOutcome | undefined> {
    const rows = await this.o.sessions.events(sessionId, { turn_id: turnId });
    const end = rows.find((r) => r.type === 'done' || r.type === 'error');
    if (end) return end.type === 'done' ? { ok: true } : { ok: false, error: String(end.content.error ?? 'turn failed') };
    const s = await this.o.sessions.get(sessionId);
    if (!s) return { ok: false, error: 'session deleted' };
    if (s.state === 'stopped') return { ok: false, error: `session stopped (${String(s.stop_reason ?? '')}) before the turn ended` };
    return undefined;
  }

  private async run(): Promise<void> {
    let last = '$';
    let backoff = 100;
    while (this.running) {
      try {
        // NOTE: only these two types matter here, and only while a turn is awaited; the rest of the bus is not decoded.
        const page = await this.o.bus.readAfter(this.conn!, last, 2000, 1000, (t) => this.waiters.size > 0 && (t === 'turn.end' || t === 'session.post_stop'));
        backoff = 100;
        if (page.last === last) continue;
        last = page.last;
        this.resolve(page.events);
        await this.pause();
      } catch (err) {
        if (!this.running) return;
        this.o.logger.error({ err }, 'automation: bus tail failed; retrying');
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  /** pause waits between pages: GATHER_MS while a turn is awaited, else IDLE_MS or until a waiter comes. */
  private pause(): Promise<void> {
    if (this.waiters.size) return gather();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, IDLE_MS);
      this.wake = done;
    });
  }

  /** resolve settles the waiters whose turn ended (or whose session stopped) in a page of the bus. */
  private resolve(events: BusEvent[]): void {
    for (const ev of events) {
      const set = ev.session_id ? this.waiters.get(ev.session_id) : undefined;
      if (!set) continue;
      for (const w of [...set]) {
        if (ev.type === 'turn.end' && ev.data.turn_id === w.turnId) {
          w.resolve(ev.outcome === 'failure' ? { ok: false, error: String(ev.data.error ?? 'turn failed') } : { ok: true });
        } else if (ev.type === 'session.post_stop') {
          w.resolve({ ok: false, error: `session stopped (${String(ev.data.stop_reason ?? '')}) before the turn ended` });
        }
      }
    }
  }
}
