import os from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { duplicateConnection } from './connections.ts';

/** StreamEntry is one Redis stream entry: its id and its flat field list. */
export type StreamEntry = [id: string, fields: string[]];

/** A pending entry idle this long belongs to a dead reader; live readers look for such entries this often. */
const CLAIM_IDLE_MS = 10_000;
const CLAIM_EVERY_MS = 2_000;
const PAGE = 500;

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

  constructor(private readonly o: StreamGroupReaderOptions) {}

  /** start creates the group at the stream's end if it does not exist (a new reader does not replay history). */
  async start(): Promise<void> {
    // NOTE: a dedicated connection, because XREADGROUP BLOCK holds it; stop() disconnects it to unblock.
    this.conn = duplicateConnection(this.o.redis);
    try {
      await this.conn.xgroup('CREATE', this.o.stream, this.o.group, '$', 'MKSTREAM');
    } catch (err) {
      if (!String(err).includes('BUSYGROUP')) throw err;
    }
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.conn?.disconnect();
    await this.loop;
  }

  private async run(): Promise<void> {
    const { stream, group, logger } = this.o;
    const conn = this.conn!;
    let backoff = 100;
    let claimedAt = 0;
    while (this.running) {
      try {
        // Entries a dead reader took but never acknowledged are claimed now and then, not on every read: the
        // check costs a round trip on the path from an entry to its effect.
        if (Date.now() - claimedAt >= CLAIM_EVERY_MS) {
          const [, claimed] = (await conn.xautoclaim(stream, group, this.consumer, CLAIM_IDLE_MS, '0-0', 'COUNT', PAGE)) as [string, StreamEntry[]];
          if (claimed.length) await this.handle(claimed);
          // NOTE: a full page means more may be waiting: look again at once.
          claimedAt = claimed.length === PAGE ? 0 : Date.now();
        }
        const res = (await conn.xreadgroup('GROUP', group, this.consumer, 'COUNT', PAGE, 'BLOCK', 2000, 'STREAMS', stream, '>')) as [string, StreamEntry[]][] | null;
        const got = res?.[0][1].length ?? 0;
        if (res) await this.handle(res[0][1]);
        backoff = 100;
        if (this.o.gather && got && got < PAGE) await gather();
      } catch (err) {
        if (!this.running) return;
        logger.error({ err, stream, group }, 'stream reader failed; retrying');
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  private async handle(entries: StreamEntry[]): Promise<void> {
    const ids = entries.map(([id]) => id);
    // NOTE: an entry trimmed away while pending comes back with null fields; it is acknowledged unhandled.
    const live = entries.filter(([, fields]) => fields);
    // NOTE: emptied so the page's text is not held while its handler awaits (a page is up to PAGE entries, and
    // every reader of the bus reads every entry): what outlives a young-generation collection is copied by it.
    entries.length = 0;
    if (live.length) await this.o.handle(live);
    await this.conn!.xack(this.o.stream, this.o.group, ...ids);
  }
}
