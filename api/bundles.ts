import Router from '@koa/router';
import { BundleCatalog } from '../runtime/bundles/bundle-catalog.ts';
import { ConflictError, NotFoundError, ValidationError } from '../store/errors.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import { findProfile } from '../controllers/bundle-activation.ts';
import { isNonEmptyString } from '../codecs/shared.ts';
import { bodyObject } from './params.ts';
import type { ResourceService } from '../runtime/resources/resource-service.ts';
import type { WorkspaceService } from '../runtime/workspaces/workspace-service.ts';
import { takesBody } from './body-rule.ts';

const KIND = 'bundle.activation';
const WAIT_MS = 10_000;

/** bundleRoutes serves the bundles family: activations are `bundle.activation` records underneath. */
export function bundleRoutes(deps: { service: ResourceService; store: ResourceStore; workspaces: WorkspaceService }): Router {
  const { service, store, workspaces } = deps;
  const catalog = new BundleCatalog(store);
  const router = new Router({ prefix: '/api/bundles' });
  const load = async (id: string) => {
    const rec = await store.get(KIND, id);
    if (!rec) throw new NotFoundError(`bundle activation "${id}" does not exist`, 'activation_not_found', { id });
    return rec;
  };
  const bindFlag = (body: Record<string, unknown>, required: boolean): boolean => {
    const v = body.bind_primary_channel_as_default;
    if (v === undefined && !required) return false;
    if (typeof v !== 'boolean') throw new ValidationError('bind_primary_channel_as_default must be a boolean', 'invalid_activation', { bind_primary_channel_as_default: 'must be a boolean' });
    return v;
  };

  router.get('List bundle catalog entries', '/catalog', async (ctx) => {
    ctx.body = { bundles: await catalog.catalog() };
  });
  router.get('List bundle activations', '/activations', async (ctx) => {
    const recs = await store.list({ kind: KIND });
    ctx.body = { activations: await Promise.all(recs.map((r) => catalog.activationView(r))) };
  });
  router.post('Activate a bundle profile', '/activations', takesBody, async (ctx) => {
    const body = bodyObject(ctx.request.body);
    const missing = ['extension_name', 'bundle_name', 'profile_name'].filter((f) => !isNonEmptyString(body[f]));
    if (missing.length) throw new ValidationError(`${missing.join(', ')} required`, 'invalid_activation', Object.fromEntries(missing.map((f) => [f, 'is required'])));
    const spec = {
      extension_name: String(body.extension_name).trim(), bundle_name: String(body.bundle_name).trim(),
      profile_name: String(body.profile_name).trim(), bind_primary_channel_default: bindFlag(body, false),
    };
    const found = findProfile(await catalog.bundles(), spec);
    if (!found.ok) throw new ValidationError(found.message, 'bundle_not_found', { [found.reason === 'BundleNotFound' ? 'bundle_name' : 'profile_name']: found.message });
    // NOTE: names match ignoring case; the bundle's own spelling makes the id canonical.
    spec.extension_name = found.match.bundle.spec.extension_name;
    spec.bundle_name = found.match.bundle.spec.bundle.name;
    spec.profile_name = found.match.profile.name;
    const wsRef = body.workspace_id;
    const scope = isNonEmptyString(wsRef) ? { kind: 'workspace' as const, id: (await workspaces.get(wsRef)).id } : { kind: 'global' as const };
    const id = BundleCatalog.activationId(spec.extension_name, spec.bundle_name, spec.profile_name, scope.kind, scope.id ?? '');
    if (await store.get(KIND, id)) throw new ConflictError(`profile "${spec.profile_name}" is already active at this scope as "${id}"`, 'activation_exists', { id });
    const res = await service.put(KIND, id, { scope, spec, expected_version: 0 }, { waitMs: WAIT_MS });
    if (!res.reconciled) ctx.set('x-svc-reconcile', 'pending');
    ctx.status = 201;
    ctx.body = { activation: await catalog.activationView(res.record) };
  });
  router.get('Get a bundle activation', '/activations/:id', async (ctx) => {
    ctx.body = { activation: await catalog.activationView(await load(ctx.params.id)) };
  });
  router.patch('Update a bundle activation', '/activations/:id', takesBody, async (ctx) => {
    const body = bodyObject(ctx.request.body);
    const bind = bindFlag(body, true);
    const rec = await load(ctx.params.id);
    const spec = { ...(rec.spec as object), bind_primary_channel_default: bind };
    const res = await service.put(KIND, rec.id, { scope: rec.scope, spec, expected_version: rec.version }, { waitMs: WAIT_MS });
    if (!res.reconciled) ctx.set('x-svc-reconcile', 'pending');
    ctx.body = { activation: await catalog.activationView(res.record) };
  });
  router.delete('Deactivate a bundle profile (deletes its children)', '/activations/:id', async (ctx) => {
    const rec = await load(ctx.params.id);
    const res = await service.delete(KIND, rec.id, { expected_version: rec.version }, { waitMs: WAIT_MS });
    if (!res.reconciled) ctx.set('x-svc-reconcile', 'pending');
    ctx.status = 204;
  });
  return router;
}
