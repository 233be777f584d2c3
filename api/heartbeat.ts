import Router from '@koa/router';
import type { FeatureDeps } from './app.ts';

/** heartbeatRoutes serves GET/DELETE /api/agents/{agent_name}/heartbeat (being built). */
export function heartbeatRoutes(_deps: FeatureDeps): Router {
  return new Router({ prefix: '/api/agents' });
}
