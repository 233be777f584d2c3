import Router from '@koa/router';
import { EMITTED, GATED, HOOK_EVENTS, isSyncEligible, NOT_EMITTED } from '../runtime/hooks/catalog.ts';
import type { HookRuns } from '../runtime/hooks/runs.ts';
import { ValidationError } from '../store/errors.ts';
import { queryInt, queryString } from './params.ts';

/** hookRoutes serves what hooks did: recent runs, dead letters, and which catalog events run hooks at all. */
export function hookRoutes(deps: { runs: HookRuns }): Router {
  const router = new Router({ prefix: '/api/hooks' });
  router.get('List recent hook runs (?binding=&event=&limit=)', '/runs', async (ctx) => {
    const event = queryString(ctx.query, 'event');
    if (event && !(HOOK_EVENTS as readonly string[]).includes(event)) throw new ValidationError(`event "${event}" is not a hook event`, 'invalid_query', { event: 'must be one of the hook events' });
    const runs = await deps.runs.list({ binding: queryString(ctx.query, 'binding'), event, limit: queryInt(ctx.query, 'limit', 50, 1000) });
    ctx.body = { runs };
  });
  router.get('List dead-lettered async hook runs (?binding=&limit=)', '/dead-letters', async (ctx) => {
    ctx.body = { dead_letters: await deps.runs.deadLetters({ binding: queryString(ctx.query, 'binding'), limit: queryInt(ctx.query, 'limit', 50, 1000) }) };
  });
  router.get('List the hook event catalog: emitted, gated (sync) and not emitted events', '/events', async (ctx) => {
    ctx.body = {
      events: HOOK_EVENTS.map((name) => ({ name, emitted: EMITTED.includes(name), gated: GATED.includes(name), sync_eligible: isSyncEligible(name) })),
      not_emitted: NOT_EMITTED,
    };
  });
  return router;
}
