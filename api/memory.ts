import Router from '@koa/router';
import type { Context } from 'koa';
import { ADHOC_FIELDS, PATCH_FIELDS, PROMOTE_FIELDS, REVERT_FIELDS, SEARCH_FIELDS, type ListQuery, type Memory } from '../runtime/memory/index.ts';
import { MemoryError, memoryValidation } from '../runtime/memory/errors.ts';
import { WRITE_FIELDS, type WriteResult } from '../runtime/memory/memory-service.ts';
import { FILENAME } from '../runtime/memory/controller.ts';
import type { Origin } from '../runtime/memory/types.ts';
import { bodyFields } from './body-rule.ts';
import { dryRunOf, firstQuery, noDryRun } from './memory-params.ts';
import { queryInt, queryString } from './params.ts';

/** Origins a client of the HTTP API may name (the autonomous ones are the service's own writers). */
const CLIENT_ORIGINS: readonly Origin[] = ['http', 'cli', 'uds', 'file'];
const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;

function listQuery(ctx: Context): ListQuery {
  return {
    scope: firstQuery(ctx, 'scope'), workspace_id: firstQuery(ctx, 'workspace_id', 'workspace'), agent_name: firstQuery(ctx, 'agent_name', 'agent'),
    agent_tier: firstQuery(ctx, 'agent_tier', 'tier'), limit: queryInt(ctx.query, 'limit', DEFAULT_LIMIT, MAX_LIMIT) || DEFAULT_LIMIT,
  };
}

function originOf(body: Record<string, unknown>): Origin {
  if (body.origin === undefined) return 'http';
  if (typeof body.origin !== 'string' || !CLIENT_ORIGINS.includes(body.origin as Origin)) throw memoryValidation({ origin: `must be one of ${CLIENT_ORIGINS.join(', ')}` });
  return body.origin as Origin;
}

/** answer is a write's response; a `reject` is 422 `memory.rejected` carrying the decision. */
function answer(ctx: Context, res: WriteResult, dryRun: boolean): void {
  if (res.decision.op === 'reject') {
    throw new MemoryError(422, 'memory.rejected', `memory write rejected: ${res.decision.reason}`, { decision: res.decision, dry_run: dryRun });
  }
  ctx.body = { applied: res.applied, decision: res.decision, dry_run: dryRun };
}

/**
 * memoryRoutes serves the memory family's memories, decisions, daily logs, recall and config.
 * Errors are `{code, message, details}` (api/errors.ts). Roles (api/auth.ts): reads need
 * reader, writes (including search, which counts recalls) operator.
 */
export function memoryRoutes(memory: Memory): Router {
  // NOTE: a memory's path is `<name>.md`, the only form filenames take, so `PATCH` is not also offered (in `Allow`)
  // on `/config`, `/search` or `/decisions`; case-sensitive, so the filename is the one the path spells.
  const r = new Router({ prefix: '/api/memory', sensitive: true });
  r.get('List memories (query scope, workspace_id, agent_name, agent_tier, limit)', '/', async (ctx) => {
    ctx.body = { memories: await memory.list(listQuery(ctx)) };
  });
  r.post('Write a memory through the decision controller {scope, type, name, content, ...}; a reject is 422 memory.rejected', '/', bodyFields(WRITE_FIELDS), async (ctx) => {
    const body = ctx.request.body as Record<string, unknown>;
    const dryRun = dryRunOf(ctx, body);
    const { origin: _o, dry_run: _d, ...input } = body;
    answer(ctx, await memory.write(input, { origin: originOf(body), dryRun }), dryRun);
  });
  r.post('Write an ad-hoc note through the controller {scope, content, slug?}: kept unless its content is there already', '/ad-hoc', noDryRun, bodyFields(ADHOC_FIELDS), async (ctx) => {
    const res = await memory.adHoc(ctx.request.body as Record<string, unknown>, 'http');
    if (res.decision.op === 'reject') throw new MemoryError(422, 'memory.rejected', `memory write rejected: ${res.decision.reason}`, { decision: res.decision });
    ctx.body = { accepted: res.accepted, created_at: res.created_at, path: res.path, reason: res.reason, decision_id: res.decision.id };
  });
  r.get('Show the memory configuration in effect and the providers\' status', '/config', (ctx) => {
    ctx.body = memory.config();
  });
  r.get('List daily logs (query scope, workspace_id, agent_name, agent_tier, date, limit)', '/daily', async (ctx) => {
    ctx.body = { logs: await memory.dailyLogs({ ...listQuery(ctx), date: queryString(ctx.query, 'date') }) };
  });
  r.get('List controller decisions, newest first (query scope, workspace_id, agent_name, agent_tier, op, reason, since, limit)', '/decisions', async (ctx) => {
    ctx.body = { decisions: await memory.decisions({ ...listQuery(ctx), op: firstQuery(ctx, 'op', 'operation'), reason: queryString(ctx.query, 'reason'), since: queryString(ctx.query, 'since') }) };
  });
  r.get('Get a controller decision', '/decisions/:decision_id', async (ctx) => {
    ctx.body = { decision: await memory.decision(ctx.params.decision_id) };
  });
  r.post('Revert a decision: restore the memory as it was before it {reason?, dry_run?}; 409 memory.conflict when it changed since', '/decisions/:decision_id/revert', bodyFields(REVERT_FIELDS), async (ctx) => {
    const body = ctx.request.body as Record<string, unknown> | undefined ?? {};
    const dryRun = dryRunOf(ctx, body);
    if (body.reason !== undefined && (typeof body.reason !== 'string' || body.reason.length > 1024)) throw memoryValidation({ reason: 'must be a string of at most 1024 characters' });
    const res = await memory.service.revert(ctx.params.decision_id, { dryRun, reason: body.reason as string | undefined, origin: 'http' });
    ctx.body = { decision: res.decision, dry_run: dryRun, reverted: res.reverted };
  });
  r.post('Recall memories ranked by BM25 (unicode words and trigrams), recency and recall signal {query_text, top_k?, explain?, ...}', '/search', noDryRun, bodyFields(SEARCH_FIELDS), async (ctx) => {
    ctx.body = await memory.search(ctx.request.body as Record<string, unknown>);
  });
  r.post('Promote a memory into another scope through the controller {filename, from, to, idempotency_key?, dry_run?}', '/promote', bodyFields(PROMOTE_FIELDS), async (ctx) => {
    const body = ctx.request.body as Record<string, unknown>;
    const dryRun = dryRunOf(ctx, body);
    answer(ctx, await memory.promote(body, 'http', dryRun), dryRun);
  });
  r.patch('Change a memory\'s content through the controller {content, scope?, ...}', '/:stem.md', bodyFields(PATCH_FIELDS), async (ctx) => {
    const filename = `${ctx.params.stem}.md`;
    if (!FILENAME.test(filename)) throw memoryValidation({ filename: 'must be one path segment of letters, digits, ".", "_" or "-" ending in .md' });
    const body = ctx.request.body as Record<string, unknown>;
    const dryRun = dryRunOf(ctx, body);
    answer(ctx, await memory.patch(filename, { ...body, dry_run: dryRun }, 'http'), dryRun);
  });
  return r;
}
