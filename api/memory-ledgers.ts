import Router from '@koa/router';
import { PRUNE_FIELDS, REPLAY_FIELDS, type LedgerService } from '../runtime/memory/ledger-service.ts';
import { bodyFields } from './body-rule.ts';
import { dryRunOf, noDryRun } from './memory-params.ts';
import { bodyObject } from './params.ts';

/**
 * memoryLedgerRoutes serves session ledgers: read and replay under the
 * workspace, prune and repair under /api/memory/sessions. Reads need the reader role, the rest operator (api/auth.ts).
 * Errors are the memory family's `{code, message, details}`, under the workspace's path too (api/errors.ts).
 */
export function memoryLedgerRoutes(deps: { ledgers: LedgerService }): Router {
  const { ledgers } = deps;
  const router = new Router();
  const base = '/api/workspaces/:workspace_id/memory/sessions/:session_id';
  router.get('Get a session memory ledger {events, meta}, verified against its checksum (409 memory.ledger_corrupt when not)', `${base}/ledger`, async (ctx) => {
    ctx.body = await ledgers.get(ctx.params.workspace_id, ctx.params.session_id);
  });
  router.post('Replay a session memory ledger {include_tool_events?, include_memory?}', `${base}/replay`, bodyFields(REPLAY_FIELDS), async (ctx) => {
    ctx.body = await ledgers.replay(ctx.params.workspace_id, ctx.params.session_id, bodyObject(ctx.request.body ?? {}));
  });
  router.post('Prune session memory ledgers stopped more than older_than_hours ago {older_than_hours, dry_run?} (dry_run also in the query)', '/api/memory/sessions/prune', bodyFields(PRUNE_FIELDS), async (ctx) => {
    const body = bodyObject(ctx.request.body ?? {});
    ctx.body = await ledgers.prune({ ...body, dry_run: dryRunOf(ctx, body) });
  });
  // NOTE: repair takes no body: anything but none or `{}` is 400 (api/body-rule.ts).
  router.post('Repair session memory ledgers: build missing ones, count corrupt ones', '/api/memory/sessions/repair', noDryRun, async (ctx) => {
    ctx.body = await ledgers.repair();
  });
  return router;
}
