import Router from '@koa/router';
import type { Context } from 'koa';
import { SCHEDULER_FIELDS, TASK_CREATE_FIELDS, TASK_PATCH_FIELDS, type Caller, type TaskService } from '../runtime/tasks/service.ts';
import type { SessionService } from '../runtime/sessions/session-service.ts';
import type { SessionStore } from '../store/session-store.ts';
import { ForbiddenError, ServiceError, UnauthorizedError, UnavailableError } from '../store/errors.ts';
import { bodyFields, takesBody } from './body-rule.ts';
import { queryInt, queryString } from './params.ts';
import { requires } from './auth.ts';

export interface TaskRouteDeps {
  tasks: TaskService;
  sessionService: SessionService;
  sessions: SessionStore;
  /** 'none' = no operator authentication (loopback): the X-SVC-Session-ID/X-SVC-Agent headers are accepted. */
  authMode: string;
}

const actorOf = (ctx: Context) => ({ name: (ctx.state.principal as { name?: string } | undefined)?.name ?? 'anonymous' });

/**
 * callerOf identifies the agent calling `/api/agent/tasks/*`: the per-session bearer token agents
 * already hold; only without operator authentication (AUTH_MODE=none) also the X-SVC-Session-ID/X-SVC-Agent
 * headers. The session must be active: missing/stale/mismatched 401, other workspace 403, lookup failure 503.
 */
async function callerOf(ctx: Context, d: TaskRouteDeps): Promise<Caller> {
  const wsHeader = ctx.get('X-SVC-Workspace-ID');
  let session: Record<string, unknown> & { id: string };
  try {
    if (ctx.get('Authorization')) {
      session = await d.sessionService.sessionForToken(ctx.get('Authorization'), true);
    } else {
      const sid = ctx.get('X-SVC-Session-ID');
      if (d.authMode !== 'none' || !sid) throw new UnauthorizedError('agent identity required: a session token (Authorization: Bearer …)' + (d.authMode === 'none' ? ' or X-SVC-Session-ID and X-SVC-Agent' : ''), 'identity_required');
      // NOTE: the identity fields only (kept between calls while the session is unchanged), not the whole session.
      const s = await d.sessions.identity(sid);
      if (!s || s.state !== 'active') throw new UnauthorizedError(`session "${sid}" is not an active session`, 'identity_stale');
      const agent = ctx.get('X-SVC-Agent');
      if (!agent || agent !== s.agent_name) throw new UnauthorizedError('X-SVC-Agent does not match the session\'s agent', 'identity_mismatch');
      session = s;
    }
  } catch (err) {
    if (err instanceof ServiceError) throw err;
    throw new UnavailableError('the session lookup is unavailable; retry shortly', 'identity_lookup_unavailable');
  }
  const caller = { session_id: session.id, workspace_id: String(session.workspace_id ?? ''), agent_name: String(session.agent_name ?? '') };
  if (wsHeader && wsHeader !== caller.workspace_id) throw new ForbiddenError('X-SVC-Workspace-ID is not the session\'s workspace', 'identity_unauthorized', { workspace_id: wsHeader });
  return caller;
}

