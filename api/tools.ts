import Router from '@koa/router';
import type { Context } from 'koa';
import type { ContextQuery, InvokeRequest } from '../runtime/tools/runtime.ts';
import { ToolError } from '../runtime/tools/types.ts';
import type { FeatureDeps } from './types.ts';
import { bodyObject, queryString } from './params.ts';
import { takesBody } from './body-rule.ts';

const CONTEXT_FIELDS = ['workspace_id', 'workspace', 'session_id', 'agent_name'] as const;

/** contextOf reads the effective-context fields from a query or a body; each must be a string. */
function contextOf(src: Record<string, unknown>, fromQuery: boolean): ContextQuery {
  const out: ContextQuery = {};
  for (const f of CONTEXT_FIELDS) {
    const v = fromQuery ? queryString(src as Record<string, string | string[] | undefined>, f) : src[f];
    if (v === undefined || v === null || v === '') continue;
    if (typeof v !== 'string') throw new ToolError('tool_invalid_input', 'invalid tool request', '', [], { [f]: 'must be a string' });
    out[f] = v;
  }
  return out;
}

/** searchArgs reads `{query*, limit?}` of a search body. */
function searchArgs(body: Record<string, unknown>): { query: string; limit: number } {
  if (typeof body.query !== 'string') throw new ToolError('tool_invalid_input', 'invalid tool request', '', [], { query: 'is required and must be a string' });
  const limit = body.limit ?? 50;
  if (!Number.isInteger(limit) || (limit as number) < 1 || (limit as number) > 1000) throw new ToolError('tool_invalid_input', 'invalid tool request', '', [], { limit: 'must be an integer from 1 to 1000' });
  return { query: body.query, limit: limit as number };
}

/**
 * toolRoutes serves the tools and toolsets family: operator views (every registered tool with its decision),
 * session views (only what the session may see and call), search, approvals and invocation.
 */
export function toolRoutes(deps: FeatureDeps): Router {
  const { tools } = deps;
  const router = new Router();
  const query = (ctx: Context) => contextOf(ctx.query, true);

  router.get('List tools with availability and decision (effective-context query)', '/api/tools', async (ctx) => {
    ctx.type = 'application/json';
    ctx.body = tools.listJson(await tools.resolve(query(ctx)), false);
  });
  router.post('Search tools (ranked)', '/api/tools/search', takesBody, async (ctx) => {
    const body = bodyObject(ctx.request.body);
    const { query: q, limit } = searchArgs(body);
    const eff = await tools.resolve({ ...query(ctx), ...contextOf(body, false) });
    ctx.body = { tools: tools.search(tools.list(eff, false), q, limit) };
  });
  router.get('Get a tool', '/api/tools/:id', async (ctx) => {
    ctx.body = { tool: tools.get(ctx.params.id, await tools.resolve(query(ctx))) };
  });
  router.post('Issue an approval token for one call', '/api/tools/:id/approvals', takesBody, async (ctx) => {
    const body = bodyObject(ctx.request.body);
    ctx.status = 201;
    ctx.body = { approval: await tools.approve(ctx.params.id, { ...contextOf(body, false), input: body.input, input_digest: body.input_digest }) };
  });
  router.post('Invoke a tool', '/api/tools/:id/invoke', takesBody, async (ctx) => {
    const body = bodyObject(ctx.request.body);
    const req: InvokeRequest = { ...query(ctx), ...contextOf(body, false), input: body.input };
    for (const f of ['approval_token', 'tool_call_id', 'turn_id', 'correlation_id'] as const) {
      if (body[f] === undefined) continue;
      if (typeof body[f] !== 'string') throw new ToolError('tool_invalid_input', 'invalid tool request', ctx.params.id, [], { [f]: 'must be a string' });
      req[f] = body[f] as string;
    }
    if (body.sensitive_input_fields !== undefined) {
      if (!Array.isArray(body.sensitive_input_fields) || !body.sensitive_input_fields.every((x) => typeof x === 'string')) throw new ToolError('tool_invalid_input', 'invalid tool request', ctx.params.id, [], { sensitive_input_fields: 'must be an array of strings' });
      req.sensitive_input_fields = body.sensitive_input_fields as string[];
    }
    ctx.body = await tools.invoke(ctx.params.id, req);
  });

  const sessionScope = (ctx: Context): ContextQuery => ({ workspace_id: ctx.params.workspace_id, session_id: ctx.params.session_id, agent_name: queryString(ctx.query, 'agent_name') });
  router.get('List the tools a session can see and call', '/api/workspaces/:workspace_id/sessions/:session_id/tools', async (ctx) => {
    ctx.type = 'application/json';
    ctx.body = tools.listJson(await tools.resolve(sessionScope(ctx)), true);
  });
  router.post('Search the tools a session can see and call', '/api/workspaces/:workspace_id/sessions/:session_id/tools/search', takesBody, async (ctx) => {
    const body = bodyObject(ctx.request.body);
    const { query: q, limit } = searchArgs(body);
    const scope = sessionScope(ctx);
    const given = contextOf(body, false);
    for (const f of ['workspace_id', 'session_id'] as const) {
      if (given[f] && given[f] !== scope[f]) throw new ToolError('tool_invalid_input', 'invalid tool request', '', ['scope_mismatch'], { [f]: `differs from the path (${scope[f]})` });
    }
    const eff = await tools.resolve({ ...scope, agent_name: given.agent_name ?? scope.agent_name });
    ctx.body = { tools: tools.search(tools.list(eff, true), q, limit) };
  });

  router.get('List toolsets with their expansion', '/api/toolsets', async (ctx) => {
    ctx.body = { toolsets: tools.toolsets(await tools.resolve(query(ctx))) };
  });
  router.get('Get a toolset', '/api/toolsets/:id', async (ctx) => {
    ctx.body = { toolset: tools.toolset(ctx.params.id, await tools.resolve(query(ctx))) };
  });
  return router;
}
