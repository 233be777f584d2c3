import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { agentDirName } from '../runtime/skills/catalog.ts';
import type { SkillContext } from '../runtime/skills/types.ts';
import type { FeatureDeps } from './types.ts';
import { bodyObject, queryString } from './params.ts';
import { bodyFields } from './body-rule.ts';
import { InputError, NotFoundError, ValidationError } from '../store/errors.ts';
import { parseLimit } from '../runtime/marketplace/marketplace.ts';
import type { Marketplace } from '../runtime/marketplace/marketplace.ts';
import { searchView } from '../runtime/marketplace/catalog.ts';
import type { MarketRow } from '../runtime/marketplace/types.ts';
import type { SkillInstalls } from '../runtime/skills/installs.ts';
import { requires } from './auth.ts';

/** SLUG is the form of a marketplace skill's slug. */
const SLUG = /^@[^/\s]+\/[^/\s]+$/;
/**
 * hit is a search hit: `name` is the skill's name (the SKILL.md name, the slug's last part), the one remove and
 * `GET /api/skills/{name}` take, and `display_name` the index's label beside it.
 */
const hit = (r: MarketRow) => ({
  author: r.author, description: r.description, display_name: r.detail.skill?.display_name ?? r.name, downloads: r.downloads ?? 0,
  name: r.identity.slice(r.identity.indexOf('/') + 1), slug: r.identity, source: r.source, version: r.version,
});

/**
 * skillRoutes serves the skills family (without the marketplace). `workspace` (id, name or path) and `for_agent`
 * (alias `agent_name`) pick the workspace and agent skill directories that take part in resolution.
 */
export function skillRoutes(deps: FeatureDeps, market?: { marketplace: Marketplace; installs: SkillInstalls }): Router {
  const { skills, workspaces } = deps;
  const router = new Router({ prefix: '/api/skills' });
  const context = async (ctx: Context): Promise<SkillContext> => {
    const ref = queryString(ctx.query, 'workspace');
    const agentName = queryString(ctx.query, 'for_agent') ?? queryString(ctx.query, 'agent_name');
    // NOTE: checked with or without a workspace, so the same query is refused the same way in both.
    if (agentName !== undefined) agentDirName(agentName);
    return { workspace: ref ? await workspaces.get(ref) : undefined, agentName };
  };
  if (market) skillMarketplaceRoutes(router, deps, market);
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

/** BODY_CODES are the codes of a body's validation (its shape, a field's type, an unknown field). */
const BODY_CODES: ReadonlySet<string> = new Set(['invalid_body', 'unknown_field']);

/**
 * badRequest answers a body that fails validation 400, naming each field as a 422 would: the skills marketplace's
 * contract gives validation 400 (a refused archive stays 422: the body was fine).
 */
const badRequest: Middleware = async (_ctx, next) => {
  try {
    await next();
  } catch (err) {
    if (err instanceof ValidationError && BODY_CODES.has(err.code)) throw new InputError(err.message, err.code, err.evidence, { cause: err });
    throw err;
  }
};

/**
 * skillMarketplaceRoutes adds the skills marketplace and enable/disable: search and info read the
 * marketplace's skill entries; install, update and remove need admin (api/auth.ts). 503 when no source serves skills.
 */
function skillMarketplaceRoutes(router: Router, deps: FeatureDeps, m: { marketplace: Marketplace; installs: SkillInstalls }): void {
  const exists = async (name: string) => (await deps.skills.list({})).some((s) => s.name === name);
  router.get('Search the skills marketplace (query*, limit 1-100, default 20)', '/marketplace/search', async (ctx) => {
    if (ctx.query.query === undefined) throw new InputError('query is required (empty lists the most downloaded)', 'invalid_query', { query: 'is required' });
    const query = queryString(ctx.query, 'query') ?? '';
    const limit = parseLimit(queryString(ctx.query, 'limit'));
    ctx.body = { skills: searchView(await m.marketplace.skillView(), query).slice(0, limit).map(hit) };
  });
  router.get('Get a marketplace skill\'s info (slug=@author/name)', '/marketplace/info', async (ctx) => {
    const slug = queryString(ctx.query, 'slug') ?? '';
    if (!SLUG.test(slug)) throw new InputError('slug must be @author/name', 'invalid_slug', { slug: 'must match ^@[^/\\s]+/[^/\\s]+$' });
    const r = await m.marketplace.skill(slug);
    if (!r) throw new NotFoundError(`no marketplace source lists skill ${slug}`, 'skill_not_found', { slug });
    const d = r.detail.skill!;
    ctx.body = {
      skill: {
        ...hit(r), license: d.license, mcp_servers: r.mcp_servers ?? [], readme: d.readme, repository: d.repository, tags: d.tags, versions: d.versions,
      },
    };
  });
  router.post('Install a marketplace skill {slug, version?} (admin)', '/marketplace/install', requires('admin'), badRequest, bodyFields(['slug', 'version']), async (ctx) => {
    ctx.body = { skill: await m.installs.install(bodyObject(ctx.request.body ?? {})) };
  });
  router.post('Update marketplace skills {name?, all?, check_only?} (admin)', '/marketplace/update', requires('admin'), badRequest, bodyFields(['name', 'all', 'check_only']), async (ctx) => {
    ctx.body = { skills: await m.installs.update(bodyObject(ctx.request.body ?? {})) };
  });
  router.delete('Remove a marketplace-installed skill (admin)', '/marketplace/:name', requires('admin'), async (ctx) => {
    ctx.body = { skill: await m.installs.remove(ctx.params.name, exists) };
  });
  for (const action of ['enable', 'disable'] as const) {
    router.post(`${action === 'enable' ? 'Enable' : 'Disable'} a skill for every agent`, `/:name/${action}`, async (ctx) => {
      if (!(await exists(ctx.params.name))) throw new NotFoundError(`skill "${ctx.params.name}" does not exist`, 'skill_not_found', { name: ctx.params.name });
      await m.installs.setEnabled(ctx.params.name, action === 'enable');
      ctx.body = { ok: true };
    });
  }
}