/** taskRoutes serves the task family: operator routes (/api/tasks, /api/runs, /api/scheduler) and the agent lease routes. */
export function taskRoutes(d: TaskRouteDeps): Router {
  const { tasks } = d;
  const r = new Router();
  r.post('Create a task', '/api/tasks', bodyFields(TASK_CREATE_FIELDS), async (ctx) => {
    ctx.status = 201;
    ctx.body = { task: await tasks.create(ctx.request.body, actorOf(ctx)) };
  });
  r.get('List tasks', '/api/tasks', async (ctx) => {
    const q = ctx.query;
    ctx.body = await tasks.list({
      status: queryString(q, 'status'), workspace: queryString(q, 'workspace'), owner: queryString(q, 'owner'), limit: queryInt(q, 'limit', 50, 500) || 50, cursor: queryString(q, 'cursor'),
    });
  });
  r.get('Get a task', '/api/tasks/:id', async (ctx) => { ctx.body = { task: await tasks.view(ctx.params.id) }; });
  r.patch('Update a task', '/api/tasks/:id', bodyFields(TASK_PATCH_FIELDS), async (ctx) => { ctx.body = { task: await tasks.patch(ctx.params.id, ctx.request.body) }; });
  r.post('Create a child task', '/api/tasks/:id/children', bodyFields(TASK_CREATE_FIELDS), async (ctx) => {
    ctx.status = 201;
    ctx.body = { task: await tasks.create(ctx.request.body, actorOf(ctx), ctx.params.id) };
  });
  r.post('Publish a draft task', '/api/tasks/:id/publish', takesBody, async (ctx) => { ctx.body = await tasks.runOp(ctx.params.id, 'publish', ctx.request.body); });
  r.post('Start a task (enqueue a run)', '/api/tasks/:id/start', takesBody, async (ctx) => {
    ctx.status = 201;
    ctx.body = await tasks.runOp(ctx.params.id, 'start', ctx.request.body);
  });
  r.post('Approve a task', '/api/tasks/:id/approve', takesBody, async (ctx) => {
    ctx.status = 201;
    ctx.body = await tasks.runOp(ctx.params.id, 'approve', ctx.request.body);
  });
  r.post('Reject a task', '/api/tasks/:id/reject', async (ctx) => { ctx.body = { task: await tasks.reject(ctx.params.id) }; });
  r.post('Cancel a task', '/api/tasks/:id/cancel', takesBody, async (ctx) => { ctx.body = { task: await tasks.cancel(ctx.params.id, ctx.request.body) }; });
  r.post('Pause a task', '/api/tasks/:id/pause', takesBody, async (ctx) => { ctx.body = { task: await tasks.pause(ctx.params.id, ctx.request.body, false) }; });
  r.post('Resume a task', '/api/tasks/:id/resume', takesBody, async (ctx) => { ctx.body = { task: await tasks.pause(ctx.params.id, ctx.request.body, true) }; });
  r.post('Add a task dependency', '/api/tasks/:id/dependencies', takesBody, async (ctx) => { ctx.body = { task: await tasks.addDependency(ctx.params.id, ctx.request.body) }; });
  r.get('List a task\'s runs', '/api/tasks/:id/runs', async (ctx) => { ctx.body = { runs: await tasks.runs(ctx.params.id) }; });
  r.post('Enqueue a task run', '/api/tasks/:id/runs', takesBody, async (ctx) => {
    ctx.status = 201;
    ctx.body = { run: (await tasks.runOp(ctx.params.id, 'runs', ctx.request.body)).run };
  });

  for (const op of ['claim', 'start'] as const) {
    r.post(`Operator ${op} of a task run`, `/api/task-runs/:id/${op}`, takesBody, async (ctx) => { ctx.body = await tasks.runClaim(ctx.params.id, op, ctx.request.body, actorOf(ctx)); });
  }
  r.post('Attach a session to a task run', '/api/task-runs/:id/attach-session', takesBody, async (ctx) => { ctx.body = await tasks.attachSession(ctx.params.id, ctx.request.body, actorOf(ctx)); });
  for (const op of ['complete', 'fail', 'cancel'] as const) {
    r.post(`Operator ${op} of a task run`, `/api/task-runs/:id/${op}`, takesBody, async (ctx) => { ctx.body = await tasks.runEnd(ctx.params.id, op, ctx.request.body, actorOf(ctx)); });
  }

  r.post('Force-release runs (bulk)', '/api/runs/bulk/release', takesBody, async (ctx) => { ctx.body = await tasks.bulk('release', ctx.request.body, actorOf(ctx)); });
  r.post('Force-fail runs (bulk)', '/api/runs/bulk/fail', takesBody, async (ctx) => { ctx.body = await tasks.bulk('fail', ctx.request.body, actorOf(ctx)); });
  for (const op of ['release', 'recover', 'fail', 'retry'] as const) {
    r.post(`Force-${op} a run (operator)`, `/api/runs/:id/${op}`, takesBody, async (ctx) => {
      ctx.body = await tasks.force(op, ctx.params.id, ctx.request.body, actorOf(ctx));
      if (op === 'retry') ctx.status = 201;
    });
  }

  r.get('Scheduler state', '/api/scheduler', async (ctx) => { ctx.body = await tasks.scheduler(); });
  r.get('Scheduler backlog (queued runs)', '/api/scheduler/backlog', async (ctx) => { ctx.body = await tasks.backlog(queryInt(ctx.query, 'limit', 100, 1000) || 100); });
  for (const op of ['pause', 'resume', 'drain'] as const) {
    r.post(`Scheduler ${op}`, `/api/scheduler/${op}`, bodyFields(SCHEDULER_FIELDS), async (ctx) => { ctx.body = await tasks.setScheduler(op, ctx.request.body, actorOf(ctx)); });
  }

  r.post('Claim the next task run (agent; wait:true long-polls)', '/api/agent/tasks/claim-next', requires('session'), takesBody, async (ctx) => {
    const caller = await callerOf(ctx, d);
    // NOTE: only a long poll waits, so only a long poll is ended by its client going away (claimNext checks `wait`).
    // The response's `close`, not the request's: the request closed once its body was read, before this listened.
    let signal: AbortSignal | undefined;
    if ((ctx.request.body as { wait?: unknown } | undefined)?.wait === true) {
      const abort = new AbortController();
      ctx.res.once('close', () => { if (!ctx.res.writableEnded) abort.abort(); });
      signal = abort.signal;
    }
    const out = await tasks.claimNext(caller, ctx.request.body, signal);
    if (out) ctx.body = out;
    else ctx.status = 204;
  });
  for (const op of ['heartbeat', 'complete', 'fail', 'release'] as const) {
    r.post(`Agent ${op} of its leased run`, `/api/agent/tasks/:run_id/${op}`, requires('session'), takesBody, async (ctx) => {
      const caller = await callerOf(ctx, d);
      ctx.body = await tasks[op](caller, ctx.params.run_id, ctx.request.body);
    });
  }
  return r;
}
