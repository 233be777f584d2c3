import Router from '@koa/router';
import type { Context, Middleware, Next } from 'koa';
import type { Logger } from 'pino';
import { CREATE_FIELDS, PATCH_FIELDS, type LoopDefinitions } from '../runtime/loops/definitions.ts';
import type { LoopEngine } from '../runtime/loops/engine.ts';
import type { LoopRunViews } from '../runtime/loops/runs.ts';
import { unknownKeys } from '../runtime/validation/field-validation.ts';
import { ROLES, type Role } from '../runtime/process/auth.ts';
import { ConflictError, ForbiddenError, InputError, ValidationError } from '../store/errors.ts';
import { bodyFields, takesBody } from './body-rule.ts';
import { requires } from './auth.ts';
import { errorBody } from './errors.ts';
import { bodyObject, queryBool, queryFieldValidation, queryInt, queryString, setWarnings } from './params.ts';
import { streamFrames } from './sse.ts';
import type { StreamSlots } from './stream-slots.ts';

/** START_FIELDS are the fields of a run start. */
export const START_FIELDS = ['inputs', 'parent_loop_run_id', 'config_overrides', 'network_participation'] as const;

/**
 * startFields is the start route's body rule: unknown fields are refused with 400 (the original's strict
 * decoder), unless `?field_validation=warn|ignore` asks to drop them, as bodyFields does for other routes.
 */
const startFields: Middleware = Object.assign((ctx: Context, next: Next) => {
  const unknown = unknownKeys(ctx.request.body, START_FIELDS);
  if (unknown.length) {
    const mode = queryFieldValidation(ctx.query);
    if (mode === 'strict') throw new InputError(`unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((u) => `"${u}"`).join(', ')} in a run start; fields are ${START_FIELDS.join(', ')}`, 'unknown_field', Object.fromEntries(unknown.map((u) => [u, 'unknown field'])));
    if (mode === 'warn') setWarnings(ctx, unknown.map((u) => `unknown field "${u}"`));
    ctx.request.body = Object.fromEntries(Object.entries(ctx.request.body as Record<string, unknown>).filter(([k]) => (START_FIELDS as readonly string[]).includes(k)));
  }
  return next();
}, bodyFields(START_FIELDS));

/**
 * startsRun is the start route's role rule: a dry run (`?dry=true`) writes nothing and answers the resolved plan, so
 * it needs reader, as reading the definition does; a start needs operator. NOTE: the route's own role is reader and
 * this checks the query's part, before the body is read, as the model catalog's `refresh=true` is checked.
 */
const startsRun: Middleware = (ctx: Context, next: Next) => {
  const principal = ctx.state.principal as { name: string; role?: Role } | undefined;
  if (!queryBool(ctx.query, 'dry') && principal && (!principal.role || ROLES.indexOf(principal.role) < ROLES.indexOf('operator'))) {
    throw new ForbiddenError(`${principal.name} (${principal.role ?? 'no role'}) may not start a loop run; it needs operator (a dry run, ?dry=true, needs reader)`, 'forbidden', { required_role: 'operator' });
  }
  return next();
};

/** LoopRouteDeps is what the loop routes call. */
export interface LoopRouteDeps {
  definitions: LoopDefinitions;
  engine: LoopEngine;
  runs: LoopRunViews;
  logger: Logger;
  /** The open-stream caps a run's event stream counts against. */
  streams: StreamSlots;
}

/**
 * writeOpts are a definition write's options; the warnings of `?field_validation=warn` (unknown spec fields dropped)
 * become `Warning` headers as the resource routes send them.
 */
const writeOpts = (ctx: Context) => {
  const warnings: string[] = [];
  const done = async <T>(p: Promise<T>): Promise<T> => {
    const v = await p;
    // NOTE: after the body rule's own warnings (unknown top-level fields), not instead of them.
    const before = [ctx.response.headers.warning ?? []].flat().map(String);
    if (warnings.length) ctx.set('Warning', [...before, ...warnings.map((x) => `299 - ${JSON.stringify(x)}`)]);
    return v;
  };
  return { opts: { role: (ctx.state.principal as { role?: string } | undefined)?.role, fieldValidation: queryFieldValidation(ctx.query), warnings }, done };
};

/** versionConflictBody answers 409 `loop version conflict` with `current_version` at the top. */
async function withConflictBody(ctx: Context, next: Next): Promise<void> {
  try {
    await next();
  } catch (err) {
    if (err instanceof ConflictError && err.code === 'loop_version_conflict') {
      ctx.status = 409;
      ctx.body = { ...errorBody(409, err.code, err.message, err.evidence), current_version: err.evidence.current_version };
      return;
    }
    throw err;
  }
}

