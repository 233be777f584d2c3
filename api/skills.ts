import Router from '@koa/router';
import type { Context } from 'koa';
import { agentDirName } from '../runtime/skills/catalog.ts';
import type { SkillContext } from '../runtime/skills/types.ts';
import type { FeatureDeps } from './types.ts';
import { queryString } from './params.ts';

/**
 * skillRoutes serves the skills family (without the marketplace). `workspace` (id, name or path) and `for_agent`
 * (alias `agent_name`) pick the workspace and agent skill directories that take part in resolution.
 */
export function skillRoutes(deps: FeatureDeps): Router {
  const { skills, workspaces } = deps;
  const router = new Router({ prefix: '/api/skills' });
  const context = async (ctx: Context): Promise<SkillContext> => {
    const ref = queryString(ctx.query, 'workspace');
    const agentName = queryString(ctx.query, 'for_agent') ?? queryString(ctx.query, 'agent_name');
    // NOTE: checked with or without a workspace, so the same query is refused the same way in both.
    if (agentName !== undefined) agentDirName(agentName);
    return { workspace: ref ? await workspaces.get(ref) : undefined, agentName };
  };
  router.get('List skills (winners of each name, with shadowing and diagnostics)', '/', async (ctx) => {
    ctx.body = { skills: await skills.list(await context(ctx)) };
  });
  router.get('Get a skill', '/:name', async (ctx) => {
    ctx.body = { skill: await skills.get(ctx.params.name, await context(ctx)) };
  });
  router.get('Get a skill\'s SKILL.md content', '/:name/content', async (ctx) => {
    ctx.body = { content: await skills.content(ctx.params.name, await context(ctx)) };
  });
  return router;
}
