import type { Context, Middleware } from 'koa';
import { memoryValidation } from '../runtime/memory/errors.ts';
import { queryBool, queryString } from './params.ts';

/**
 * dryRunOf is the one reading of `dry_run` for every memory route that has it: the body's (a boolean) or the query's
 * (`true|false|1|0`), false when neither is given. NOTE: a client may set either; when both are given and disagree
 * the request is refused (422 naming dry_run) rather than one silently winning, since a dry run taken for real
 * cannot be undone.
 */
export function dryRunOf(ctx: Context, body: Record<string, unknown>): boolean {
  if (body.dry_run !== undefined && typeof body.dry_run !== 'boolean') throw memoryValidation({ dry_run: 'must be a boolean' });
  const fromQuery = queryString(ctx.query, 'dry_run') === undefined ? undefined : queryBool(ctx.query, 'dry_run');
  const fromBody = body.dry_run as boolean | undefined;
  if (fromQuery !== undefined && fromBody !== undefined && fromQuery !== fromBody) {
    throw memoryValidation({ dry_run: `is ${fromBody} in the body and ${fromQuery} in the query: give one, or the same in both` }, 422);
  }
  return fromBody ?? fromQuery ?? false;
}

/** firstQuery reads a query parameter under its name or its alias (`workspace` = `workspace_id`). */
export function firstQuery(ctx: Context, ...names: string[]): string | undefined {
  return names.map((n) => queryString(ctx.query, n)).find((v) => v !== undefined);
}

/**
 * noDryRun refuses `?dry_run` (422 naming it) on a memory route that changes something and has no dry run: the
 * caller asked for a run that changes nothing, and this route would act for real. NOTE: in a body, `dry_run` is an
 * unknown field of these routes, refused the same way (api/body-rule.ts).
 */
export const noDryRun: Middleware = (ctx, next) => {
  if (ctx.query.dry_run !== undefined) throw memoryValidation({ dry_run: `${ctx.method} ${ctx.path} has no dry run: it would act for real` }, 422);
  return next();
};
