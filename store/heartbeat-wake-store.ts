import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';

/** WakeSource says who asked for a heartbeat wake: the schedule, or an operator or agent (route, tool). */
export type WakeSource = 'scheduler' | 'manual';

/** WakeResult is the outcome of one wake decision (the original's closed set). */
export type WakeResult = 'sent' | 'skipped' | 'coalesced' | 'rate_limited' | 'failed';

/** WakeRecord is one retained heartbeat wake audit row (a history entry). */
export interface WakeRecord {
  id: string;
  workspace_id: string;
  agent_name: string;
  /** The session woken or considered; '' when no session was (no policy, no eligible session). */
  session_id: string;
  policy_snapshot_id: string;
  policy_digest: string;
  config_digest: string;
  source: WakeSource;
  result: WakeResult;
  reason: string;
  /** The turn id of the wake prompt (result `sent`); the session's events of that turn are the wake's turn. */
  synthetic_prompt_id: string;
  /** For a scheduled wake, the tick it belongs to; created_at minus this is the wake's lag. */
  scheduled_at?: string;
  /** A short, redacted explanation for a failed or skipped wake. */
  message?: string;
  created_at: string;
  expires_at: string;
}

/** MAX_WAKES_KEPT caps each history list, whatever wake_event_retention says. */
const MAX_WAKES_KEPT = 10_000;

/**
 * HeartbeatWakeStore keeps the wake history and the per-session wake cooldowns. Every key of an agent shares
 * the hash tag `{hb:<agent>}`, so the two history lists (the agent's, and the agent's in one workspace) are
 * written in one MULTI and stay in one slot under Redis Cluster. A list is a sorted set scored by creation
 * time: entries older than the retention are dropped on each write and ignored on read.
 */
export class HeartbeatWakeStore {
  constructor(private readonly redis: Redis, private readonly keys: Keys) {}

  private tag(agent: string) { return `${this.keys.prefix}{hb:${agent}}`; }
  private history(agent: string, workspaceId?: string) { return `${this.tag(agent)}:wakes${workspaceId ? `:ws:${workspaceId}` : ''}`; }
  private cooldown(agent: string, workspaceId: string, sessionId: string) { return `${this.tag(agent)}:cooldown:${workspaceId}:${sessionId}`; }

  /** record appends a wake to its agent's history and its workspace's, trimming by retention and count. */
  async record(w: WakeRecord, retentionMs: number): Promise<void> {
    const at = Date.parse(w.created_at);
    const m = this.redis.multi();
    for (const key of [this.history(w.agent_name), this.history(w.agent_name, w.workspace_id)]) {
      m.zadd(key, at, JSON.stringify(w)).zremrangebyscore(key, '-inf', `(${at - retentionMs}`).zremrangebyrank(key, 0, -MAX_WAKES_KEPT - 1).pexpire(key, retentionMs);
    }
    await m.exec();
  }

  /** list returns an agent's retained wakes (of one workspace when given), newest first. */
  async list(agent: string, workspaceId: string | undefined, limit: number): Promise<WakeRecord[]> {
    const rows = await this.redis.zrevrangebyscore(this.history(agent, workspaceId), '+inf', '-inf', 'LIMIT', 0, limit);
    const now = Date.now();
    return rows.map((r) => JSON.parse(r) as WakeRecord).filter((w) => Date.parse(w.expires_at) > now);
  }

  /**
   * claimCooldown starts a session's wake cooldown unless one runs: true when this caller may wake the
   * session now. NOTE: one SET NX across every process, so two wakers (a tick and a manual wake, or two
   * controllers handling a stalled job twice) never both prompt a session within one cooldown.
   */
  async claimCooldown(agent: string, workspaceId: string, sessionId: string, wakeId: string, cooldownMs: number): Promise<boolean> {
    return (await this.redis.set(this.cooldown(agent, workspaceId, sessionId), wakeId, 'PX', Math.max(1, cooldownMs), 'NX')) === 'OK';
  }

  /** cooldownLeft is how long a session's wake cooldown still runs, in ms (0: none). */
  async cooldownLeft(agent: string, workspaceId: string, sessionId: string): Promise<number> {
    return Math.max(0, await this.redis.pttl(this.cooldown(agent, workspaceId, sessionId)));
  }
}
