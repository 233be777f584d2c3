import os from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { parseChange, type ResourceStore } from '../store/resource-store.ts';
import type { ReconcileQueues } from './queues.ts';
import type { ResourceKey } from './types.ts';
import { duplicateConnection } from '../store/connections.ts';

const GROUP = 'relay';
/** A pending entry idle this long belongs to a dead relay; live relays look for such entries this often. */
const CLAIM_IDLE_MS = 10_000;
const CLAIM_EVERY_MS = 2_000;

/** ChangeRelayOptions configures a ChangeRelay. */
export interface ChangeRelayOptions {
  store: ResourceStore;
  queues: ReconcileQueues;
  logger: Logger;
  /** Kinds that own children: a deleted child also enqueues its owner, so the child reappears promptly. */
  ownerKinds: readonly string[];
}

/**
 * ChangeRelay turns change-log entries into reconcile jobs. It reads the log through a consumer group and
 * acknowledges an entry only after its jobs are enqueued, so a crash between a write and its enqueue loses
 * nothing: the entry stays pending and is claimed again (by this or another replica).
 */
export class ChangeRelay {
  private conn?: Redis;
  private running = false;
  private loop?: Promise<void>;
  private readonly consumer = `${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;

  constructor(private readonly o: ChangeRelayOptions) {}

  async start(): Promise<void> {
    const { store } = this.o;
    // NOTE: a dedicated connection, because XREADGROUP BLOCK holds it; stop() disconnects it to unblock.
    this.conn = duplicateConnection(store.redis);
    try {
      // NOTE: a new group starts at the log's end: everything written before it exists is enqueued by the
      // start-up resync that follows (ControllerManager.start), so replaying the whole log would do it twice.
      await this.conn.xgroup('CREATE', store.keys.changes, GROUP, '$', 'MKSTREAM');
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
    const { store, logger } = this.o;
    const conn = this.conn!;
    let backoff = 100;
    let claimedAt = 0;
    while (this.running) {
      try {
        // Entries a dead relay took but never acknowledged (idle over CLAIM_IDLE_MS) are claimed now and then,
        // not on every read: the check costs a round trip on the path from a write to its reconcile.
        if (Date.now() - claimedAt >= CLAIM_EVERY_MS) {
          const [, claimed] = (await conn.xautoclaim(store.keys.changes, GROUP, this.consumer, CLAIM_IDLE_MS, '0-0', 'COUNT', 500)) as [string, [string, string[]][]];
          if (claimed.length) await this.relay(claimed);
          // NOTE: a full page means more may be waiting: look again at once.
          claimedAt = claimed.length === 500 ? 0 : Date.now();
        }
        const res = (await conn.xreadgroup('GROUP', GROUP, this.consumer, 'COUNT', 500, 'BLOCK', 2000, 'STREAMS', store.keys.changes, '>')) as [string, [string, string[]][]][] | null;
        if (res) await this.relay(res[0][1]);
        backoff = 100;
      } catch (err) {
        if (!this.running) return;
        logger.error({ err }, 'relay failed; retrying');
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  private async relay(entries: [string, string[]][]): Promise<void> {
    const keys: ResourceKey[] = [];
    for (const [id, fields] of entries) {
      if (!fields) continue; // trimmed away while pending
      const f: Record<string, string> = {};
      for (let i = 0; i < fields.length; i += 2) f[fields[i]] = fields[i + 1];
      keys.push({ kind: f.kind, id: f.id });
      // NOTE: only a deletion needs the record (to wake its owner); puts skip parsing it.
      if (f.type !== 'delete') continue;
      const owner = parseChange(id, fields).record.owner;
      if (this.o.ownerKinds.includes(owner.kind)) keys.push({ kind: owner.kind, id: owner.id });
    }
    await this.o.queues.enqueueMany(keys);
    await this.conn!.xack(this.o.store.keys.changes, GROUP, ...entries.map(([id]) => id));
  }
}
