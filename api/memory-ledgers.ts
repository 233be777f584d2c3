import Router from '@koa/router';
import type { Middleware } from 'koa';
import { PRUNE_FIELDS, REPLAY_FIELDS, type LedgerService } from '../runtime/memory/ledger-service.ts';
import { memoryErrorBody } from '../runtime/memory/errors.ts';
import { ServiceError } from '../store/errors.ts';
import { bodyFields } from './body-rule.ts';
import { bodyObject } from './params.ts';

/**
 * memoryErrors renders the memory family's error body `{code, message, details}` (spec/concepts.md "Errors": memory
 * endpoints; runtime/memory/errors.ts memoryErrorBody) for the typed errors of the routes it is placed on, with their
 * status. An error that is not typed goes on to the one error middleware (api/errors.ts), which logs it as the bug
 * it is; 401 and 403 keep the shape every family shares.
 */
export const memoryErrors: Middleware = async (ctx, next) => {
  try {
    await next();
  } catch (err) {
    if (!(err instanceof ServiceError) || err.status === 401 || err.status === 403) throw err;
    ctx.status = err.status;
    ctx.body = memoryErrorBody(err.status, err.code, err.message, err.evidence);
    if (err.status === 503) ctx.set('Retry-After', '1');
  }
};

/**
 * memoryLedgerRoutes serves session ledgers (spec/endpoints.md "Memory", gaps §5.3): read and replay under the
 * workspace, prune and repair under /api/memory/sessions. Reads need the reader role, the rest operator (api/auth.ts).
 */
export function memoryLedgerRoutes(deps: { ledgers: LedgerService }): Router {
  const { ledgers } = deps;
  const router = new Router();
  const base = '/api/workspaces/:workspace_id/memory/sessions/:session_id';
  router.get('Get a session memory ledger {events, meta}, verified against its checksum (409 memory.ledger_corrupt when not)', `${base}/ledger`, memoryErrors, async (ctx) => {
    ctx.body = await ledgers.get(ctx.params.workspace_id, ctx.params.session_id);
  });
  router.post('Replay a session memory ledger {include_tool_events?, include_memory?}', `${base}/replay`, memoryErrors, bodyFields(REPLAY_FIELDS), async (ctx) => {
    ctx.body = await ledgers.replay(ctx.params.workspace_id, ctx.params.session_id, bodyObject(ctx.request.body ?? {}));
  });
  router.post('Prune session memory ledgers stopped more than older_than_hours ago {older_than_hours, dry_run?}', '/api/memory/sessions/prune', memoryErrors, bodyFields(PRUNE_FIELDS), async (ctx) => {
    ctx.body = await ledgers.prune(bodyObject(ctx.request.body ?? {}));
  });
  // NOTE: repair takes no body (endpoints.md): anything but none or `{}` is 400 (api/body-rule.ts).
  router.post('Repair session memory ledgers: build missing ones, count corrupt ones', '/api/memory/sessions/repair', memoryErrors, async (ctx) => {
    ctx.body = await ledgers.repair();
  });
  return router;
}
