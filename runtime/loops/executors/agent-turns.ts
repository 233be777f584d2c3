import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { EventBus } from '../../../store/event-bus.ts';
import type { SessionEvent, SessionFields, SessionStore } from '../../../store/session-store.ts';
import { TurnWatcher } from '../../automation/turn-watcher.ts';
import type { SessionService } from '../../sessions/session-service.ts';
import type { NodeContext } from '../types.ts';

/** AgentTurnRequest is one prompt for one agent on behalf of a node execution. */
export interface AgentTurnRequest {
  /** The agent to run ('' = the workspace's default agent, then the session role's). */
  agent: string;
  text: string;
  /** `worker` (run-agent) or `judge` (agent-judge criterion): part of the session's name and of its key. */
  role: 'worker' | 'judge';
  /** Distinguishes several turns of one node attempt (a gate's criteria). */
  part?: string;
  /** Optional session settings of the node (`session: {provider, model, reasoning_effort}`). */
  session?: Record<string, unknown>;
}

/** AgentTurnResult is how the turn ended: the agent's answer and the tokens its usage rows report. */
export type AgentTurnResult =
  | { ok: true; answer: string; tokens: number; session_id: string }
  | { ok: false; error: string; tokens: number; session_id: string };

/** AgentTurnsOptions are what agent turns need of the session family. */
export interface AgentTurnsOptions {
  sessions: SessionService;
  sessionStore: SessionStore;
  bus: EventBus;
  /** The connection the per-attempt session keys are written on (any connection of the store). */
  redis: Redis;
  /** The store's key prefix (`svc:`); the keys sit under the run's own hash tag. */
  prefix: string;
  logger: Logger;
  /**
   * How long a finished turn's session stays live before it is stopped (default 2 s). NOTE: an agent process exits
   * when its last session leaves; stopping at once made every node of a chain spawn a fresh agent process.
   */
  lingerMs?: number;
}

/** SESSION_KEY_TTL_S keeps a node attempt's session id long enough for any retry to find it (a week). */
const SESSION_KEY_TTL_S = 7 * 24 * 3600;

/**
 * tokensOf sums the token counts of a turn's `usage` rows: `total_tokens`, else input + output. NOTE: ACP v1 has no
 * token-count update; an agent reports counts in its prompt response's `_meta.usage`, which the session host records
 * as the turn's `usage` row. The scripted agent reports them only for a `/usage IN OUT` line, so its turns count 0
 * otherwise; a `usage_update` (context size) is not a token count and is ignored.
 */
export function tokensOf(rows: SessionEvent[]): number {
  let total = 0;
  for (const r of rows) {
    if (r.type !== 'usage') continue;
    const u = (r.content.usage ?? {}) as Record<string, unknown>;
    const n = (k: string) => (typeof u[k] === 'number' && Number.isFinite(u[k]) ? (u[k] as number) : 0);
    total += n('total_tokens') || n('input_tokens') + n('output_tokens');
  }
  return Math.max(0, Math.floor(total));
}

/** answerOf joins the agent's messages of a turn (each message row is one chunk the agent streamed). */
export const answerOf = (rows: SessionEvent[]): string => rows.filter((r) => r.type === 'agent_message').map((r) => String(r.content.text ?? '')).join('\n');

/**
 * AgentTurns runs one agent turn for a node execution: a session of the named agent in the run's workspace, the
 * prompt, a wait for the turn's end (TurnWatcher: the event bus, with the session's log as the fallback), and the
 * answer and token count read from the turn's rows. Stop and timeout (the node's AbortSignal) stop the session.
 *
 * NOTE: at least once. The session of an attempt is recorded under the run's hash tag before it is prompted; a
 * worker that dies mid-turn leaves the job stalled, and the job's next run of the same attempt finds the session
 * and waits for its turn instead of prompting again (the turn id derives from the attempt). A crash between the
 * session's start and that record makes a second session: the agent's work may then repeat.
 */
export class AgentTurns {
  private readonly watcher: TurnWatcher;
  private readonly lingering = new Map<string, NodeJS.Timeout>();

  constructor(private readonly o: AgentTurnsOptions) {
    this.watcher = new TurnWatcher({ bus: o.bus, sessions: o.sessionStore, logger: o.logger });
  }

  async start(): Promise<void> {
    await this.watcher.start();
  }

  async stop(): Promise<void> {
    await this.watcher.stop();
    await Promise.all([...this.lingering.keys()].map((id) => this.stopSession(id, 'loop executor stopped')));
  }

  /**
   * run runs one turn for `ctx`'s node attempt and answers how it ended (never throws for an agent's failure). A
   * turn whose session died with the runtime hosting it (SIGKILL, a lost node) is prompted again in a new session on
   * a runtime still alive, up to twice: at least once, as a taken-over job is, instead of failing the node (and with
   * it the generation) for a crash that was not the agent's.
   */
  async run(ctx: NodeContext, req: AgentTurnRequest): Promise<AgentTurnResult> {
    for (let lost = 0; ; lost++) {
      const res = await this.turn(ctx, req);
      if (res.ok || ctx.signal.aborted || lost >= 2 || !(await this.runtimeLost(res.session_id))) return res;
      this.o.logger.warn({ loop_run_id: ctx.run.id, node_id: ctx.key.nodeId, session_id: res.session_id }, 'a loop node\'s session was lost with its runtime; prompting a new session');
    }
  }

