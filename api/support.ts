import Router from '@koa/router';
import { REQUEST_FIELDS, type SupportBundles } from '../runtime/support/support-bundles.ts';
import { bodyFields } from './body-rule.ts';
import { bodyObject } from './params.ts';
import { requires } from './auth.ts';

/** supportRoutes serves support bundles: ask for one (202 with its operation), follow it, download its archive. */
export function supportRoutes(deps: { support: SupportBundles }): Router {
  const router = new Router({ prefix: '/api/support/bundles' });
  router.post('Request a support bundle (body {yes: true}); answers 202 with the operation', '/', requires('admin'), bodyFields(REQUEST_FIELDS), async (ctx) => {
    const operation = await deps.support.request(bodyObject(ctx.request.body ?? {}));
    ctx.status = 202;
    ctx.set('Location', operation.status_url);
    ctx.body = { operation };
  });
  router.get('Get a support bundle operation', '/:operation_id', requires('admin'), async (ctx) => {
    ctx.body = { operation: await deps.support.get(ctx.params.operation_id) };
  });
  router.get('Download a completed support bundle (application/gzip)', '/:operation_id/download', requires('admin'), async (ctx) => {
    const { fileName, bytes } = await deps.support.download(ctx.params.operation_id);
    ctx.type = 'application/gzip';
    ctx.set('Content-Disposition', `attachment; filename="${fileName}"`);
    ctx.body = bytes;
  });
  return router;
}
