import Router from '@koa/router';
import type { Context } from 'koa';
import type { FeatureDeps } from './types.ts';
import { queryString } from './params.ts';

/** roleRoutes serves the roles this service resolves for work nobody named an agent for (runtime/agents/roles.ts). */
export function roleRoutes(deps: FeatureDeps): Router {
  const { roles, workspaces } = deps;
  const router = new Router({ prefix: '/api/roles' });
  const workspace = async (ctx: Context) => {
    const ref = queryString(ctx.query, 'workspace');
    return ref ? workspaces.get(ref) : undefined;
  };
  router.get('List roles, resolved for an optional workspace', '/', async (ctx) => {
    ctx.body = { roles: await roles.list(await workspace(ctx)) };
  });
  router.get('Get one role, resolved for an optional workspace', '/:role', async (ctx) => {
    ctx.body = { role: await roles.get(ctx.params.role, await workspace(ctx)) };
  });
  return router;
}
