import Router from '@koa/router';
import type { Context } from 'koa';
import { DELIVERY_HEADER, RateLimitedError, SIGNATURE_HEADER, TIMESTAMP_HEADER, type WebhookReceiver } from '../runtime/automation/index.ts';
import { takesBody } from './body-rule.ts';
import { requires } from './auth.ts';

/**
 * webhookRoutes receives signed webhook deliveries for webhook triggers. These routes are
 * exempt from operator authentication (api/auth.ts): the signature is the credential. The body is JSON; the
 * signature covers it byte for byte. Answers: 202 `{run}`, 401 bad signature or timestamp, 409 replay, 404 no
 * such endpoint, 429 (with Retry-After) over the endpoint's rate of verified deliveries or over the source
 * address's budget of failed ones, 503 the trigger's secret does not resolve. The source is the socket's address
 * (`app.proxy` is off: a forwarded-for header is the sender's to forge).
 */
export function webhookRoutes(webhooks: WebhookReceiver): Router {
  const router = new Router({ prefix: '/api/webhooks' });
  const accept = async (ctx: Context, workspace?: string) => {
    const raw = (ctx.request as { rawBody?: string }).rawBody ?? '';
    try {
      const run = await webhooks.accept({
        workspace, endpoint: ctx.params.endpoint, timestamp: ctx.get(TIMESTAMP_HEADER) || undefined, signature: ctx.get(SIGNATURE_HEADER) || undefined,
        deliveryId: ctx.get(DELIVERY_HEADER) || undefined, source: ctx.ip, rawBody: raw, payload: ctx.request.body ?? {},
      });
      ctx.status = 202;
      ctx.body = { accepted: true, run_id: run.id, run };
    } catch (err) {
      if (err instanceof RateLimitedError) ctx.set('Retry-After', String(err.retryAfterS));
      throw err;
    }
  };
  router.post('Deliver a global webhook (signed: X-SVC-Webhook-Timestamp, X-SVC-Webhook-Signature)', '/global/:endpoint', requires('signature'), takesBody, (ctx) => accept(ctx));
  router.post('Deliver a workspace webhook (signed: X-SVC-Webhook-Timestamp, X-SVC-Webhook-Signature)', '/workspaces/:workspace_id/:endpoint', requires('signature'), takesBody, (ctx) => accept(ctx, ctx.params.workspace_id));
  return router;
}
