import * as yup from 'yup';
import { decodeAgent, type AgentSpec } from './agent.ts';
import { decodeJob, decodeTrigger } from './automation.ts';
import { at, check, isObject, Issues, sortedJson, str, y } from './shared.ts';
import type { Codec } from './types.ts';

/** BundleSpec is the canonical spec of a `bundle` record: an extension's bundle and its profiles. */
export interface BundleSpec {
  extension_name: string;
  bundle: { name: string; description: string; profiles: BundleProfile[] };
  owner_bridge_platform: string;
  owner_provides_bridge_adapter: boolean;
}

/** BundleProfile is one activatable profile of a bundle. */
export interface BundleProfile {
  name: string;
  description: string;
  channels: { primary: string; items: { name: string; description: string }[] };
  agents: { path: string; agent: AgentSpec; soul?: { source_path: string; body: string }; heartbeat?: { source_path: string; body: string } }[];
  jobs: Record<string, any>[];
  triggers: Record<string, any>[];
  bridges: Record<string, any>[];
}

const shape = yup.object({
  extension_name: y.string().required('is required'),
  bundle: y.object().required('is required').shape({ name: y.string().required('is required'), description: y.string(), profiles: yup.array().required('is required') }),
  owner_bridge_platform: y.string(), owner_provides_bridge_adapter: y.bool(),
});

const unique = (items: string[], path: (i: number) => string, what: string, issues: Issues) => {
  const seen = new Set<string>();
  items.forEach((n, i) => {
    if (!n) return issues.add(path(i), `${what} is required`);
    if (seen.has(n.toLowerCase())) issues.add(path(i), `duplicate ${what} "${n}"`);
    seen.add(n.toLowerCase());
  });
};