/**
 * loopRoutes serves the loop family: definitions as views over `loop`
 * records, run start, the run list, detail, turns, controls and the event stream. Roles (api/auth.ts): reads need
 * reader, and so do the ones that write nothing (validate, a dry run); every write needs operator; writing a
 * definition's `command` criterion needs admin (SecurityPolicy.admit), but node positions and run config do not.
 */
export function loopRoutes(d: LoopRouteDeps): Router {
  const { definitions, engine, runs } = d;
  const r = new Router({ prefix: '/api/workspaces/:workspace_id' });
  const ws = (ctx: Context) => definitions.workspaceId(ctx.params.workspace_id);

  r.get('List loop definitions', '/loops', async (ctx) => { ctx.body = { loops: await definitions.list(ctx.params.workspace_id) }; });
  r.post('Create a loop definition {definition?, fork_from_name?}', '/loops', bodyFields(CREATE_FIELDS), async (ctx) => {
    ctx.status = 201;
    const w = writeOpts(ctx);
    ctx.body = { loop: await w.done(definitions.create(ctx.params.workspace_id, bodyObject(ctx.request.body ?? {}), w.opts)) };
  });
  r.get('Get a loop definition', '/loops/:name', async (ctx) => { ctx.body = { loop: await definitions.get(ctx.params.workspace_id, ctx.params.name) }; });
  r.patch('Replace a loop definition {expected_version?, definition}; a stale version is 409 loop version conflict', '/loops/:name', withConflictBody, bodyFields(PATCH_FIELDS), async (ctx) => {
    const w = writeOpts(ctx);
    ctx.body = { loop: await w.done(definitions.patch(ctx.params.workspace_id, ctx.params.name, bodyObject(ctx.request.body ?? {}), w.opts)) };
  });
  r.delete('Delete a loop definition', '/loops/:name', async (ctx) => {
    await definitions.delete(ctx.params.workspace_id, ctx.params.name);
    ctx.status = 204;
  });
  // NOTE: a lint writes nothing, so it needs what reading the definition needs.
  r.post('Lint a loop definition (the stored one, or {definition}): {valid, errors}', '/loops/:name/validate', requires('reader'), bodyFields(['definition']), async (ctx) => {
    ctx.body = await definitions.validate(ctx.params.workspace_id, ctx.params.name, bodyObject(ctx.request.body ?? {}), queryFieldValidation(ctx.query));
  });
  r.get('Get a loop definition\'s run config', '/loops/:name/config', async (ctx) => { ctx.body = await definitions.getConfig(ctx.params.workspace_id, ctx.params.name); });
  r.put('Replace a loop definition\'s run config {config}', '/loops/:name/config', withConflictBody, bodyFields(['config']), async (ctx) => {
    const w = writeOpts(ctx);
    ctx.body = await w.done(definitions.putConfig(ctx.params.workspace_id, ctx.params.name, bodyObject(ctx.request.body ?? {}), w.opts));
  });
  r.get('Get a loop definition\'s node positions', '/loops/:name/annotations', async (ctx) => { ctx.body = await definitions.getAnnotations(ctx.params.workspace_id, ctx.params.name); });
  r.put('Replace a loop definition\'s node positions {annotations: [{node_id, x, y}]}', '/loops/:name/annotations', withConflictBody, bodyFields(['annotations']), async (ctx) => {
    const w = writeOpts(ctx);
    ctx.body = await w.done(definitions.putAnnotations(ctx.params.workspace_id, ctx.params.name, bodyObject(ctx.request.body ?? {}), w.opts));
  });
  r.post('Start a loop run (201 {run}); ?dry=true answers the resolved plan (200 {dry_run})', '/loops/:name/run', requires('reader'), startsRun, startFields, async (ctx) => {
    const body = bodyObject(ctx.request.body ?? {});
    const dry = queryBool(ctx.query, 'dry');
    const principal = ctx.state.principal as { name?: string } | undefined;
    const req = {
      workspace_id: await ws(ctx), loop_name: ctx.params.name, inputs: body.inputs as Record<string, unknown> | undefined,
      parent_loop_run_id: optionalString(body, 'parent_loop_run_id'), config_overrides: body.config_overrides as never,
      network_participation: body.network_participation as { mode?: string } | undefined,
      started_by_kind: 'operator', started_by_ref: principal?.name ?? 'anonymous', started_origin_kind: 'catalog', started_origin_ref: ctx.params.name,
    };
    if (dry) {
      ctx.body = { dry_run: await engine.start(req, { dry: true }) };
      return;
    }
    ctx.status = 201;
    ctx.body = { run: await engine.startRun(req) };
  });

  r.get('List loop runs with aggregates (?loop, status, origin, origin_session, live, limit)', '/loop-runs', async (ctx) => {
    const q = ctx.query;
    if (q.live !== undefined && (q.live === '' || (Array.isArray(q.live) && q.live.some((v) => v === '')))) {
      throw new InputError('query parameter "live" must be true or false when present', 'invalid_query', { live: '' });
    }
    ctx.body = await runs.list(await ws(ctx), {
      loop: queryString(q, 'loop'), status: queryString(q, 'status'), origin: queryString(q, 'origin'), origin_session: queryString(q, 'origin_session'),
      live: q.live === undefined ? undefined : queryBool(q, 'live'), limit: queryInt(q, 'limit', 50, 500) || 50,
    });
  });
  r.get('Get a loop run (LoopRunDetail)', '/loop-runs/:run_id', async (ctx) => { ctx.body = await runs.detail(await ws(ctx), ctx.params.run_id); });
  r.get('List a loop run\'s turns (every node execution)', '/loop-runs/:run_id/turns', async (ctx) => { ctx.body = await runs.turns(await ws(ctx), ctx.params.run_id); });
  r.post('Stop a loop run (failed, cause operator_stop); 409 when it already ended', '/loop-runs/:run_id/stop', async (ctx) => {
    await engine.stopRun(ctx.params.run_id, 'stopped by an operator', await ws(ctx));
    ctx.body = { ok: true };
  });
  r.post('Pause a running loop run at its next generation boundary (body: a free-form object, not read)', '/loop-runs/:run_id/pause', takesBody, async (ctx) => {
    controlBody(ctx);
    await engine.pauseRun(ctx.params.run_id, await ws(ctx));
    ctx.body = { ok: true };
  });
  r.post('Resume a paused loop run (or cancel a pending pause)', '/loop-runs/:run_id/resume', async (ctx) => {
    await engine.resumeRun(ctx.params.run_id, await ws(ctx));
    ctx.body = { ok: true };
  });
  r.post('Decide the gate a loop run waits on {gate_id, decision: approve|request_changes|reject}', '/loop-runs/:run_id/approve', bodyFields(['gate_id', 'decision']), async (ctx) => {
    const body = bodyObject(ctx.request.body ?? {});
    const problems: Record<string, string> = {};
    for (const k of ['gate_id', 'decision']) {
      if (body[k] === undefined || body[k] === null || (typeof body[k] === 'string' && !(body[k] as string).trim())) problems[k] = 'is required';
      else if (typeof body[k] !== 'string') problems[k] = 'must be a string';
    }
    if (Object.keys(problems).length) throw new ValidationError(`invalid approval: ${Object.entries(problems).map(([k, v]) => `${k} ${v}`).join('; ')}`, 'invalid_body', problems);
    await engine.approve(ctx.params.run_id, (body.gate_id as string).trim(), (body.decision as string).trim(), await ws(ctx));
    ctx.body = { ok: true };
  });
  r.get('Stream a loop run\'s events (SSE, id: <seq>; resumes after max(Last-Event-ID, ?after_sequence); ends after the terminal status_changed)', '/loop-runs/:run_id/events', async (ctx) => {
    const frames = await runs.events(await ws(ctx), ctx.params.run_id, ctx.get('Last-Event-ID') || undefined, queryString(ctx.query, 'after_sequence'));
    await streamFrames(ctx, frames, d.logger, 'loop run event stream', d.streams);
  });
  return r;
}

/**
 * controlBody checks the pause body: a free-form object (the contract's), none or `{}`; its fields are not read.
 * Any other JSON value (a list, a string) is 422 naming the body. NOTE: stop and resume take no body (the contract
 * gives them none), so a stray field there is refused rather than ignored.
 */
function controlBody(ctx: Context): void {
  bodyObject(ctx.request.body ?? {});
}

function optionalString(body: Record<string, unknown>, k: string): string | undefined {
  const v = body[k];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new InputError(`${k} must be a string`, 'invalid_body', { [k]: 'must be a string' });
  return v;
}
