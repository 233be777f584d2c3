import Router from '@koa/router';
import type { FeatureDeps } from './app.ts';

/** skillRoutes serves the skills family (being built). */
export function skillRoutes(_deps: FeatureDeps): Router {
  return new Router({ prefix: '/api/skills' });
}
