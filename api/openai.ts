import Router from '@koa/router';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import type { ModelCatalog } from '../runtime/models/catalog.ts';
import type { CatalogModel } from '../runtime/models/types.ts';
import { sendAnswer } from './cached-answer.ts';
import { toServiceError } from './errors.ts';
import { queryString } from './params.ts';

/** OPENAI_PREFIX is where the OpenAI-compatible surface lives. */
export const OPENAI_PREFIX = '/api/openai/v1';

/** openaiCode is the OpenAI-style error `code` for a status. */
function openaiCode(status: number): string {
  const known: Record<number, string> = { 400: 'invalid_request', 401: 'unauthorized', 403: 'forbidden', 404: 'not_found', 413: 'request_too_large', 503: 'service_unavailable' };
  return known[status] ?? (status >= 500 ? 'internal_error' : 'api_error');
}

/**
 * openaiErrors answers every error under /api/openai/ in OpenAI's shape, `{error: {message, type, param: null,
 * code}}`, authentication's included: mounted before the auth middleware, so an OpenAI client reads
 * a 401 as it reads OpenAI's own. Anything untyped is a logged 500, as everywhere.
 */
export function openaiErrors(logger: Logger): Middleware {
  return async (ctx, next) => {
    if (!ctx.path.startsWith('/api/openai/')) return next();
    let status: number;
    let message: string;
    try {
      await next();
      if (ctx.status !== 404 && ctx.status !== 405) return;
      if (ctx.body !== undefined) return;
      status = ctx.status;
      message = status === 404 ? `no route for ${ctx.method} ${ctx.path}` : `${ctx.method} is not allowed on ${ctx.path}`;
    } catch (err) {
      const typed = toServiceError(err);
      if (!typed) logger.error({ err, method: ctx.method, path: ctx.path }, 'unhandled error');
      status = typed?.status ?? 500;
      message = typed?.message ?? 'internal error; see the service log';
    }
    ctx.status = status;
    ctx.body = { error: { message, type: status >= 500 ? 'server_error' : 'invalid_request_error', param: null, code: openaiCode(status) } };
  };
}

/** AVAILABILITY_RANK orders the models of one id: the one a client can most likely use stands for the id. */
const AVAILABILITY_RANK: Record<CatalogModel['availability_state'], number> = { available_live: 0, available_stale: 1, unknown: 2, unavailable_stale: 3, unavailable_live: 4 };

/** better says whether `a` should stand for its id rather than `b`: available, then featured, then not deprecated, then fresh. */
function better(a: CatalogModel, b: CatalogModel): boolean {
  const rank = (m: CatalogModel) => [AVAILABILITY_RANK[m.availability_state] ?? 2, m.featured ? 0 : 1, m.deprecated ? 1 : 0, m.stale ? 1 : 0];
  const [x, y] = [rank(a), rank(b)];
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i] < y[i];
  return false;
}

/**
 * uniqueIds keeps one model per model id, in the order the ids first appear, each with every provider that lists
 * that id. NOTE: an OpenAI client takes a list's ids as unique, and the catalog holds one id under several
 * providers (each agent reporting it, a provider and a router that resells it).
 */
function uniqueIds(models: CatalogModel[]): { model: CatalogModel; providers: string[] }[] {
  const byId = new Map<string, { model: CatalogModel; providers: string[] }>();
  for (const m of models) {
    const seen = byId.get(m.model_id);
    if (!seen) byId.set(m.model_id, { model: m, providers: [m.provider_id] });
    else {
      seen.providers.push(m.provider_id);
      if (better(m, seen.model)) seen.model = m;
    }
  }
  return [...byId.values()];
}

/** openaiRoutes serves `GET /api/openai/v1/models`: the curated catalog in OpenAI's list shape, one entry per model id. */
export function openaiRoutes(deps: { catalog: ModelCatalog }): Router {
  const router = new Router({ prefix: OPENAI_PREFIX });
  router.get('List the curated models in the OpenAI list shape (query provider_id)', '/models', async (ctx) => {
    const provider = queryString(ctx.query, 'provider_id');
    // NOTE: stale rows are included: a client picking a model is better served by the last known list than none.
    await sendAnswer(ctx, await deps.catalog.answer('openai', { view: 'curated', provider_id: provider, include_stale: true }, (models) => ({
      object: 'list',
      data: uniqueIds(models).map(({ model: m, providers }) => ({
        id: m.model_id, object: 'model', created: m.release_date ? Math.floor(Date.parse(m.release_date) / 1000) || 0 : 0, owned_by: m.provider_id,
        svc: {
          provider_id: m.provider_id, model_id: m.model_id, display_name: m.display_name, available: m.available, availability_state: m.availability_state,
          stale: m.stale, context_window: m.context_window, max_output_tokens: m.max_output_tokens, supports_tools: m.supports_tools,
          supports_reasoning: m.supports_reasoning, default_reasoning_effort: m.default_reasoning_effort, cost: m.cost, featured: m.featured, deprecated: m.deprecated,
          sources: m.sources.map((s) => s.source_id), provider_ids: providers,
        },
      })),
    })));
  });
  return router;
}
