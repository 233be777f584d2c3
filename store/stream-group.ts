import os from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { coalesceTurns, duplicateConnection, onDisconnect, onReconnect } from './connections.ts';

/** StreamEntry is one Redis stream entry: its id and its flat field list. */
export type StreamEntry = [id: string, fields: string[]];

/** A pending entry idle this long belongs to a dead reader; live readers look for such entries this often. */
const CLAIM_IDLE_MS = 10_000;
const CLAIM_EVERY_MS = 2_000;
const PAGE = 500;
/**
 * The pages a reader handled this long before its Redis connection dropped are handled again once it is back: their
 * effects may have been written to a master that died before replicating them (or to a Redis that restarted without
 * its AOF's last second), while their acknowledgement reached the master that took over. Far above a replica's lag.
 */
const REPLAY_MS = 5_000;

/**
 * A reader that gathers (the event bus's readers) and got less than a full page waits this long before it reads
 * again, so the entries written meanwhile arrive as one page: at hundreds of entries a second, each reader makes
 * one read (and one acknowledgement) per GATHER_MS instead of one per entry. The first entry after a quiet spell is
 * read at once. NOTE: the change relay does not gather: a `?wait=true` write waits for it, and one client's
 * sequential writes would each wait out the pause after the previous one.
 */
const GATHER_MS = 10;
export const gather = (): Promise<void> => new Promise((r) => setTimeout(r, GATHER_MS));

/** StreamGroupReaderOptions configures a StreamGroupReader. */
export interface StreamGroupReaderOptions {
  redis: Redis;
  stream: string;
  group: string;
  logger: Logger;
  /** handle acts on a page of entries; the page is acknowledged only after it resolves. */
  handle(entries: StreamEntry[]): Promise<void>;
  /** gather pauses after a page that was not full (see GATHER_MS). */
  gather?: boolean;
  /** replayMs overrides REPLAY_MS (a test's shorter window). */
  replayMs?: number;
}

/**
 * StreamGroupReader reads a Redis stream through a consumer group, one page at a time, and acknowledges a page
 * only after `handle` resolved, so a crash in between loses nothing: the entries stay pending and are claimed
 * again (by this or another replica) once idle for CLAIM_IDLE_MS. Delivery is at least once; handlers make
 * their effects idempotent (BullMQ job ids, dedup keys). The change relay, the hook dispatcher, the trigger
 * engine and the notification router all read this way.
 */
