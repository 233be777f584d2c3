import Router from '@koa/router';
import type { Context } from 'koa';
import { RETRY_FIELDS, TRIGGER_FIELDS, type DreamService } from '../runtime/memory/dream-service.ts';
import { bodyFields } from './body-rule.ts';
import { memoryErrors } from './memory-ledgers.ts';
import { bodyObject, queryInt, queryString } from './params.ts';

/** first reads a query parameter under its name or its alias (gaps §5.1 list parameters: `workspace` = `workspace_id`). */
const first = (ctx: Context, ...names: string[]) => names.map((n) => queryString(ctx.query, n)).find((v) => v !== undefined);

/**
 * memoryDreamRoutes serves dream runs (spec/endpoints.md "Memory", gaps §5.2): list, status, trigger, get, retry.
 * Reads need the reader role, trigger and retry operator (api/auth.ts).
 */
export function memoryDreamRoutes(deps: { dreams: DreamService }): Router {
  const { dreams } = deps;
  const router = new Router({ prefix: '/api/memory/dreams' });
  router.get('List dream runs (scope, workspace, agent, tier, status, limit)', '/', memoryErrors, async (ctx) => {
    ctx.body = {
      dreams: await dreams.list({
        scope: first(ctx, 'scope'), workspace_id: first(ctx, 'workspace_id', 'workspace'), agent_name: first(ctx, 'agent_name', 'agent'),
        agent_tier: first(ctx, 'agent_tier', 'tier'), status: first(ctx, 'status'), limit: queryInt(ctx.query, 'limit', 50, 1000) || 50,
      }),
    };
  });
  router.get('The newest dream run of every scope', '/status', memoryErrors, async (ctx) => {
    ctx.body = { dreams: await dreams.status() };
  });
  router.post('Trigger a dream {scope?, workspace_id?, agent_name?, agent_tier?, force?}: gated unless force; answers {dream, triggered, reason}', '/trigger', memoryErrors, bodyFields(TRIGGER_FIELDS), async (ctx) => {
    ctx.body = await dreams.trigger(bodyObject(ctx.request.body ?? {}));
  });
  router.get('Get a dream run', '/:dream_id', memoryErrors, async (ctx) => {
    ctx.body = { dream: await dreams.get(ctx.params.dream_id) };
  });
  router.post('Retry a failed dream run {failure_id?, force?}; answers {dream, retried, reason}', '/:dream_id/retry', memoryErrors, bodyFields(RETRY_FIELDS), async (ctx) => {
    ctx.body = await dreams.retry(ctx.params.dream_id, bodyObject(ctx.request.body ?? {}));
  });
  return router;
}