function decodeProfile(p: unknown, base: string, b: { ownerAdapter: boolean }, issues: Issues): BundleProfile | undefined {
  if (!isObject(p)) { issues.add(base, 'must be an object'); return undefined; }
  const ch = isObject(p.channels) ? p.channels : {};
  const items = (Array.isArray(ch.items) ? ch.items : []).map((c: any) => ({ name: str(c?.name), description: str(c?.description) }));
  unique(items.map((c: any) => c.name), (i) => at(base, `channels.items[${i}].name`), 'channel name', issues);
  const primary = str(ch.primary);
  if (items.length && !items.some((c: any) => c.name === primary)) issues.add(at(base, 'channels.primary'), 'must name one of the declared channels');
  const agents = (Array.isArray(p.agents) ? p.agents : []).map((a: any, i: number) => {
    const ap = at(base, `agents[${i}]`);
    if (!isObject(a)) { issues.add(ap, 'must be an object'); return undefined; }
    if (!str(a.path)) issues.add(at(ap, 'path'), 'is required');
    const agent = decodeAgent(a.agent, at(ap, 'agent'), issues);
    const doc = (d: any, f: string) => {
      if (d === undefined || d === null) return undefined;
      if (!isObject(d) || typeof d.body !== 'string' || !d.body.trim()) { issues.add(at(ap, `${f}.body`), 'must be a non-blank string'); return undefined; }
      return { source_path: str(d.source_path), body: d.body };
    };
    return agent ? { path: str(a.path), agent, ...(a.soul ? { soul: doc(a.soul, 'soul') } : {}), ...(a.heartbeat ? { heartbeat: doc(a.heartbeat, 'heartbeat') } : {}) } : undefined;
  });
  unique(agents.map((a: any) => a?.agent?.name ?? ''), (i) => at(base, `agents[${i}].agent.name`), 'agent name', issues);
  const opts = { applyDefaults: false, scope: { kind: 'global' as const } };
  const jobs = (Array.isArray(p.jobs) ? p.jobs : []).map((j: any, i: number) => {
    const jp = at(base, `jobs[${i}]`);
    if (!isObject(j)) return issues.add(jp, 'must be an object');
    const { agent, ...rest } = j;
    decodeJob({ ...rest, agent_name: agent, source: 'package' }, jp, issues, opts);
    const chan = str(j.task?.network_channel);
    if (chan && !items.some((c: any) => c.name === chan)) issues.add(at(jp, 'task.network_channel'), 'must be one of the declared channels');
    return sortedJson({ ...j, name: str(j.name), agent: str(agent) });
  });
  unique(jobs.map((j: any) => j?.name ?? ''), (i) => at(base, `jobs[${i}].name`), 'job name', issues);
  const triggers = (Array.isArray(p.triggers) ? p.triggers : []).map((t: any, i: number) => {
    const tp = at(base, `triggers[${i}]`);
    if (!isObject(t)) return issues.add(tp, 'must be an object');
    const { agent, ...rest } = t;
    decodeTrigger({ ...rest, agent_name: agent, source: 'package' }, tp, issues, opts);
    return sortedJson({ ...t, name: str(t.name), agent: str(agent) });
  });
  unique(triggers.map((t: any) => t?.name ?? ''), (i) => at(base, `triggers[${i}].name`), 'trigger name', issues);
  const bridges = (Array.isArray(p.bridges) ? p.bridges : []).map((br: any, i: number) => {
    const bp = at(base, `bridges[${i}]`);
    if (!isObject(br)) return issues.add(bp, 'must be an object');
    if (!str(br.display_name)) issues.add(at(bp, 'display_name'), 'is required');
    if (!b.ownerAdapter && !str(br.extension_name) && !str(br.platform)) issues.add(bp, 'needs extension_name or platform');
    const rp = br.routing_policy;
    if (isObject(rp) && rp.include_thread && !rp.include_peer && !rp.include_group) issues.add(at(bp, 'routing_policy.include_thread'), 'needs include_peer or include_group');
    if (br.delivery_defaults !== undefined && br.delivery_defaults !== null && !isObject(br.delivery_defaults)) issues.add(at(bp, 'delivery_defaults'), 'must be a JSON object');
    (Array.isArray(br.secret_slots) ? br.secret_slots : []).forEach((sl: any, j: number) => {
      if (!str(sl?.name)) issues.add(at(bp, `secret_slots[${j}].name`), 'is required');
      if (!str(sl?.kind)) issues.add(at(bp, `secret_slots[${j}].kind`), 'is required');
    });
    return sortedJson({ ...br, name: str(br.name), display_name: str(br.display_name) });
  });
  unique(bridges.map((x: any) => x?.name ?? ''), (i) => at(base, `bridges[${i}].name`), 'bridge name', issues);
  return {
    name: str(p.name), description: str(p.description), channels: { primary, items },
    agents: agents.filter(Boolean) as BundleProfile['agents'], jobs: jobs as BundleProfile['jobs'], triggers: triggers as BundleProfile['triggers'], bridges: bridges as BundleProfile['bridges'],
  };
}

/** bundleCodec validates a `bundle` spec. */
export const bundleCodec: Codec<BundleSpec> = {
  kind: 'bundle',
  maxBytes: 256 * 1024,
  decode(input, ctx) {
    const issues = new Issues(ctx.unknownFields);
    if (!check(shape, input, issues)) return { ok: false, errors: issues.list };
    const s = input as Record<string, any>;
    const platform = str(s.owner_bridge_platform);
    const ownerAdapter = Boolean(platform) || Boolean(s.owner_provides_bridge_adapter);
    if (!str(s.extension_name)) issues.add('extension_name', 'is required');
    if (!str(s.bundle.name)) issues.add('bundle.name', 'is required');
    const raw: unknown[] = s.bundle.profiles;
    if (raw.length === 0) issues.add('bundle.profiles', 'must have at least one profile');
    const profiles = raw.map((p, i) => decodeProfile(p, `bundle.profiles[${i}]`, { ownerAdapter }, issues));
    unique(profiles.map((p) => p?.name ?? ''), (i) => `bundle.profiles[${i}].name`, 'profile name', issues);
    if (!issues.ok) return { ok: false, errors: issues.list };
    return {
      ok: true,
      spec: {
        extension_name: str(s.extension_name), bundle: { name: str(s.bundle.name), description: str(s.bundle.description), profiles: profiles as BundleProfile[] },
        owner_bridge_platform: platform, owner_provides_bridge_adapter: ownerAdapter,
      },
    };
  },
};
