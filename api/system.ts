import Router from '@koa/router';
import type { Metrics } from '../runtime/process/metrics.ts';
import { errorBody } from './errors.ts';
import type { Readiness } from './types.ts';
import { requires } from './auth.ts';


/** systemRoutes serves health, readiness, metrics and the OpenAPI document. */
export function systemRoutes(deps: { metrics: Metrics; readiness: Readiness; openapi: () => unknown; queueDepth?: () => Promise<Map<string, number>> }): Router {
  const router = new Router();
  router.get('Liveness: the process is up', '/healthz', requires('public'), (ctx) => {
    ctx.body = { status: 'ok' };
  });
  router.get('Readiness: Redis answers and the controllers run', '/readyz', requires('public'), async (ctx) => {
    const r = await deps.readiness();
    ctx.status = r.ready ? 200 : 503;
    ctx.body = r.ready ? { status: 'ready', checks: r.checks } : { ...errorBody(503, 'not_ready', 'not ready', r.checks), checks: r.checks };
  });
  router.get('Prometheus metrics', '/metrics', requires('public'), async (ctx) => {
    if (deps.queueDepth) {
      try {
        for (const [kind, n] of await deps.queueDepth()) deps.metrics.queueDepth.set({ kind }, n);
      } catch { /* queue depth is best effort; the rest of the metrics still answer */ }
    }
    ctx.type = deps.metrics.registry.contentType;
    ctx.body = await deps.metrics.registry.metrics();
  });
  router.get('This OpenAPI document', '/api/openapi.json', (ctx) => {
    ctx.body = deps.openapi();
  });
  return router;
}
