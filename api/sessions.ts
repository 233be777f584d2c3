import { randomBytes } from 'node:crypto';
import Router from '@koa/router';
import type { Context } from 'koa';
import { InputError } from '../store/errors.ts';
import type { EventFilter, SessionEvent, SessionStore } from '../store/session-store.ts';
import { bodyObject, queryBool, queryInt, queryString } from './params.ts';
import { promptText, SESSION_CREATE_FIELDS, sessionView, type SessionService } from '../runtime/sessions/session-service.ts';
import type { SessionTailHub } from '../runtime/sessions/session-tail.ts';
import { SseStream } from './sse.ts';
import type { StreamSlots } from './stream-slots.ts';
import { UiMessageStreamEncoder } from './ui-message-stream.ts';
import { bodyFields, takesBody } from './body-rule.ts';
import { requires } from './auth.ts';

const MODES = ['queue', 'interrupt', 'steer'] as const;

/** eventFilter reads the events/history filters; Last-Event-ID overrides after_sequence. */
function eventFilter(ctx: Context): EventFilter {
  const q = ctx.query;
  const since = queryString(q, 'since');
  if (since && Number.isNaN(Date.parse(since.replace(/\.(\d{3})\d+/, '.$1')))) throw new InputError('since must be an RFC 3339 time', 'invalid_query', { since });
  const header = ctx.get('Last-Event-ID');
  if (header && !/^\d+$/.test(header)) throw new InputError('Last-Event-ID must be a sequence number', 'invalid_last_event_id', { 'Last-Event-ID': header });
  return {
    type: queryString(q, 'type'), agent_name: queryString(q, 'agent_name'), turn_id: queryString(q, 'turn_id'), since,
    limit: queryInt(q, 'limit', 0), afterSequence: header ? Number(header) : queryInt(q, 'after_sequence', 0, Number.MAX_SAFE_INTEGER),
  };
}

/** history groups events by turn, in the order turns first appear. */
function history(events: SessionEvent[]) {
  const turns = new Map<string, SessionEvent[]>();
  for (const e of events) turns.set(e.turn_id, [...(turns.get(e.turn_id) ?? []), e]);
  return [...turns].map(([turn_id, evs]) => ({ turn_id, events: evs }));
}

// NOTE: every subscriber of a session receives the same event objects (SessionTailHub), so each event is
// serialized into its SSE frame once, not once per stream.
const frames = new WeakMap<SessionEvent, string>();
const frameOf = (e: SessionEvent): string => frames.get(e) ?? frames.set(e, `id: ${e.sequence}\nevent: ${sseEventName(e.type)}\ndata: ${JSON.stringify(e)}\n\n`).get(e)!;

/**
 * sseEventName is a session event's SSE event name: its type, except that `error` becomes `session_error`.
 * NOTE: EventSource fires its own `error` event when the connection fails; a session's error under the same name
 * could not be told apart from it. The frame's data keeps `type: "error"`.
 */
const sseEventName = (type: string) => (type === 'error' ? 'session_error' : type);

/**
 * STOPPED_ID matches the id of a stream's terminal frame, `session-stopped-<session id>`. A
 * client that reconnects with it (EventSource does) gets 204 while the session is still stopped, which tells
 * EventSource to stop reconnecting; if the session was resumed since, the stream resumes after the session's last
 * recorded `session_stopped` row. Numeric ids resume as before.
 */
const STOPPED_ID = /^session-stopped-(.+)$/;

