import Router from '@koa/router';
import type { Context } from 'koa';
import type { ModelCatalog } from '../runtime/models/catalog.ts';
import { CURATE_FIELDS, type Curations } from '../runtime/models/curation.ts';
import type { ListQuery } from '../runtime/models/types.ts';
import { ROLES, type Role } from '../runtime/process/auth.ts';
import { ForbiddenError, InputError, ValidationError } from '../store/errors.ts';
import { bodyFields } from './body-rule.ts';
import { sendAnswer } from './cached-answer.ts';
import { bodyObject, queryBool, queryString } from './params.ts';

/** REFRESH_FIELDS are the fields of a refresh request body. */
const REFRESH_FIELDS = ['source_id', 'force', 'request_id'];

/** listQuery reads a listing's query: view (curated|all), source_id (alias source), refresh, include_stale. */
function listQuery(ctx: Context, provider?: string): ListQuery & { refresh: boolean } {
  const view = queryString(ctx.query, 'view') ?? 'curated';
  if (view !== 'curated' && view !== 'all') throw new InputError('query parameter "view" must be curated or all', 'invalid_query', { view: 'must be curated or all' });
  const a = queryString(ctx.query, 'source_id');
  const b = queryString(ctx.query, 'source');
  if (a && b && a !== b) throw new InputError('query parameters "source_id" and "source" differ', 'invalid_query', { source_id: a, source: b });
  return { view, provider_id: provider ?? queryString(ctx.query, 'provider_id'), source_id: a ?? b, include_stale: queryBool(ctx.query, 'include_stale'), refresh: queryBool(ctx.query, 'refresh') };
}

/**
 * modelCatalogRoutes serves the model catalog: listings (the
 * curated view by default), source statuses, refreshes (`{error, sources}`: 200 with an empty error; a failure
 * answers its status with the error; 202 while still running) and curation (a convenience over the `model.curation` record).
 * Roles: reads need reader, refresh and curate operator (api/auth.ts).
 */
export function modelCatalogRoutes(deps: { catalog: ModelCatalog; curations: Curations }): Router {
  const { catalog, curations } = deps;
  const router = new Router({ prefix: '/api/model-catalog' });
  const list = async (ctx: Context, provider?: string) => {
    const q = listQuery(ctx, provider);
    // NOTE: a listing is a read (reader), but `refresh=true` forces upstream requests, which the refresh routes keep
    // for operators: the auth middleware sees only the method and path, so the query's part is checked here.
    const principal = ctx.state.principal as { name: string; role?: Role } | undefined;
    if (q.refresh && principal && (!principal.role || ROLES.indexOf(principal.role) < ROLES.indexOf('operator'))) {
      throw new ForbiddenError(`${principal.name} (${principal.role ?? 'no role'}) may not refresh the model catalog (refresh=true); it needs operator`, 'forbidden', { required_role: 'operator' });
    }
    // NOTE: `refresh=true` refreshes (forced) before listing; a failed source shows in the statuses, not as an error.
    if (q.refresh) await catalog.refresh({ provider: q.provider_id, source: q.source_id, force: true });
    await sendAnswer(ctx, await catalog.answer('models', q, (models) => ({ models })));
  };
  const refresh = async (ctx: Context, provider?: string) => {
    const body = bodyObject(ctx.request.body ?? {});
    const problems: Record<string, string> = {};
    if (body.force !== undefined && typeof body.force !== 'boolean') problems.force = 'must be true or false';
    for (const f of ['source_id', 'request_id']) if (body[f] !== undefined && typeof body[f] !== 'string') problems[f] = 'must be a string';
    if (Object.keys(problems).length) throw new ValidationError(`invalid refresh request: ${Object.entries(problems).map(([k, v]) => `${k} ${v}`).join('; ')}`, 'invalid_body', problems);
    const source = (body.source_id as string | undefined)?.trim() || queryString(ctx.query, 'source_id') || queryString(ctx.query, 'source');
    const res = await catalog.refresh({ provider, source, force: body.force === true });
    ctx.status = res.status;
    ctx.body = { error: res.error, sources: res.sources };
  };
  router.get('List catalog models (query provider_id, view=curated|all, source_id, refresh, include_stale)', '/models', (ctx) => list(ctx));
  router.get('List every source\'s status', '/sources/status', async (ctx) => {
    ctx.body = { sources: await catalog.statuses() };
  });
  router.post('Refresh every source now (body {source_id?, force?, request_id?})', '/models/refresh', bodyFields(REFRESH_FIELDS), (ctx) => refresh(ctx));
  router.get('List one provider\'s catalog models (query view, source_id, refresh, include_stale)', '/providers/:provider_id/models', (ctx) => list(ctx, ctx.params.provider_id));
  router.get('List one provider\'s source statuses', '/providers/:provider_id/models/status', async (ctx) => {
    ctx.body = { sources: await catalog.statuses(ctx.params.provider_id) };
  });
  router.post('Refresh one provider\'s sources now (body {source_id?, force?, request_id?})', '/providers/:provider_id/models/refresh', bodyFields(REFRESH_FIELDS), (ctx) => refresh(ctx, ctx.params.provider_id));
  router.post('Curate a model {model_id, hidden?, featured?, deprecated?, default_effort?}: writes its model.curation record', '/providers/:provider_id/models/curate', bodyFields(CURATE_FIELDS), async (ctx) => {
    ctx.body = await curations.curate(ctx.params.provider_id, bodyObject(ctx.request.body ?? {}), ctx.state.principal?.role);
  });
  return router;
}