export class StreamGroupReader {
  private conn?: Redis;
  private running = false;
  private loop?: Promise<void>;
  private readonly consumer = `${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  /** The entry ids of the pages handled lately, with when each began (see REPLAY_MS). */
  private recent: { at: number; ids: string[] }[] = [];
  /** The ids to handle again: those of the pages handled just before the connection dropped, until it is back. */
  private lost: string[] = [];
  private replay: string[] = [];
  /** The ids of the pages handled since the last read: acknowledged in the same write as the next read. */
  private unacked: string[] = [];
  private unwatch: (() => void)[] = [];

  constructor(private readonly o: StreamGroupReaderOptions) {}

  /** start creates the group at the stream's end if it does not exist (a new reader does not replay history). */
  async start(): Promise<void> {
    // NOTE: a dedicated connection, because XREADGROUP BLOCK holds it; stop() disconnects it to unblock.
    this.conn = duplicateConnection(this.o.redis);
    // NOTE: a page's acknowledgement and the next read are sent in one turn, so they leave in one write (withAcks).
    coalesceTurns(this.conn);
    await this.createGroup(this.conn, '$');
    this.running = true;
    // NOTE: the handlers write through the command connection (this.o.redis), so its drop is what can lose their effects.
    this.unwatch = [
      onDisconnect(this.o.redis, () => {
        const since = Date.now() - (this.o.replayMs ?? REPLAY_MS);
        this.lost.push(...this.recent.filter((p) => p.at >= since).flatMap((p) => p.ids));
        this.recent = [];
      }),
      onReconnect(this.o.redis, () => {
        this.replay.push(...this.lost);
        this.lost = [];
      }),
    ];
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    for (const u of this.unwatch) u();
    this.conn?.disconnect();
    await this.loop;
    // NOTE: what was handled last is acknowledged now, so the next reader does not handle it again.
    if (this.unacked.length) await this.o.redis.xack(this.o.stream, this.o.group, ...this.unacked).catch(() => undefined);
    this.unacked = [];
  }

  /** createGroup makes the group at `from` (an entry id, `$`: the end), and the stream if missing; one that exists is kept. */
  private async createGroup(conn: Redis, from: string): Promise<void> {
    try {
      await conn.xgroup('CREATE', this.o.stream, this.o.group, from, 'MKSTREAM');
    } catch (err) {
      if (!String(err).includes('BUSYGROUP')) throw err;
    }
  }

  private async run(): Promise<void> {
    const { stream, group, logger } = this.o;
    const conn = this.conn!;
    let backoff = 100;
    let claimedAt = 0;
    while (this.running) {
      try {
        if (this.replay.length) await this.handleAgain();
        // Entries a dead reader took but never acknowledged are claimed now and then, not on every read: the
        // check costs a round trip on the path from an entry to its effect.
        if (Date.now() - claimedAt >= CLAIM_EVERY_MS) {
          const [, claimed] = (await this.withAcks(conn, () => conn.xautoclaim(stream, group, this.consumer, CLAIM_IDLE_MS, '0-0', 'COUNT', PAGE))) as [string, StreamEntry[]];
          if (claimed.length) await this.handle(claimed);
          // NOTE: a full page means more may be waiting: look again at once.
          claimedAt = claimed.length === PAGE ? 0 : Date.now();
        }
        const res = (await this.withAcks(conn, () => conn.xreadgroup('GROUP', group, this.consumer, 'COUNT', PAGE, 'BLOCK', 2000, 'STREAMS', stream, '>'))) as [string, StreamEntry[]][] | null;
        const got = res?.[0][1].length ?? 0;
        if (res) await this.handle(res[0][1]);
        backoff = 100;
        if (this.o.gather && got && got < PAGE) await gather();
      } catch (err) {
        if (!this.running) return;
        // NOTE: the group is gone with the stream when Redis lost its data (a restart without persistence, a flush):
        // every entry the stream holds now came after the loss, so the group is made again at its start. Without
        // it the reader failed for ever, and no change was reconciled (a ?wait=true write answered pending).
        if (String(err).includes('NOGROUP')) {
          const made = await this.createGroup(conn, '0').then(() => true, () => false);
          if (made) {
            logger.warn({ stream, group }, 'stream reader group was gone; made again at the start of the stream');
            continue;
          }
        }
        logger.error({ err, stream, group }, 'stream reader failed; retrying');
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  /**
   * handleAgain hands the handler, once more, the entries of the pages handled just before the connection dropped
   * (at least once: the handlers' effects are idempotent, as for a page claimed from a dead reader). They were
   * acknowledged already, or are still pending and will be claimed; an entry trimmed since is skipped.
   */
  private async handleAgain(): Promise<void> {
    const ids = [...new Set(this.replay)].sort(compareStreamIds);
    const wanted = new Set(ids);
    this.o.logger.warn({ stream: this.o.stream, group: this.o.group, entries: ids.length }, 'handling again the entries read just before Redis dropped the connection');
    // NOTE: a page at a time over the range they span, which may hold other readers' entries too.
    for (let from = ids[0]; ;) {
      const rows = (await this.conn!.xrange(this.o.stream, from, ids.at(-1)!, 'COUNT', PAGE)) as StreamEntry[];
      const again = rows.filter(([id]) => wanted.has(id));
      if (again.length) await this.o.handle(again);
      if (rows.length < PAGE) break;
      from = `(${rows.at(-1)![0]}`;
    }
    this.replay = [];
  }

  private async handle(entries: StreamEntry[]): Promise<void> {
    const ids = entries.map(([id]) => id);
    const now = Date.now();
    const horizon = now - (this.o.replayMs ?? REPLAY_MS);
    while (this.recent.length && this.recent[0].at < horizon) this.recent.shift();
    this.recent.push({ at: now, ids });
    // NOTE: an entry trimmed away while pending comes back with null fields; it is acknowledged unhandled.
    const live = entries.filter(([, fields]) => fields);
    // NOTE: emptied so the page's text is not held while its handler awaits (a page is up to PAGE entries, and
    // every reader of the bus reads every entry): what outlives a young-generation collection is copied by it.
    entries.length = 0;
    if (live.length) await this.o.handle(live);
    this.unacked.push(...ids);
  }

  /**
   * withAcks sends the acknowledgement of the pages handled since the last read just before the next read, in the
   * same turn and so in the same write (coalesceTurns): a reader that acknowledged each page on its own paid a write
   * and a read of its socket per page (with one agent claiming alone, 2–3 of the 10–15 writes per pair). NOTE: not
   * awaited: a lost acknowledgement leaves its entries pending, and they are claimed and handled again (at least once).
   */
  private withAcks<T>(conn: Redis, read: () => Promise<T>): Promise<T> {
    if (this.unacked.length) conn.xack(this.o.stream, this.o.group, ...this.unacked).catch(() => undefined);
    this.unacked = [];
    return read();
  }
}

/** compareStreamIds orders two stream entry ids (`<ms>-<seq>`) as the stream does: negative, zero or positive. */
export function compareStreamIds(a: string, b: string): number {
  const [am, an] = a.split('-').map(BigInt);
  const [bm, bn] = b.split('-').map(BigInt);
  return am !== bm ? (am < bm ? -1 : 1) : an === bn ? 0 : an < bn ? -1 : 1;
}
