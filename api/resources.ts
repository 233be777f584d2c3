import Router from '@koa/router';
import type { Context } from 'koa';
import type { Logger } from 'pino';
import { InputError, NotFoundError, ValidationError } from '../store/errors.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { ListFilter } from '../store/types.ts';
import { bodyObject, queryBool, queryFieldValidation, queryInt, queryString, setWarnings } from './params.ts';
import { checkKind, parseScope, type ResourceService } from '../runtime/resources/resource-service.ts';
import type { WriteOptions } from '../runtime/resources/types.ts';
import { recordHistory } from '../runtime/resources/history.ts';
import { streamFrames } from './sse.ts';
import type { StreamSlots } from './stream-slots.ts';
import { takesBody } from './body-rule.ts';

/** listFilter reads the list filters from the query (and the path kind, if any). */
function listFilter(ctx: Context, pathKind?: string): ListFilter {
  const q = ctx.query;
  const kind = queryString(q, 'kind');
  if (pathKind && kind && kind !== pathKind) {
    throw new ValidationError(`query kind "${kind}" does not match path kind "${pathKind}"`, 'kind_mismatch', { kind: `must equal the path kind "${pathKind}"` });
  }
  const pair = (a: string, b: string) => {
    const x = queryString(q, a);
    const y = queryString(q, b);
    if (!x && !y) return undefined;
    if (!x || !y) throw new ValidationError(`${a} and ${b} go together`, 'invalid_filter', { [x ? b : a]: `is required with ${x ? a : b}` });
    return { kind: x, id: y };
  };
  const scopeKind = queryString(q, 'scope_kind');
  const scopeId = queryString(q, 'scope_id');
  if (scopeId && !scopeKind) throw new ValidationError('scope_id needs scope_kind', 'invalid_filter', { scope_kind: 'is required with scope_id' });
  return {
    kind: pathKind ?? kind,
    scope: scopeKind ? parseScope({ kind: scopeKind, id: scopeId }, 'scope') : undefined,
    owner: pair('owner_kind', 'owner_id'),
    source: pair('source_kind', 'source_id'),
    limit: queryInt(q, 'limit', 0),
  };
}

/** startRevision reads `Last-Event-ID` (or `since_revision`); without either a watch starts at the head. */
function startRevision(ctx: Context): number | undefined {
  const raw = ctx.get('Last-Event-ID') || (ctx.query.since_revision as string | undefined);
  if (raw === undefined || raw === '') return undefined;
  if (!/^\d+$/.test(raw)) throw new InputError('Last-Event-ID / since_revision must be a revision number', 'invalid_revision', { since_revision: raw });
  return Number(raw);
}

/** writeOptions reads `?dry_run`, `?wait` and `?timeout_ms`. */
function writeOptions(ctx: Context): WriteOptions {
  const dryRun = queryBool(ctx.query, 'dry_run');
  const timeout = queryInt(ctx.query, 'timeout_ms', 10_000, 600_000);
  const encoding = ctx.get('Content-Encoding');
  // NOTE: Content-Length counts the bytes parsed only without a content encoding (the parser inflates one).
  const bodyBytes = !encoding || encoding.toLowerCase() === 'identity' ? ctx.request.length : undefined;
  return { dryRun, waitMs: queryBool(ctx.query, 'wait') ? timeout : undefined, role: ctx.state.principal?.role, bodyBytes, fieldValidation: queryFieldValidation(ctx.query) };
}

function reconcileHeader(ctx: Context, reconciled: boolean | undefined, dryRun?: boolean) {
  if (dryRun) ctx.set('x-svc-dry-run', 'true');
  if (reconciled !== undefined) ctx.set('x-svc-reconcile', reconciled ? 'done' : 'pending');
}

