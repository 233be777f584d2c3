import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import type { ScriptCommands } from './scripts.ts';

/** StoredLedger is a ledger as Redis holds it: its bytes, the checksum computed when it was written, and its index fields. */
export interface StoredLedger {
  session_id: string;
  workspace_id: string;
  jsonl: string;
  checksum: string;
  stopped_at: string;
  events: number;
  written_at: string;
}

/** LedgerTombstone is what stays of a pruned ledger: enough to refuse writing it again. */
export interface LedgerTombstone {
  session_id: string;
  workspace_id: string;
  checksum: string;
  stopped_at: string;
  pruned_at: string;
}

/** PutLedgerOutcome is what a write did (store/scripts/put-ledger-1.lua). */
export type PutLedgerOutcome = 'written' | 'unchanged' | 'conflict' | 'pruned';

const PUT_OUTCOMES: Record<number, PutLedgerOutcome> = { 1: 'written', 0: 'unchanged', [-1]: 'conflict', [-2]: 'pruned' };

/** LedgerScripts types the ledger scripts `defineScripts` adds. */
interface LedgerScripts {
  putLedger(key: string, jsonl: string, checksum: string, sessionId: string, workspaceId: string, stoppedAt: string, events: number, writtenAt: string): Promise<number>;
  pruneLedger(key: string, prunedAt: string): Promise<number>;
}

/**
 * LedgerStore keeps session ledgers in Redis: each ledger is a hash
 * under its session's own tag, `{s:<session id>}`, so the write-once script touches one slot and ledgers spread over
 * a cluster. The index of ledgers by stop time (prune and repair read it) and the list of tombstones share the tag
 * `{ledgers}`: one ZADD per stopped session and one ZREM per prune land on that one slot, which bounds ledger writes
 * to what one Redis shard takes in sorted-set updates (far above session stop rates).
 * NOTE: the index is written after the ledger, not in its script (another slot); a ledger missing from the index
 * (a crash between the two) is put back by repair, which walks every session.
 */
export class LedgerStore {
  private readonly index: string;
  private readonly tombstones: string;

  constructor(private readonly redis: Redis & ScriptCommands, private readonly keys: Keys) {
    this.index = `${keys.prefix}{ledgers}:index`;
    this.tombstones = `${keys.prefix}{ledgers}:pruned`;
  }

  private get scripts(): LedgerScripts {
    return this.redis as unknown as LedgerScripts;
  }

  /** key is where a session's ledger (or its tombstone) lives. */
  key(sessionId: string) { return `${this.keys.prefix}{s:${sessionId}}:ledger`; }

  /** put writes a ledger once and indexes it; the same bytes again are `unchanged`, other bytes a `conflict`. */
  async put(l: Omit<StoredLedger, 'written_at'>, writtenAt = new Date().toISOString()): Promise<PutLedgerOutcome> {
    const code = await this.scripts.putLedger(this.key(l.session_id), l.jsonl, l.checksum, l.session_id, l.workspace_id, l.stopped_at, l.events, writtenAt);
    const outcome = PUT_OUTCOMES[code];
    if (outcome === 'written' || outcome === 'unchanged') await this.redis.zadd(this.index, stopScore(l.stopped_at), l.session_id);
    return outcome;
  }

  /** get returns a session's ledger, its tombstone when it was pruned, or undefined when it has none. */
  async get(sessionId: string): Promise<{ ledger?: StoredLedger; tombstone?: LedgerTombstone } | undefined> {
    const h = await this.redis.hgetall(this.key(sessionId));
    if (!h.checksum) return undefined;
    if (h.pruned_at) return { tombstone: { session_id: h.session_id, workspace_id: h.workspace_id, checksum: h.checksum, stopped_at: h.stopped_at, pruned_at: h.pruned_at } };
    return { ledger: { session_id: h.session_id, workspace_id: h.workspace_id, jsonl: h.jsonl ?? '', checksum: h.checksum, stopped_at: h.stopped_at, events: Number(h.events ?? 0), written_at: h.written_at ?? '' } };
  }

  /** exists reports whether a session has a ledger or a tombstone (without reading its bytes). */
  async exists(sessionId: string): Promise<boolean> {
    return (await this.redis.exists(this.key(sessionId))) === 1;
  }

  /** indexed reports which of these sessions the index lists. */
  async indexed(sessionIds: string[]): Promise<boolean[]> {
    if (!sessionIds.length) return [];
    return (await this.redis.zmscore(this.index, ...sessionIds)).map((s) => s !== null);
  }

  /** reindex puts a written ledger back in the index (repair). */
  async reindex(sessionId: string, stoppedAt: string): Promise<void> {
    await this.redis.zadd(this.index, stopScore(stoppedAt), sessionId);
  }

  /** stoppedBefore lists, oldest first, the indexed sessions whose ledger stopped at or before `cutoffMs`. */
  async stoppedBefore(cutoffMs: number): Promise<string[]> {
    return this.redis.zrangebyscore(this.index, '-inf', cutoffMs);
  }

  /** all lists every indexed session id, oldest stop first. */
  async all(): Promise<string[]> {
    return this.redis.zrange(this.index, 0, -1);
  }

  /** prune replaces a ledger with its tombstone; answers the events it held, or undefined when there was none to prune. */
  async prune(sessionId: string, prunedAt = new Date().toISOString()): Promise<number | undefined> {
    const n = await this.scripts.pruneLedger(this.key(sessionId), prunedAt);
    await this.redis.multi().zrem(this.index, sessionId).zadd(this.tombstones, Date.parse(prunedAt), sessionId).exec();
    return n >= 0 ? n : undefined;
  }

  /** unindex drops an index entry whose ledger is gone. */
  async unindex(sessionId: string): Promise<void> {
    await this.redis.zrem(this.index, sessionId);
  }

  /** tombstoneIds lists the sessions whose ledgers were pruned. */
  async tombstoneIds(): Promise<string[]> {
    return this.redis.zrange(this.tombstones, 0, -1);
  }

  /** forget removes a tombstone (its session is gone, so nothing would write its ledger again). */
  async forget(sessionId: string): Promise<void> {
    // NOTE: a tombstone never turns back into a ledger (put-ledger-1.lua refuses it), so this check cannot go stale.
    if (await this.redis.hexists(this.key(sessionId), 'pruned_at')) await this.redis.del(this.key(sessionId));
    await this.redis.zrem(this.tombstones, sessionId);
  }
}

/** stopScore is a stop time as an index score (epoch ms; 0 when it cannot be read, so it sorts first and is pruned first). */
function stopScore(stoppedAt: string): number {
  const ms = Date.parse(stoppedAt);
  return Number.isNaN(ms) ? 0 : ms;
}
