import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import type { ScriptCommands } from './scripts.ts';
import type { SessionIdentities } from './session-identities.ts';

/** SessionEvent is one stored row of a session's event log. */
export interface SessionEvent {
  id: string;
  sequence: number;
  session_id: string;
  turn_id: string;
  type: string;
  agent_name: string;
  workspace_id: string;
  workspace_path: string;
  content: Record<string, unknown>;
  failure?: SessionFailure;
  stop_reason?: string;
  stop_detail?: string;
  timestamp: string;
  parent_session_id: string;
  root_session_id: string;
  spawn_depth: number;
}

/** SessionFailure explains why a session stopped abnormally; `summary` is already redacted. */
export interface SessionFailure {
  kind: string;
  summary: string;
  crash_bundle_path?: string;
}

/** EventFilter selects events: every given field must match; `limit` keeps the newest, returned ascending. */
export interface EventFilter {
  type?: string;
  agent_name?: string;
  turn_id?: string;
  /** Events at or after this instant (RFC 3339, nanoseconds allowed). */
  since?: string;
  afterSequence?: number;
  limit?: number;
}

/** Session is stored as a hash of top-level fields, each a JSON value, so a patch touches only its fields. */
export type SessionFields = Record<string, unknown> & { id: string };

/**
 * IDENTITY_FIELDS are the session fields an agent's call is checked against: a write that sets one of them announces
 * the session's change on `keys.sessionChannel` in the same step (see SessionIdentities).
 */
export const IDENTITY_FIELDS = ['state', 'token_hash', 'workspace_id', 'agent_name'] as const;
const IDENTITY = new Set<string>(IDENTITY_FIELDS);
/** SessionIdentity is a session's identity fields, as stored (undefined: not set). */
export type SessionIdentity = Record<(typeof IDENTITY_FIELDS)[number], unknown> & { id: string };

/**
 * SessionStore keeps sessions and their event logs in Redis: a hash per session, a stream per event log
 * (entry id = sequence, so reads by sequence are range reads) and indexes by creation time and workspace.
 */
export class SessionStore {
  /**
   * identities, when the composition root started them (one Redis, not a cluster), keep the identity of the sessions
   * whose agents call this process, so `identity` costs no round trip while a session is unchanged.
   */
  identities?: SessionIdentities<SessionIdentity>;

  constructor(readonly redis: Redis & ScriptCommands, readonly keys: Keys) {}

  key(id: string) { return `${this.keys.session(id)}session`; }
  eventsKey(id: string) { return `${this.keys.session(id)}events`; }
  private seqKey(id: string) { return `${this.keys.session(id)}seq`; }
  private get index() { return `${this.keys.sessions}all`; }
  private wsIndex(ws: string) { return `${this.keys.sessions}ws:${ws}`; }

  /**
   * create stores a new session and indexes it. NOTE: the session (tag `{s:<id>}`) and the indexes (`{sessions}`)
   * sit in two slots, so they are two steps, the record first: a crash between them leaves a session readable by
   * id but not listed, never a listed session that does not exist.
   */
  async create(s: SessionFields & { workspace_id: string; created_at: string }): Promise<void> {
    const fields = Object.entries(s).flatMap(([k, v]) => [k, JSON.stringify(v)]);
    const score = Date.parse(s.created_at);
    await this.redis.hset(this.key(s.id), ...fields);
    await this.redis.multi().zadd(this.index, score, s.id).zadd(this.wsIndex(s.workspace_id), score, s.id).exec();
  }

  /** patch sets the given top-level fields of an existing session; false when the session is gone. */
  async patch(id: string, fields: Record<string, unknown>): Promise<boolean> {
    const flat = Object.entries(fields).flatMap(([k, v]) => [k, JSON.stringify(v ?? null)]);
    return (await this.redis.patchSession(this.key(id), this.announce(fields), ...flat)) === 1;
  }

  /** announce is the channel a write of these fields is announced on: one of them is an identity field. */
  private announce(fields: Record<string, unknown>): string {
    for (const k in fields) if (IDENTITY.has(k)) return this.keys.sessionChannel;
    return '';
  }

  /** get returns a session, or undefined. */
  async get(id: string): Promise<SessionFields | undefined> {
    const h = await this.redis.hgetall(this.key(id));
    if (!h.id) return undefined;
    return Object.fromEntries(Object.entries(h).map(([k, v]) => [k, JSON.parse(v)])) as SessionFields;
  }

