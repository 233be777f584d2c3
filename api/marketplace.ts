import Router from '@koa/router';
import type { Context } from 'koa';
import { MCP_INSTALL_FIELDS, type McpInstaller } from '../runtime/marketplace/mcp-install.ts';
import { parseKind, parseLimit, parseQuery, parseScope, type Marketplace, type PageQuery } from '../runtime/marketplace/marketplace.ts';
import type { InstalledScope } from '../runtime/marketplace/types.ts';
import type { WorkspaceService } from '../runtime/workspaces/workspace-service.ts';
import { bodyFields } from './body-rule.ts';
import { bodyObject, queryString } from './params.ts';
import { requires } from './auth.ts';

/**
 * marketplaceRoutes serves the marketplace and the MCP install that
 * turns an entry into an `mcp_server` record. Reads need reader; refresh operator; installs admin
 * (api/auth.ts).
 */
export function marketplaceRoutes(deps: { marketplace: Marketplace; mcp: McpInstaller; workspaces: WorkspaceService }): Router {
  const { marketplace } = deps;
  const router = new Router({ prefix: '/api/marketplace' });
  // NOTE: workspace_id is resolved as installs resolve it (id or name; 404 when unknown): installed-state is keyed by
  // the workspace's id, so a name or a typo would otherwise answer "not installed".
  const scopeOf = async (ctx: Context): Promise<InstalledScope> => {
    const scope = parseScope(queryString(ctx.query, 'scope'), queryString(ctx.query, 'workspace_id'));
    return scope.kind === 'workspace' ? { kind: 'workspace', workspaceId: (await deps.workspaces.get(scope.workspaceId!)).id } : scope;
  };
  const pageQuery = async (ctx: Context): Promise<PageQuery> => ({
    q: parseQuery(queryString(ctx.query, 'q')), limit: parseLimit(queryString(ctx.query, 'limit')), cursor: queryString(ctx.query, 'cursor'),
    scope: await scopeOf(ctx),
  });

  // NOTE: refresh and search are before '/:kind', which would take them for kinds.
  router.post('Refresh the marketplace sources (query kind?: mcp|extension|skill); waits for the syncs', '/refresh', async (ctx) => {
    ctx.body = { kinds: await marketplace.refresh(queryString(ctx.query, 'kind')) };
  });
  router.get('Search every kind (q; empty = curated idle slices; limit 1-100 per kind; scope, workspace_id)', '/search', async (ctx) => {
    ctx.body = await marketplace.search(await pageQuery(ctx));
  });
  router.get('List one kind (q, limit 1-100, opaque cursor, scope, workspace_id)', '/:kind', async (ctx) => {
    ctx.body = await marketplace.page(parseKind(ctx.params.kind), await pageQuery(ctx));
  });
  router.get('Get one entry\'s detail (installed_name, scope, workspace_id)', '/:kind/:entry_id', async (ctx) => {
    const kind = parseKind(ctx.params.kind);
    const scope = await scopeOf(ctx);
    const raw = ctx.query.installed_name;
    const installedName = raw === undefined ? undefined : queryString(ctx.query, 'installed_name') ?? '';
    ctx.body = await marketplace.detail(kind, ctx.params.entry_id, scope, installedName);
  });
  router.post('Install an MCP entry as an mcp_server record {name?, scope?, workspace_id?, env?, package?} (admin)', '/mcp/:entry_id/install', requires('admin'), bodyFields(MCP_INSTALL_FIELDS), async (ctx) => {
    ctx.status = 201;
    ctx.body = await deps.mcp.install(ctx.params.entry_id, bodyObject(ctx.request.body ?? {}), ctx.state.principal?.role);
  });
  return router;
}
