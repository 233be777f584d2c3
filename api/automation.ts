import Router from '@koa/router';
import type { Context } from 'koa';
import type { AutomationService } from '../runtime/automation/index.ts';
import type { RunFilter, RunStatus } from '../store/automation-store.ts';
import { ValidationError } from '../store/errors.ts';
import { bodyObject, queryInt, queryString } from './params.ts';
import { takesBody } from './body-rule.ts';

const STATUSES: RunStatus[] = ['queued', 'running', 'succeeded', 'failed', 'skipped'];

/** runFilter reads `status` and `limit` (and, for the runs list, `job` and `trigger`) of a runs query. */
function runFilter(ctx: Context): RunFilter {
  const status = queryString(ctx.query, 'status');
  if (status && !STATUSES.includes(status as RunStatus)) throw new ValidationError(`status must be one of ${STATUSES.join(', ')}`, 'invalid_query', { status: `must be one of ${STATUSES.join(', ')}` });
  return {
    job_id: queryString(ctx.query, 'job') ?? queryString(ctx.query, 'job_id'), trigger_id: queryString(ctx.query, 'trigger') ?? queryString(ctx.query, 'trigger_id'),
    status: status as RunStatus | undefined, limit: queryInt(ctx.query, 'limit', 100, 1000) || 100,
  };
}

/** fireBody reads the optional body of "fire now": `{workspace_id?, payload?}` (a global job needs workspace_id). */
function fireBody(ctx: Context): { workspace_id?: string; payload?: unknown } {
  const body = ctx.request.body === undefined ? {} : bodyObject(ctx.request.body);
  if (body.workspace_id !== undefined && typeof body.workspace_id !== 'string') throw new ValidationError('workspace_id must be a string', 'invalid_body', { workspace_id: 'must be a string' });
  return { workspace_id: (body.workspace_id as string | undefined) || undefined, payload: body.payload };
}

/**
 * automationRoutes serves the automation family (the automation toolset as routes): jobs and
 * triggers (their records with reconcile state, next fire time and last run), their run history, "fire now"
 * (operator), and the runs.
 */
export function automationRoutes(automation: AutomationService): Router {
  const router = new Router({ prefix: '/api/automation' });
  const ws = (ctx: Context) => queryString(ctx.query, 'workspace_id') ?? queryString(ctx.query, 'workspace');

  router.get('List automation jobs', '/jobs', async (ctx) => { ctx.body = { jobs: await automation.listJobs(ws(ctx)) }; });
  router.get('Get an automation job', '/jobs/:id', async (ctx) => { ctx.body = { job: await automation.getJob(ctx.params.id) }; });
  router.get('List an automation job\'s runs (newest first)', '/jobs/:id/history', async (ctx) => {
    const { status, limit } = runFilter(ctx);
    ctx.body = { runs: await automation.history('job', ctx.params.id, { status, limit }) };
  });
  router.post('Fire an automation job now (body {workspace_id?})', '/jobs/:id/trigger', takesBody, async (ctx) => {
    ctx.status = 202;
    ctx.body = { run: await automation.fireJob(ctx.params.id, fireBody(ctx)) };
  });
  router.get('List automation triggers', '/triggers', async (ctx) => { ctx.body = { triggers: await automation.listTriggers(ws(ctx)) }; });
  router.get('Get an automation trigger', '/triggers/:id', async (ctx) => { ctx.body = { trigger: await automation.getTrigger(ctx.params.id) }; });
  router.get('List an automation trigger\'s runs (newest first)', '/triggers/:id/history', async (ctx) => {
    const { status, limit } = runFilter(ctx);
    ctx.body = { runs: await automation.history('trigger', ctx.params.id, { status, limit }) };
  });
  router.post('Fire an automation trigger now (body {workspace_id?, payload?})', '/triggers/:id/trigger', takesBody, async (ctx) => {
    ctx.status = 202;
    ctx.body = { run: await automation.fireTrigger(ctx.params.id, fireBody(ctx)) };
  });
  router.get('List automation runs (query job, trigger, status, limit)', '/runs', async (ctx) => { ctx.body = { runs: await automation.listRuns(runFilter(ctx)) }; });
  router.get('Get an automation run', '/runs/:id', async (ctx) => { ctx.body = { run: await automation.getRun(ctx.params.id) }; });
  return router;
}
