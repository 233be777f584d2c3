import { createHash } from 'node:crypto';
import { decodeSpec } from '../codecs/index.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { Ref, ResourceRecord, ResourceScope } from '../store/types.ts';
import { readRegistry, type RegistryEntry } from './registry-controller.ts';
import type { KindController, ReconcileResult, ResourceKey } from './types.ts';

/** CHILD_KINDS are the kinds an activation may own, in the order they are synced. */
export const CHILD_KINDS = ['agent', 'agent.soul', 'agent.heartbeat', 'automation.job', 'automation.trigger', 'bridge.instance'] as const;

/** childId is a bundle-side id: prefix + the first 8 bytes of SHA-256 over the trimmed parts joined by "\n". */
export function childId(prefix: string, ...parts: string[]): string {
  return prefix + createHash('sha256').update(parts.map((p) => p.trim()).join('\n')).digest('hex').slice(0, 16);
}

/** DesiredChild is one record an activation projects. */
export interface DesiredChild {
  kind: (typeof CHILD_KINDS)[number];
  id: string;
  spec: unknown;
}

/** BundleProfileMatch is the bundle record and profile an activation names. */
export interface BundleProfileMatch {
  bundle: RegistryEntry;
  profile: any;
}

const eq = (a: unknown, b: unknown) => String(a ?? '').toLowerCase() === String(b ?? '').toLowerCase();

/** findProfile resolves an activation against the bundle registry; names match ignoring case. */
export function findProfile(bundles: RegistryEntry[], spec: { extension_name: string; bundle_name: string; profile_name: string }):
  { ok: true; match: BundleProfileMatch } | { ok: false; reason: string; message: string } {
  const bundle = bundles.find((b) => eq(b.spec.extension_name, spec.extension_name) && eq(b.spec.bundle?.name, spec.bundle_name));
  if (!bundle) return { ok: false, reason: 'BundleNotFound', message: `bundle "${spec.extension_name}/${spec.bundle_name}" does not exist` };
  const profile = (bundle.spec.bundle.profiles ?? []).find((p: any) => eq(p.name, spec.profile_name));
  if (!profile) return { ok: false, reason: 'ProfileNotFound', message: `bundle "${spec.extension_name}/${spec.bundle_name}" has no profile "${spec.profile_name}"` };
  return { ok: true, match: { bundle, profile } };
}

/**
 * planChildren is the pure part of an activation's reconcile: the children its profile projects, each decoded
 * by its kind's codec at the activation's scope, or the reason the activation cannot be projected.
 */
export function planChildren(actId: string, scope: ResourceScope, match: BundleProfileMatch):
  { ok: true; children: DesiredChild[] } | { ok: false; reason: string; message: string } {
  const b = match.bundle.spec;
  const p = match.profile;
  const ext: string = b.extension_name;
  const qualified = (name: string) => `${ext}/${b.bundle.name}/${p.name}/${name}`;
  const raw: DesiredChild[] = [];
  const agentNames = new Set<string>();
  for (const a of p.agents ?? []) {
    const name: string = a.agent.name;
    agentNames.add(name.toLowerCase());
    const agtId = childId('agt_', actId, name);
    const base = `.svc/bundles/${actId}/agents/${name}`;
    raw.push({ kind: 'agent', id: agtId, spec: a.agent });
    if (a.soul) raw.push({ kind: 'agent.soul', id: childId('sol_', actId, name), spec: { agent_name: name, agent_resource_id: agtId, source_path: `${base}/SOUL.md`, body: a.soul.body } });
    if (a.heartbeat) raw.push({ kind: 'agent.heartbeat', id: childId('hbt_', actId, name), spec: { agent_name: name, agent_resource_id: agtId, source_path: `${base}/HEARTBEAT.md`, body: a.heartbeat.body } });
  }
  for (const j of p.jobs ?? []) {
    if (!agentNames.has(String(j.agent).toLowerCase())) return { ok: false, reason: 'AgentReferenceNotFound', message: `job "${j.name}" names agent "${j.agent}", which the profile does not package` };
    const { agent, name, ...rest } = j;
    raw.push({ kind: 'automation.job', id: childId('job_', actId, name), spec: { ...rest, name: qualified(name), agent_name: agent, source: 'package' } });
  }
  for (const t of p.triggers ?? []) {
    if (t.event === 'webhook') return { ok: false, reason: 'WebhookTriggerRejected', message: `trigger "${t.name}" is a webhook trigger; bundles may not declare webhook triggers` };
    if (!agentNames.has(String(t.agent).toLowerCase())) return { ok: false, reason: 'AgentReferenceNotFound', message: `trigger "${t.name}" names agent "${t.agent}", which the profile does not package` };
    const { agent, name, ...rest } = t;
    raw.push({ kind: 'automation.trigger', id: childId('trg_', actId, name), spec: { ...rest, name: qualified(name), agent_name: agent, source: 'package' } });
  }
  for (const br of p.bridges ?? []) {
    raw.push({
      kind: 'bridge.instance', id: childId('bri_', actId, br.name), spec: {
        platform: br.platform || b.owner_bridge_platform || '', extension_name: br.extension_name || ext,
        display_name: br.display_name, source: 'package', enabled: false,
        routing_policy: br.routing_policy, delivery_defaults: br.delivery_defaults,
        secret_slots: (br.secret_slots ?? []).map((s: any) => ({ name: s.name, description: s.description ?? '', required: true })),
      },
    });
  }
  const children: DesiredChild[] = [];
  for (const c of raw) {
    const d = decodeSpec(c.kind, c.spec, { scope });
    if (!d.ok) return { ok: false, reason: 'InvalidChild', message: `${c.kind} "${c.id}": ${d.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}` };
    children.push({ ...c, spec: d.spec });
  }
  return { ok: true, children };
}

