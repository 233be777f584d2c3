import { childId, findProfile } from '../../controllers/bundle-activation.ts';
import { readRegistry, type RegistryEntry } from '../../controllers/registry-controller.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { ResourceRecord } from '../../store/types.ts';
import type { BundleCatalogEntry } from './types.ts';

function channels(profile: any) {
  const c = profile?.channels ?? {};
  return (c.items ?? []).map((i: any) => ({ name: i.name, description: i.description ?? '', primary: i.name === c.primary }));
}

/**
 * BundleCatalog builds the bundle views: the catalog from the projected bundle registry, and each
 * activation from its record, its bundle's profile and the children it owns.
 */
export class BundleCatalog {
  constructor(private readonly store: ResourceStore) {}

  async catalog(): Promise<BundleCatalogEntry[]> {
    return (await readRegistry(this.store, 'bundle')).map((e) => ({
      bundle_name: e.spec.bundle.name, description: e.spec.bundle.description ?? '', extension_name: e.spec.extension_name,
      profiles: (e.spec.bundle.profiles ?? []).map((p: any) => ({
        name: p.name, description: p.description ?? '', agent_count: (p.agents ?? []).length, bridge_count: (p.bridges ?? []).length,
        job_count: (p.jobs ?? []).length, trigger_count: (p.triggers ?? []).length, channels: channels(p),
      })),
    }));
  }

  /** bundles returns the projected bundle registry entries. */
  bundles(): Promise<RegistryEntry[]> {
    return readRegistry(this.store, 'bundle');
  }

  /** activationId is the canonical activation id for a profile at a scope. */
  static activationId(ext: string, bundle: string, profile: string, scopeKind: string, workspaceId: string): string {
    return childId('act_', ext, bundle, profile, scopeKind, workspaceId);
  }

  /** activationView is the BundleActivation object, plus the record's reconcile status. */
  async activationView(rec: ResourceRecord<any>) {
    const s = rec.spec;
    const found = findProfile(await this.bundles(), s);
    const bundle = found.ok ? found.match.bundle.spec : undefined;
    const p = found.ok ? found.match.profile : undefined;
    const id = rec.id;
    const children = await this.store.list({ owner: { kind: 'bundle.activation', id } });
    return {
      id, extension_name: s.extension_name, bundle_name: s.bundle_name, profile_name: s.profile_name,
      bind_primary_channel_as_default: s.bind_primary_channel_default,
      bundle_description: bundle?.bundle.description ?? '', profile_description: p?.description ?? '',
      scope: rec.scope.kind, workspace_id: rec.scope.id ?? '', created_at: rec.created_at, updated_at: rec.updated_at,
      agents: (p?.agents ?? []).map((a: any) => ({
        id: childId('agt_', id, a.agent.name), name: a.agent.name, model: a.agent.model ?? '', provider: a.agent.provider ?? '',
        category_path: a.agent.category_path ?? [], has_soul: Boolean(a.soul), has_heartbeat: Boolean(a.heartbeat),
      })),
      jobs: (p?.jobs ?? []).map((j: any) => ({ id: childId('job_', id, j.name), name: j.name, agent_name: j.agent, enabled: Boolean(j.enabled) })),
      triggers: (p?.triggers ?? []).map((t: any) => ({ id: childId('trg_', id, t.name), name: t.name, agent_name: t.agent, enabled: Boolean(t.enabled), event: t.event })),
      bridges: (p?.bridges ?? []).map((b: any) => ({
        id: childId('bri_', id, b.name), name: b.name, display_name: b.display_name, extension_name: b.extension_name || s.extension_name,
        platform: b.platform || bundle?.owner_bridge_platform || '', secret_slots: (b.secret_slots ?? []).map((x: any) => ({ name: x.name, kind: x.kind, description: x.description ?? '' })),
      })),
      channels: channels(p),
      inventory: children.map((c) => ({ resource_id: c.id, resource_kind: c.kind, resource_name: (c.spec as any)?.name ?? (c.spec as any)?.agent_name ?? (c.spec as any)?.display_name ?? '' })),
      status: await this.store.getStatus('bundle.activation', id),
    };
  }
}