  /** runtimeLost tells a session the reaper stopped because the runtime that hosted it stopped renewing its lease. */
  private async runtimeLost(sessionId: string): Promise<boolean> {
    if (!sessionId) return false;
    const s = await this.o.sessionStore.get(sessionId);
    return s?.state === 'stopped' && (s.failure as { kind?: string } | null)?.kind === 'transport_failure' && s.stop_detail === 'owning runtime lost';
  }

  private async turn(ctx: NodeContext, req: AgentTurnRequest): Promise<AgentTurnResult> {
    const { key } = ctx;
    const tag = `${key.generation}:${key.nodeId}:${key.itemIndex}:${ctx.revision}:${ctx.attempt}:${req.role}${req.part ? `:${req.part}` : ''}`;
    const recordKey = `${this.o.prefix}{loop:${ctx.run.id}}:agent:${tag}`;
    const turnId = `loop-${ctx.run.id}-${tag.replaceAll(':', '-')}`;
    let session: SessionFields | undefined;
    const known = await this.o.redis.get(recordKey);
    if (known) session = await this.o.sessionStore.get(known);
    if (ctx.signal.aborted) return { ok: false, error: abortReason(ctx.signal), tokens: 0, session_id: session?.id ?? '' };
    if (!session || session.state === 'stopped') {
      try {
        session = await this.o.sessions.create({
          workspace: ctx.run.workspace_id, agent_name: req.agent || undefined, name: `loop ${ctx.run.id} ${key.nodeId}${key.itemIndex >= 0 ? `[${key.itemIndex}]` : ''} ${req.role}`.slice(0, 200),
          ...pick(req.session, ['provider', 'model', 'reasoning_effort']),
        }, { origin: `loop_run/${ctx.run.id}`, ...(ctx.run.agent_session_id ? { startedBy: ctx.run.agent_session_id } : {}) });
      } catch (err) {
        return { ok: false, error: `the ${req.role} session did not start: ${(err as Error).message}`, tokens: 0, session_id: '' };
      }
      await this.o.redis.set(recordKey, session.id, 'EX', SESSION_KEY_TTL_S);
      if (session.state !== 'active') {
        const failure = session.failure as { summary?: string } | null;
        return { ok: false, error: `session ${session.id} did not start: ${failure?.summary ?? String(session.stop_detail || session.state)}`, tokens: 0, session_id: session.id };
      }
    }
    const s = session;
    await ctx.emit('channel_msg', { node_id: key.nodeId, item_index: key.itemIndex, role: req.role, session_id: s.id, agent_name: String(s.agent_name ?? ''), generation: key.generation });
    const onAbort = () => void this.stopSession(s.id, `loop run ${ctx.run.id}: ${abortReason(ctx.signal)}`);
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    try {
      const sent = known ? (await this.o.sessionStore.events(s.id, { turn_id: turnId, type: 'user_message' })).length > 0 : false;
      if (!sent) await this.o.sessions.sendPrompt(s, { type: 'prompt', session_id: s.id, turn_id: turnId, text: req.text, mode: 'queue' });
      const outcome = await Promise.race([this.watcher.wait(s.id, turnId), aborted(ctx.signal)]);
      const rows = await this.o.sessionStore.events(s.id, { turn_id: turnId });
      const tokens = tokensOf(rows);
      if (ctx.signal.aborted) return { ok: false, error: abortReason(ctx.signal), tokens, session_id: s.id };
      if (!outcome.ok) return { ok: false, error: outcome.error, tokens, session_id: s.id };
      return { ok: true, answer: answerOf(rows), tokens, session_id: s.id };
    } catch (err) {
      return { ok: false, error: (err as Error).message, tokens: 0, session_id: s.id };
    } finally {
      ctx.signal.removeEventListener('abort', onAbort);
      if (!ctx.signal.aborted) this.linger(s.id, `loop run ${ctx.run.id} node ${key.nodeId} turn ended`);
    }
  }

  private linger(sessionId: string, detail: string): void {
    clearTimeout(this.lingering.get(sessionId));
    const timer = setTimeout(() => void this.stopSession(sessionId, detail), this.o.lingerMs ?? 2_000);
    timer.unref();
    this.lingering.set(sessionId, timer);
  }

  /** stopSession stops a session once its work is over (it stays readable); one already stopped is left. */
  private stopSession(sessionId: string, detail: string): Promise<void> {
    clearTimeout(this.lingering.get(sessionId));
    this.lingering.delete(sessionId);
    return this.o.sessions.command({ type: 'stop', session_id: sessionId, reason: 'completed', detail }).catch(() => undefined);
  }
}

function pick(o: Record<string, unknown> | undefined, keys: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of keys) if (typeof o?.[k] === 'string' && o[k]) out[k] = o[k] as string;
  return out;
}

/** abortReason names why a node's signal fired (stop, timeout, shutdown), from its reason. */
export function abortReason(signal: AbortSignal): string {
  const r = signal.reason as unknown;
  if (r instanceof Error) return r.message;
  return typeof r === 'string' && r ? r : 'aborted';
}

/** aborted resolves a failed outcome when the signal fires (never, while it does not). */
function aborted(signal: AbortSignal): Promise<{ ok: false; error: string }> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve({ ok: false, error: abortReason(signal) });
    signal.addEventListener('abort', () => resolve({ ok: false, error: abortReason(signal) }), { once: true });
  });
}
