import Router from '@koa/router';
import { providersOf, type AgentCatalog } from '../runtime/agents/agent-catalog.ts';
import type { SkillCatalog } from '../runtime/skills/catalog.ts';
import { sessionView, type SessionService } from '../runtime/sessions/session-service.ts';
import { bodyObject } from './params.ts';
import { WORKSPACE_FIELDS, type WorkspaceService } from '../runtime/workspaces/workspace-service.ts';
import { bodyFields } from './body-rule.ts';
import type { ModelCatalog } from '../runtime/models/catalog.ts';

/** workspaceRoutes serves the workspaces family; `{id}` is a workspace id, name or (URL-encoded) root path. */
export function workspaceRoutes(deps: { workspaces: WorkspaceService; agents: AgentCatalog; sessions: SessionService; skills: SkillCatalog; models?: ModelCatalog }): Router {
  const { workspaces, agents, sessions, skills } = deps;
  const router = new Router({ prefix: '/api/workspaces' });
  router.get('List workspaces', '/', async (ctx) => {
    ctx.body = { workspaces: await workspaces.views() };
  });
  router.post('Create a workspace', '/', bodyFields(WORKSPACE_FIELDS), async (ctx) => {
    ctx.status = 201;
    ctx.body = { workspace: await workspaces.create(bodyObject(ctx.request.body)) };
  });
  router.post('Resolve the workspace containing a path', '/resolve', bodyFields(['path']), async (ctx) => {
    ctx.body = { workspace: await workspaces.resolve(bodyObject(ctx.request.body).path) };
  });
  router.get('Get a workspace snapshot', '/:id', async (ctx) => {
    const workspace = await workspaces.get(ctx.params.id);
    const list = (await sessions.list({ workspace: workspace.id })).map((s) => sessionView(s));
    const visible = await agents.list(workspace.id);
    const providers = providersOf(visible, await deps.models?.providerViews(workspace));
    ctx.body = { workspace, agents: visible, providers, sessions: list, skills: await skills.refs(workspace) };
  });
  router.patch('Update a workspace', '/:id', bodyFields(WORKSPACE_FIELDS), async (ctx) => {
    ctx.body = { workspace: await workspaces.update(ctx.params.id, bodyObject(ctx.request.body)) };
  });
  router.delete('Delete a workspace: stop its sessions, delete its workspace-scoped records', '/:id', async (ctx) => {
    // NOTE: deleted first, so no session can start in it while its live ones are being stopped.
    const ws = await workspaces.delete(ctx.params.id);
    await sessions.stopWorkspace(ws.id, 'workspace deleted');
    ctx.status = 204;
  });
  return router;
}