/** BundleActivationControllerOptions configures a BundleActivationController. */
export interface BundleActivationControllerOptions {
  store: ResourceStore;
}

/**
 * BundleActivationController projects an activation's profile as owned child records (like a ReplicaSet's
 * Pods): it creates missing children, updates changed ones, deletes extras, and deletes every child when the
 * activation is gone. A missing bundle degrades the activation and leaves its children in place.
 */
export class BundleActivationController implements KindController {
  readonly kind = 'bundle.activation';

  constructor(private readonly o: BundleActivationControllerOptions) {}

  async reconcile(key: ResourceKey, record: ResourceRecord | undefined): Promise<ReconcileResult> {
    const { store } = this.o;
    const owner: Ref = { kind: this.kind, id: key.id };
    const existing = await store.list({ owner });
    if (!record) {
      for (const child of existing) await this.remove(child);
      return { outcome: 'ready', message: `deleted ${existing.length} children` };
    }
    const decoded = decodeSpec(this.kind, record.spec, { scope: record.scope });
    if (!decoded.ok) return { outcome: 'degraded', reason: 'InvalidSpec', message: decoded.errors.map((e) => `${e.path}: ${e.message}`).join('; ') };
    const spec = decoded.spec as { extension_name: string; bundle_name: string; profile_name: string; bind_primary_channel_default: boolean };
    const found = findProfile(await readRegistry(store, 'bundle'), spec);
    if (!found.ok) return { outcome: 'degraded', ...found };
    const conflict = await this.defaultChannelConflict(record, spec.bind_primary_channel_default);
    if (conflict) return { outcome: 'degraded', reason: 'DefaultChannelClaimed', message: conflict };
    const plan = planChildren(key.id, record.scope, found.match);
    if (!plan.ok) return { outcome: 'degraded', reason: plan.reason, message: plan.message };

    const source: Ref = { kind: 'daemon', id: `bundle.activation.${key.id}` };
    for (const child of plan.children) {
      const current = await store.get(child.kind, child.id);
      if (current && (current.owner.kind !== owner.kind || current.owner.id !== owner.id)) {
        return { outcome: 'degraded', reason: 'ChildConflict', message: `${child.kind} "${child.id}" exists and is owned by ${current.owner.kind} "${current.owner.id}"` };
      }
      // NOTE: a version race (the child changed since the read) throws ConflictError: retried with backoff.
      await store.put({ kind: child.kind, id: child.id, scope: record.scope, owner, source, spec: child.spec, expectedVersion: current?.version ?? 0 });
    }
    const wanted = new Set(plan.children.map((c) => `${c.kind} ${c.id}`));
    const extras = existing.filter((r) => !wanted.has(`${r.kind} ${r.id}`));
    for (const extra of extras) await this.remove(extra);
    return { outcome: 'ready', message: `${plan.children.length} children projected` };
  }

  private async remove(child: ResourceRecord): Promise<void> {
    try {
      await this.o.store.delete(child.kind, child.id, child.version);
    } catch (err) {
      // NOTE: already gone is the goal; anything else (a newer version) is retried with backoff.
      if ((err as { status?: number }).status !== 404) throw err;
    }
  }

  /** defaultChannelConflict names the older activation that already claims the default channel, if any. */
  private async defaultChannelConflict(record: ResourceRecord, binds: boolean): Promise<string | undefined> {
    if (!binds) return undefined;
    for (const other of await this.o.store.list({ kind: this.kind })) {
      const s = other.spec as { bind_primary_channel_default?: boolean };
      if (other.id === record.id || !s.bind_primary_channel_default) continue;
      const older = other.created_at < record.created_at || (other.created_at === record.created_at && other.id < record.id);
      if (older) return `bundle.activation "${other.id}" already binds its primary channel as the default`;
    }
    return undefined;
  }
}
