import Router from '@koa/router';
import { childId } from '../controllers/bundle-activation.ts';
import { agentView, type AgentCatalog } from '../runtime/agent-catalog.ts';
import { ValidationError } from '../store/errors.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import { bodyObject, queryString } from './params.ts';
import type { ResourceService } from './resource-service.ts';
import type { WorkspaceService } from './workspace-service.ts';

/** agentRoutes serves the agents family, reading the projected agent registry. */
export function agentRoutes(deps: { agents: AgentCatalog; workspaces: WorkspaceService; service: ResourceService; store: ResourceStore }): Router {
  const { agents, workspaces, service, store } = deps;
  const router = new Router({ prefix: '/api/agents' });

  router.get('List agents (global, plus a workspace\'s with ?workspace=)', '/', async (ctx) => {
    const ref = queryString(ctx.query, 'workspace');
    const ws = ref ? await workspaces.get(ref) : undefined;
    ctx.body = { agents: await agents.list(ws?.id) };
  });

  /**
   * POST writes an `agent` record (create or update by name within the scope) and answers once it is
   * projected, so the agent is listed as soon as the call returns.
   */
  router.post('Create or update an agent definition', '/', async (ctx) => {
    const body = bodyObject(ctx.request.body);
    const agent = bodyObject(body.agent ?? null);
    if (body.scope !== 'global' && body.scope !== 'workspace') {
      throw new ValidationError('scope must be "global" or "workspace"', 'invalid_scope', { scope: 'must be "global" or "workspace"' });
    }
    let scope: { kind: 'global' | 'workspace'; id?: string } = { kind: 'global' };
    if (body.scope === 'workspace') {
      if (typeof body.workspace !== 'string' || !body.workspace) throw new ValidationError('workspace is required for workspace scope', 'invalid_scope_binding', { workspace: 'is required for workspace scope' });
      scope = { kind: 'workspace', id: (await workspaces.get(body.workspace)).id };
    }
    const name = typeof agent.name === 'string' ? agent.name.trim() : '';
    if (!name) throw new ValidationError('agent.name is required', 'invalid_spec', { 'spec.name': 'is required' });
    const id = childId('agt-', scope.kind, scope.id ?? '', name);
    const current = await store.get('agent', id);
    const res = await service.put('agent', id, { scope, spec: agent, expected_version: current?.version ?? 0 }, { waitMs: 10_000, role: ctx.state.principal?.role });
    if (!res.reconciled) ctx.set('x-svc-reconcile', 'pending');
    ctx.status = res.created ? 201 : 200;
    ctx.body = { agent: agentView(res.record) };
  });
  return router;
}
