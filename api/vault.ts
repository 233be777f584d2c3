import Router from '@koa/router';
import { PUT_FIELDS, type VaultService } from '../runtime/vault/vault-service.ts';
import { bodyFields } from './body-rule.ts';
import { queryString } from './params.ts';
import { requires } from './auth.ts';

/**
 * vaultRoutes serves the vault and its rotation and status. Roles (token
 * and kubernetes modes, api/auth.ts): reads need operator, writes admin. No answer ever carries a value.
 */
export function vaultRoutes(vault: VaultService): Router {
  const router = new Router({ prefix: '/api/vault' });
  router.get('List vault secrets by metadata (query prefix: whole segments, namespace)', '/secrets', requires('operator'), async (ctx) => {
    ctx.body = { secrets: await vault.list({ prefix: queryString(ctx.query, 'prefix'), namespace: queryString(ctx.query, 'namespace') }) };
  });
  router.put('Write a vault secret {ref, secret_value, kind?, allowed_hosts?: the hosts its value may be sent to}; the value is never returned', '/secrets', requires('admin'), bodyFields(PUT_FIELDS), async (ctx) => {
    ctx.body = { secret: await vault.put(ctx.request.body) };
  });
  router.get('Get a vault secret\'s metadata (query ref)', '/secrets/metadata', requires('operator'), async (ctx) => {
    ctx.body = { secret: await vault.metadata(queryString(ctx.query, 'ref')) };
  });
  router.delete('Delete a vault secret (query ref)', '/secrets', requires('admin'), async (ctx) => {
    await vault.delete(queryString(ctx.query, 'ref'));
    ctx.status = 204;
  });
  // NOTE: rotate takes no body: anything but none or `{}` is 400 (api/body-rule.ts).
  router.post('Re-seal every data key under the first key-encryption key (resumable); answers counts', '/rotate', requires('admin'), async (ctx) => {
    ctx.body = { rotation: await vault.rotate() };
  });
  router.get('Show the key ids configured and in use, and how many secrets each seals', '/status', requires('operator'), async (ctx) => {
    ctx.body = { status: await vault.status() };
  });
  return router;
}