/** resourceRoutes serves the desired-state resources family; each watch holds a slot of `streams`. */
export function resourceRoutes(deps: { service: ResourceService; store: ResourceStore; logger: Logger; streams: StreamSlots }): Router {
  const { service, store, logger, streams } = deps;
  const router = new Router({ prefix: '/api/resources' });

  const list = async (ctx: Context, pathKind?: string) => {
    const filter = listFilter(ctx, pathKind);
    if (queryBool(ctx.query, 'watch')) return streamFrames(ctx, (signal) => service.changes(filter, startRevision(ctx), signal), logger, 'watch stream', streams);
    const include = queryString(ctx.query, 'include');
    if (include !== undefined && include !== 'status') throw new ValidationError(`include=${include}: only "status" can be included`, 'invalid_query', { include: 'must be "status"' });
    // NOTE: the revision read before the list is a safe point to start a watch from (changes may repeat).
    ctx.set('x-svc-revision', String(await store.revision()));
    ctx.body = { records: await service.list(filter, { status: include === 'status' }) };
  };

  // NOTE: before '/:kind/:id', which would take this path as kind "status", id "watch" (a 400: no such kind).
  router.get('Watch reconcile statuses of a kind (SSE: a snapshot frame, then a status frame per change; ?kind=, ?id=)', '/status/watch', async (ctx) => {
    const [kind, only] = [queryString(ctx.query, 'kind'), queryString(ctx.query, 'id')];
    await streamFrames(ctx, (signal) => service.statuses(kind, only, signal), logger, 'status watch', streams);
  });
  router.get('List resources (add ?watch=true for server-sent change events, ?include=status for each status)', '/', (ctx) => list(ctx));
  router.get('List resources of a kind', '/:kind', (ctx) => list(ctx, ctx.params.kind));
  router.get('Get a resource', '/:kind/:id', async (ctx) => {
    ctx.body = { record: await service.get(ctx.params.kind, ctx.params.id) };
  });
  router.get('Get a resource reconcile status (?wait_revision=R answers once the change at revision R is reconciled)', '/:kind/:id/status', async (ctx) => {
    // NOTE: the web console reads a changed record's status with the revision of the watch frame that told it.
    const waitRevision = queryInt(ctx.query, 'wait_revision', 0);
    if (waitRevision) {
      await service.get(ctx.params.kind, ctx.params.id);
      reconcileHeader(ctx, await service.waitReconciled(ctx.params.kind, ctx.params.id, waitRevision, queryInt(ctx.query, 'timeout_ms', 10_000, 60_000)));
    }
    ctx.body = { status: await service.status(ctx.params.kind, ctx.params.id) };
  });
  router.get('List a resource\'s changes from the change log (?limit=, newest kept, oldest first)', '/:kind/:id/history', async (ctx) => {
    checkKind(ctx.params.kind);
    const history = await recordHistory(store, ctx.params.kind, ctx.params.id, queryInt(ctx.query, 'limit', 50, 500) || 50);
    if (!history.length && !(await store.get(ctx.params.kind, ctx.params.id))) throw new NotFoundError(`${ctx.params.kind} "${ctx.params.id}" has no retained changes`, 'not_found', { kind: ctx.params.kind, id: ctx.params.id });
    ctx.body = { history: history.map((c) => ({ revision: c.revision, type: c.type, version: c.version, record: c.record })) };
  });
  router.put('Create or update a resource', '/:kind/:id', takesBody, async (ctx) => {
    const opts = writeOptions(ctx);
    const res = await service.put(ctx.params.kind, ctx.params.id, bodyObject(ctx.request.body), opts);
    reconcileHeader(ctx, res.reconciled, opts.dryRun);
    setWarnings(ctx, res.warnings);
    ctx.status = res.created ? 201 : 200;
    // NOTE: the record's bytes as stored, not a parse and a re-serialization of them (same JSON).
    if (res.recordJson !== undefined) {
      ctx.type = 'application/json';
      ctx.body = `{"record":${res.recordJson}}`;
    } else ctx.body = { record: res.record };
  });
  router.delete('Delete a resource', '/:kind/:id', takesBody, async (ctx) => {
    const opts = writeOptions(ctx);
    const res = await service.delete(ctx.params.kind, ctx.params.id, bodyObject(ctx.request.body ?? {}), opts);
    reconcileHeader(ctx, res.reconciled, opts.dryRun);
    ctx.status = 204;
  });
  return router;
}
