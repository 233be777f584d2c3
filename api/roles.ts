import Router from '@koa/router';
import type { FeatureDeps } from './app.ts';

/** roleRoutes serves the roles family (being built). */
export function roleRoutes(_deps: FeatureDeps): Router {
  return new Router({ prefix: '/api/roles' });
}
