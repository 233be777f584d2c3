import Router from '@koa/router';
import { RETRY_FIELDS, TRIGGER_FIELDS, type DreamService } from '../runtime/memory/dream-service.ts';
import { bodyFields } from './body-rule.ts';
import { firstQuery, noDryRun } from './memory-params.ts';
import { bodyObject, queryInt } from './params.ts';

/**
 * memoryDreamRoutes serves dream runs: list, status, trigger, get, retry.
 * Reads need the reader role, trigger and retry operator (api/auth.ts). NOTE: a run's path is `dream_<id>`, the
 * only form run ids take, so `/trigger` and `/status` are not also read as run ids and `Allow` names only the
 * methods each path takes.
 */
export function memoryDreamRoutes(deps: { dreams: DreamService }): Router {
  const { dreams } = deps;
  const router = new Router({ prefix: '/api/memory/dreams', sensitive: true });
  router.get('List dream runs (scope, workspace, agent, tier, status, limit)', '/', async (ctx) => {
    ctx.body = {
      dreams: await dreams.list({
        scope: firstQuery(ctx, 'scope'), workspace_id: firstQuery(ctx, 'workspace_id', 'workspace'), agent_name: firstQuery(ctx, 'agent_name', 'agent'),
        agent_tier: firstQuery(ctx, 'agent_tier', 'tier'), status: firstQuery(ctx, 'status'), limit: queryInt(ctx.query, 'limit', 50, 1000) || 50,
      }),
    };
  });
  router.get('The newest dream run of every scope', '/status', async (ctx) => {
    ctx.body = { dreams: await dreams.status() };
  });
  router.post('Trigger a dream {scope?, workspace_id?, agent_name?, agent_tier?, force?}: gated unless force; answers {dream, triggered, reason}', '/trigger', noDryRun, bodyFields(TRIGGER_FIELDS), async (ctx) => {
    ctx.body = await dreams.trigger(bodyObject(ctx.request.body ?? {}));
  });
  router.get('Get a dream run', '/dream_:run', async (ctx) => {
    ctx.body = { dream: await dreams.get(`dream_${ctx.params.run}`) };
  });
  router.post('Retry a failed dream run {failure_id?, force?}; answers {dream, retried, reason}', '/dream_:run/retry', noDryRun, bodyFields(RETRY_FIELDS), async (ctx) => {
    ctx.body = await dreams.retry(`dream_${ctx.params.run}`, bodyObject(ctx.request.body ?? {}));
  });
  return router;
}