/** sessionRoutes serves the sessions family, under both the flat and the workspace-scoped paths. */
export function sessionRoutes(deps: { service: SessionService; sessions: SessionStore; hub: SessionTailHub; streams: StreamSlots }): Router {
  const { service, sessions, hub, streams } = deps;
  const router = new Router();
  const ws = (ctx: Context) => (ctx.params as Record<string, string>).workspace_id;

  router.get('List sessions', '/api/sessions', async (ctx) => {
    const q = ctx.query;
    const resumable = queryBool(q, 'resumable');
    const list = await service.list({ workspace: queryString(q, 'workspace'), resumable, sort: queryString(q, 'sort'), limit: resumable ? queryInt(q, 'limit', 0, 100) : undefined });
    const health = queryBool(q, 'include_health');
    ctx.body = { sessions: list.map((s) => sessionView(s, health)) };
  });
  router.post('Create a session', '/api/sessions', bodyFields(SESSION_CREATE_FIELDS), async (ctx) => {
    ctx.status = 201;
    ctx.body = { session: sessionView(await service.create(bodyObject(ctx.request.body))) };
  });
  router.post('Spawn a child session of the calling agent (session token)', '/api/agent/spawn', requires('session'), takesBody, async (ctx) => {
    const parent = await service.sessionForToken(ctx.get('Authorization'));
    ctx.status = 201;
    ctx.body = { spawn: await service.spawn(parent, bodyObject(ctx.request.body ?? {})) };
  });

  for (const base of ['/api/sessions/:id', '/api/workspaces/:workspace_id/sessions/:id']) {
    router.get('Get a session', base, async (ctx) => {
      ctx.body = { session: sessionView(await service.get(ctx.params.id, ws(ctx)), queryBool(ctx.query, 'include_health')) };
    });
    router.delete('Delete a session from persisted history', base, async (ctx) => {
      await service.delete(ctx.params.id, ws(ctx));
      ctx.status = 204;
    });
    router.post('Approve or deny a permission request', `${base}/approve`, takesBody, async (ctx) => {
      ctx.body = await service.approve(ctx.params.id, bodyObject(ctx.request.body), ws(ctx));
    });
    router.get('List session events', `${base}/events`, async (ctx) => {
      ctx.body = { events: await service.events(ctx.params.id, eventFilter(ctx), ws(ctx)) };
    });
    router.get('List session history by turn', `${base}/history`, async (ctx) => {
      ctx.body = { history: history(await service.events(ctx.params.id, eventFilter(ctx), ws(ctx))) };
    });
    router.post('Repair a stopped session (dry_run, force)', `${base}/repair`, async (ctx) => {
      const dryRun = queryBool(ctx.query, 'dry_run') || queryBool(ctx.query, 'dry-run');
      ctx.body = { repair: await service.repair(ctx.params.id, dryRun, queryBool(ctx.query, 'force'), ws(ctx)) };
    });
    router.post('Resume a stopped session', `${base}/resume`, async (ctx) => {
      ctx.body = { session: sessionView(await service.resume(ctx.params.id, ws(ctx))) };
    });
    router.post('Stop a live session (stop_reason user_canceled; it stays resumable)', `${base}/stop`, async (ctx) => {
      await service.stop(ctx.params.id, ws(ctx));
      ctx.status = 204;
    });
    router.post('Cancel the running prompt', `${base}/prompt/cancel`, async (ctx) => {
      await service.get(ctx.params.id, ws(ctx));
      await service.command({ type: 'cancel', session_id: ctx.params.id });
      ctx.status = 200;
      ctx.body = {};
    });
  }

  router.get('Session transcript (canonical replay messages)', '/api/workspaces/:workspace_id/sessions/:id/transcript', async (ctx) => {
    ctx.body = { messages: await service.transcript(ctx.params.id, ws(ctx)) };
  });
  router.get('Session recap (bounded, redacted snapshot)', '/api/workspaces/:workspace_id/sessions/:id/recap', async (ctx) => {
    ctx.body = { recap: await service.recap(ctx.params.id, queryInt(ctx.query, 'limit', 20, 100) || 20, ws(ctx)) };
  });
  router.get('Stream session events (SSE)', '/api/workspaces/:workspace_id/sessions/:id/stream', async (ctx) => {
    const s = await service.get(ctx.params.id, ws(ctx));
    const header = ctx.get('Last-Event-ID');
    const stopped = STOPPED_ID.exec(header);
    if (stopped && stopped[1] !== s.id) throw new InputError('Last-Event-ID names another session', 'invalid_last_event_id');
    if (stopped && s.state === 'stopped') {
      ctx.status = 204;
      return;
    }
    if (header && !stopped && !/^\d+$/.test(header)) throw new InputError('Last-Event-ID must be a sequence number or a terminal frame id', 'invalid_last_event_id');
    let last = stopped ? ((await sessions.events(s.id, { type: 'session_stopped', limit: 1 })).at(-1)?.sequence ?? 0) : header ? Number(header) : 0;
    const release = streams.admit(ctx);
    let ended = false;
    const send = (events: SessionEvent[]) => {
      for (const e of events) {
        last = e.sequence;
        sse.raw(frameOf(e));
      }
      if (events.some((e) => e.type === 'session_stopped')) void finishIfStopped();
    };
    // NOTE: a stopped session ends with the synthetic frame once no rows are left to send.
    const finishIfStopped = async () => {
      const now = await sessions.get(s.id);
      if (ended || (now && now.state !== 'stopped')) return;
      ended = true;
      send(await sessions.events(s.id, { afterSequence: last }));
      if (now) {
        sse.send({
          id: `session-stopped-${s.id}`, event: 'session_stopped',
          data: { session_id: s.id, type: 'session_stopped', workspace_id: now.workspace_id, workspace_path: now.workspace_path, stop_reason: now.stop_reason, stop_detail: now.stop_detail, ...(now.failure ? { failure: now.failure } : {}), timestamp: now.updated_at },
        });
      }
      sse.end();
    };
    const timer = setInterval(() => void finishIfStopped().catch(() => undefined), 1000);
    const sse = new SseStream(ctx, () => { clearInterval(timer); unsubscribe(); release(); });
    const unsubscribe = hub.subscribe(s.id, last, send);
    void finishIfStopped().catch(() => undefined);
  });

  router.post('Prompt a session (AI SDK UI message stream)', '/api/workspaces/:workspace_id/sessions/:id/prompt', takesBody, async (ctx) => {
    const body = bodyObject(ctx.request.body);
    const text = promptText(body);
    const mode = (body.mode ?? 'queue') as (typeof MODES)[number];
    if (!MODES.includes(mode)) throw new InputError(`mode must be one of ${MODES.join(', ')}`, 'invalid_mode', { mode: String(body.mode) });
    const s = await service.get(ctx.params.id, ws(ctx));
    const turnId = `turn-${randomBytes(8).toString('hex')}`;
    // NOTE: a queued prompt answers with its own turn's stream (the AI SDK shows nothing for a 202), unless the
    // client asked for JSON only (svcctl, curl --json): they get the 202 queued answer. A staged (steer) prompt has
    // no turn of its own.
    const json = mode === 'steer' || (ctx.get('Accept').includes('application/json') && !ctx.get('Accept').includes('text/event-stream'));
    const queued = s.prompt_active && mode !== 'interrupt' && json;
    // NOTE: the turn's stream takes its slot before the prompt is sent, so a refused stream (429) sends nothing.
    const release = queued ? () => undefined : streams.admit(ctx);
    // NOTE: a full input queue is refused (413) here, before any stream starts.
    const after = await service.sendPrompt(s, { type: 'prompt', session_id: s.id, turn_id: turnId, text, mode }).catch((err) => { release(); throw err; });
    if (queued) {
      ctx.status = 202;
      ctx.body = { prompt: { status: mode === 'steer' ? 'staged' : 'queued', mode, [mode === 'steer' ? 'staged' : 'queued']: true, queue_entry_id: `inq-${randomBytes(8).toString('hex')}`, new_turn_id: turnId } };
      return;
    }
    streamTurn(ctx, s.id, turnId, after, release);
  });

  /**
   * streamTurn answers with one turn's UI message stream: the session's events after `after` that belong to
   * `turnId` (or stop the session), until the turn ends. The turn keeps running if the client goes away; only
   * delivery stops. `release` frees the stream's slot when it closes.
   */
  function streamTurn(ctx: Context, sessionId: string, turnId: string, after: number, release: () => void): void {
    const enc = new UiMessageStreamEncoder(turnId);
    ctx.set('x-svc-ai-ui-message-stream', 'v1');
    const out = (chunks: object[]) => { for (const c of chunks) sse.send({ data: c }); };
    const sse = new SseStream(ctx, () => { unsubscribe(); release(); });
    out(enc.start());
    const unsubscribe = hub.subscribe(sessionId, after, (events) => {
      for (const e of events) if (!enc.finished && (e.turn_id === turnId || e.type === 'session_stopped')) out(enc.push(e));
      if (enc.finished) {
        sse.raw('data: [DONE]\n\n');
        sse.end();
        unsubscribe();
      }
    });
  }
  return router;
}
