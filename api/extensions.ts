import Router from '@koa/router';
import type { Context } from 'koa';
import { EXTENSION_NAME } from '../codecs/extension-manifest.ts';
import { INSTALL_FIELDS, UPDATE_FIELDS, type ExtensionService } from '../runtime/extensions/service.ts';
import { parseLimit, parseQuery } from '../runtime/marketplace/marketplace.ts';
import { NotFoundError } from '../store/errors.ts';
import { bodyFields } from './body-rule.ts';
import { queryString } from './params.ts';
import { requires } from './auth.ts';

/** nameOf reads the path's extension name: one that cannot be an extension's is not installed (404). */
function nameOf(ctx: Context): string {
  const name = String(ctx.params.name);
  if (!EXTENSION_NAME.test(name)) throw new NotFoundError(`extension "${name.slice(0, 80)}" is not installed`, 'extension_not_found', { name: name.slice(0, 80) });
  return name;
}

/** installedBy names who made a change: the authenticated principal, or `local` without authentication (loopback). */
const installedBy = (ctx: Context) => String((ctx.state.principal as { name?: string } | undefined)?.name ?? 'local');

/**
 * extensionRoutes serves the extensions family. Roles (api/auth.ts):
 * reads need reader, every change admin, since an extension brings code the service runs.
 */
export function extensionRoutes(extensions: ExtensionService): Router {
  const router = new Router({ prefix: '/api/extensions' });
  router.get('List installed extensions', '/', async (ctx) => {
    ctx.body = { extensions: await extensions.list() };
  });
  router.post('Install an extension from {path, checksum} or a marketplace {slug, version?, source?} (admin)', '/', requires('admin'), bodyFields(INSTALL_FIELDS), async (ctx) => {
    ctx.status = 201;
    ctx.body = { extension: await extensions.install(ctx.request.body as Record<string, unknown>, installedBy(ctx)) };
  });
  router.get('List the marketplace\'s extension entries (q, source, limit 1-100)', '/marketplace', async (ctx) => {
    const q = parseQuery(queryString(ctx.query, 'q'));
    ctx.body = { extensions: await extensions.marketplace(q, queryString(ctx.query, 'source'), parseLimit(queryString(ctx.query, 'limit'))) };
  });
  router.get('Get an installed extension', '/:name', async (ctx) => {
    ctx.body = { extension: await extensions.get(nameOf(ctx)) };
  });
  router.put('Update a marketplace extension {version?, check_only?, allow_unverified?} (admin)', '/:name', requires('admin'), bodyFields(UPDATE_FIELDS), async (ctx) => {
    ctx.body = { update: await extensions.update(nameOf(ctx), ctx.request.body as Record<string, unknown>, installedBy(ctx)) };
  });
  router.delete('Remove an extension (409 while a bundle activation uses one of its bundles) (admin)', '/:name', requires('admin'), async (ctx) => {
    ctx.body = { extension: await extensions.remove(nameOf(ctx)) };
  });
  for (const action of ['enable', 'disable'] as const) {
    router.post(`${action === 'enable' ? 'Enable' : 'Disable'} an extension: its records and daemon follow (admin)`, `/:name/${action}`, requires('admin'), async (ctx) => {
      ctx.body = { extension: await extensions.setEnabled(nameOf(ctx), action === 'enable') };
    });
  }
  router.get('Get where an extension came from and the trust decision taken', '/:name/provenance', async (ctx) => {
    ctx.body = { provenance: await extensions.provenance(nameOf(ctx)) };
  });
  return router;
}
