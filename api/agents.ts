import Router from '@koa/router';
import { agentView, type AgentCatalog } from '../runtime/agents/agent-catalog.ts';
import { ValidationError } from '../store/errors.ts';
import { isNonEmptyString } from '../codecs/shared.ts';
import { bodyObject, queryString } from './params.ts';
import type { ResourceService } from '../runtime/resources/resource-service.ts';
import type { WorkspaceService } from '../runtime/workspaces/workspace-service.ts';
import { takesBody } from './body-rule.ts';

/** agentRoutes serves the agents family, reading the projected agent registry. */
export function agentRoutes(deps: { agents: AgentCatalog; workspaces: WorkspaceService; service: ResourceService }): Router {
  const { agents, workspaces, service } = deps;
  const router = new Router({ prefix: '/api/agents' });

  router.get('List agents (global, plus a workspace\'s with ?workspace=)', '/', async (ctx) => {
    const ref = queryString(ctx.query, 'workspace');
    const ws = ref ? await workspaces.get(ref) : undefined;
    ctx.body = { agents: await agents.list(ws?.id) };
  });

  /**
   * POST writes the `agent` record that defines the name at the scope: the one that wins (the highest id, as
   * GET lists), updated with its version, or a new one; so the answer is always the definition that takes effect.
   * A definition owned by a bundle activation changes only through it (409 naming it).
   */
  router.post('Create or update an agent definition', '/', takesBody, async (ctx) => {
    const body = bodyObject(ctx.request.body);
    const agent = bodyObject(body.agent ?? null);
    if (body.scope !== 'global' && body.scope !== 'workspace') {
      throw new ValidationError('scope must be "global" or "workspace"', 'invalid_scope', { scope: 'must be "global" or "workspace"' });
    }
    let scope: { kind: 'global' | 'workspace'; id?: string } = { kind: 'global' };
    if (body.scope === 'workspace') {
      // NOTE: the forms POST /api/sessions accepts: `workspace` (id, name or path) or `workspace_path`.
      const ref = [body.workspace, body.workspace_path, body.workspace_id].find(isNonEmptyString);
      if (!ref) throw new ValidationError('scope "workspace" needs the workspace: workspace (id, name or path) or workspace_path', 'invalid_scope_binding', { workspace: 'is required for scope "workspace" (id, name or path; or workspace_path)' });
      scope = { kind: 'workspace', id: (await workspaces.get(ref)).id };
    }
    const missing = ['name', 'prompt', 'provider'].filter((f) => !isNonEmptyString(agent[f]));
    if (missing.length) throw new ValidationError(`${missing.map((f) => `agent.${f}`).join(', ')} required`, 'invalid_spec', Object.fromEntries(missing.map((f) => [`agent.${f}`, 'is required'])));
    const target = await agents.definitionTarget(scope, String(agent.name).trim());
    const res = await service.put('agent', target.id, { scope, spec: agent, expected_version: target.version }, { waitMs: 10_000, role: ctx.state.principal?.role });
    if (!res.reconciled) ctx.set('x-svc-reconcile', 'pending');
    ctx.status = res.created ? 201 : 200;
    ctx.body = { agent: agentView(res.record) };
  });
  return router;
}
