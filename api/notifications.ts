import Router from '@koa/router';
import type { PresetService } from '../runtime/notifications/preset-service.ts';
import type { DeliveryRecord } from '../runtime/notifications/types.ts';
import { InputError } from '../store/errors.ts';
import type { NotificationStore } from '../store/notification-store.ts';
import { queryBool, queryInt, queryString } from './params.ts';
import { takesBody } from './body-rule.ts';

type Query = Record<string, string | string[] | undefined>;
const STATUSES = ['pending', 'delivered', 'failed', 'skipped'];

/** optionalBool reads a boolean query filter: absent means "either". */
const optionalBool = (q: Query, name: string) => (queryString(q, name) === undefined ? undefined : queryBool(q, name));

/** notificationRoutes serves the five preset routes and the delivery status. */
export function notificationRoutes(deps: { presets: PresetService; notifications: NotificationStore }): Router {
  const { presets } = deps;
  const router = new Router({ prefix: '/api/notifications' });
  router.get('List notification presets (query enabled, built_in, name, limit)', '/presets', async (ctx) => {
    ctx.body = await presets.list({
      enabled: optionalBool(ctx.query, 'enabled'), built_in: optionalBool(ctx.query, 'built_in'),
      name: queryString(ctx.query, 'name'), limit: queryInt(ctx.query, 'limit', 0) || undefined,
    });
  });
  router.post('Create a notification preset (strict JSON)', '/presets', takesBody, async (ctx) => {
    ctx.status = 201;
    ctx.body = { preset: await presets.create(ctx.request.body) };
  });
  router.get('Get a notification preset', '/presets/:name', async (ctx) => {
    ctx.body = { preset: await presets.get(ctx.params.name) };
  });
  router.put('Update a notification preset (events, targets, filter, enabled)', '/presets/:name', takesBody, async (ctx) => {
    ctx.body = { preset: await presets.update(ctx.params.name, ctx.request.body) };
  });
  router.delete('Delete a notification preset (built-ins cannot be deleted)', '/presets/:name', async (ctx) => {
    await presets.delete(ctx.params.name);
    ctx.status = 204;
  });
  router.get('List notification deliveries, newest first (query preset, event, bridge, status, limit)', '/deliveries', async (ctx) => {
    const status = queryString(ctx.query, 'status');
    if (status && !STATUSES.includes(status)) throw new InputError(`query parameter "status" must be one of ${STATUSES.join(', ')}`, 'invalid_query', { status });
    const { rows, total } = await deps.notifications.listDeliveries({
      preset: queryString(ctx.query, 'preset'), event: queryString(ctx.query, 'event'), bridge: queryString(ctx.query, 'bridge'), status,
      limit: queryInt(ctx.query, 'limit', 100, 1000),
    });
    ctx.body = { deliveries: rows.map((r) => JSON.parse(r) as DeliveryRecord), total };
  });
  return router;
}