  /**
   * fields returns some top-level fields of a session (undefined when it does not exist): one HMGET, where a hot
   * path (an agent route's identity check) needs three fields of a hash that holds dozens.
   */
  async fields<K extends string>(id: string, names: readonly K[]): Promise<(Record<K, unknown> & { id: string }) | undefined> {
    const vals = await this.redis.hmget(this.key(id), 'id', ...names);
    if (vals[0] === null) return undefined;
    const out: Record<string, unknown> = { id: JSON.parse(vals[0]) };
    names.forEach((n, i) => { const v = vals[i + 1]; out[n] = v === null ? undefined : JSON.parse(v); });
    return out as Record<K, unknown> & { id: string };
  }

  /** identity returns a session's identity fields (undefined when it does not exist), as `identities` kept them. */
  identity(id: string): Promise<SessionIdentity | undefined> {
    const read = () => this.fields(id, IDENTITY_FIELDS);
    return this.identities ? this.identities.get(this.key(id), read) : read();
  }

  /** list returns sessions, newest first, optionally of one workspace. */
  async list(workspaceId?: string): Promise<SessionFields[]> {
    const ids = await this.redis.zrevrange(workspaceId ? this.wsIndex(workspaceId) : this.index, 0, -1);
    const out = await Promise.all(ids.map((id) => this.get(id)));
    return out.filter((s): s is SessionFields => Boolean(s));
  }

  /** delete removes a session with its events, then its index entries (a list skips a session already gone). */
  async delete(id: string, workspaceId: string): Promise<void> {
    await this.redis.multi().del(this.key(id), this.eventsKey(id), this.seqKey(id)).publish(this.keys.sessionChannel, this.key(id)).exec();
    await this.redis.multi().zrem(this.index, id).zrem(this.wsIndex(workspaceId), id).exec();
  }

  /**
   * append stores one event with the next sequence and returns it as stored; `patch` sets top-level fields of the
   * session in the same script (as `patch` does: not on a deleted session), so a reader never sees one without
   * the other, and the two cost one round trip, not two.
   */
  async append(event: Omit<SessionEvent, 'id' | 'sequence'>, patch: Record<string, unknown> = {}): Promise<SessionEvent> {
    const body = JSON.stringify(event);
    const flat = Object.entries(patch).flatMap(([k, v]) => [k, JSON.stringify(v ?? null)]);
    const id = event.session_id;
    const seq = await this.redis.appendEvent(this.eventsKey(id), this.seqKey(id), this.key(id), body, `${id}-`, this.announce(patch), ...flat);
    return { id: `${id}-${seq}`, sequence: seq, ...event };
  }

  /** lastSequence is the sequence of the newest event (0 when none). */
  async lastSequence(id: string): Promise<number> {
    return Number((await this.redis.get(this.seqKey(id))) ?? 0);
  }

  /** events returns the matching events in ascending sequence; with a limit, the newest matching ones. */
  async events(id: string, f: EventFilter = {}): Promise<SessionEvent[]> {
    const start = f.afterSequence ? `(${f.afterSequence}-0` : '-';
    const rows = await this.redis.xrange(this.eventsKey(id), start, '+');
    const since = f.since ? sinceKey(f.since) : undefined;
    const out: SessionEvent[] = [];
    for (const [, fields] of rows) {
      const e = JSON.parse(fields[1]) as SessionEvent;
      if (f.type && e.type !== f.type) continue;
      if (f.agent_name && e.agent_name !== f.agent_name) continue;
      if (f.turn_id && e.turn_id !== f.turn_id) continue;
      if (since && sinceKey(e.timestamp) < since) continue;
      out.push(e);
    }
    return f.limit && f.limit > 0 ? out.slice(-f.limit) : out;
  }

  /** readAfter blocks up to `blockMs` for events after a sequence (on a connection the caller owns). */
  async readAfter(conn: Redis, id: string, afterSequence: number, blockMs: number): Promise<SessionEvent[]> {
    const res = (await conn.xread('COUNT', 1000, 'BLOCK', blockMs, 'STREAMS', this.eventsKey(id), `${afterSequence}-0`)) as [string, [string, string[]][]][] | null;
    return res ? res[0][1].map(([, fields]) => JSON.parse(fields[1]) as SessionEvent) : [];
  }
}

/** sinceKey makes RFC 3339 instants (with or without nanoseconds) comparable as strings in UTC. */
function sinceKey(t: string): string {
  const m = /^(.*?)(\.\d+)?(Z|[+-]\d\d:\d\d)$/.exec(t);
  if (!m) return t;
  const base = new Date(Date.parse(`${m[1]}${m[3]}`)).toISOString().slice(0, 19);
  return `${base}${(m[2] ?? '.0').padEnd(10, '0')}`;
}
