import type { Availability, Decision, Descriptor, LayerTrace, PolicyContext, PolicyResult, ToolView } from './types.ts';

/** Runtime is what the catalog knows about whether a tool can run, independent of policy. */
export interface RuntimeState {
  executable: boolean;
  conflicted: boolean;
  /** Why not executable or conflicted (e.g. `mcp_unreachable`, `conflicted_id`). */
  reason_codes: string[];
}

/** matchesPattern tests a tool id against an exact id or a prefix wildcard (`svc__workspace_*`). */
export function matchesPattern(id: string, pattern: string): boolean {
  return pattern.endsWith('*') ? id.startsWith(pattern.slice(0, -1)) : id === pattern;
}

const anyMatch = (id: string, patterns: string[]) => patterns.some((p) => matchesPattern(id, p));

/** autoApprovable is a tool the approve-reads ceiling lets through: read-only, harmless, no interaction. */
export function autoApprovable(d: Descriptor): boolean {
  return d.read_only && !d.destructive && !d.open_world && !d.requires_interaction && d.risk === 'read';
}

type Step = { result: PolicyResult; reasons?: string[]; deny?: boolean; approval?: boolean };

/**
 * LAYERS is the decision pipeline, in order. Each layer sees the descriptor and the context
 * and returns its result; the first deny stops evaluation. Hooks run only at invoke time (see hooks.ts), so
 * views always say `hook_result: "allowed"`.
 */
const LAYERS: { layer: string; field: keyof Decision; run: (d: Descriptor, c: PolicyContext, explicit: boolean) => Step }[] = [
  {
    layer: 'registry_policy', field: 'registry_policy_result',
    run: (d, c) => {
      if (!c.policy.enabled) return { result: 'disabled', reasons: ['source_disabled'], deny: true };
      if (d.visibility !== 'session' && d.visibility !== 'model') return { result: 'denied', reasons: ['visibility_denied'], deny: true };
      if (anyMatch(d.tool_id, c.policy.deny)) return { result: 'denied', reasons: ['policy_denied'], deny: true };
      return { result: 'allowed' };
    },
  },
  {
    layer: 'agent_deny', field: 'agent_policy_result',
    run: (d, c) => (c.agent && anyMatch(d.tool_id, c.agent.deny_tools) ? { result: 'denied', reasons: ['policy_denied'], deny: true } : { result: c.agent ? 'allowed' : 'unrestricted' }),
  },
  {
    layer: 'session_policy', field: 'session_policy_result',
    run: (d, c) => {
      const tools = c.sessionTools ?? [];
      const servers = c.sessionMcpServers ?? [];
      if (!tools.length && !servers.length) return { result: 'unrestricted' };
      const deny: Step = { result: 'denied', reasons: ['session_denied'], deny: true };
      if (tools.length && !anyMatch(d.tool_id, tools)) return deny;
      if (servers.length && d.backend.kind === 'mcp' && !servers.includes(d.backend.mcp_server)) return deny;
      return { result: 'allowed' };
    },
  },
  {
    layer: 'agent_allow', field: 'agent_policy_result',
    run: (d, c) => {
      const a = c.agent;
      if (!a || (!a.tools.length && !a.toolsets.length)) return { result: a ? 'allowed' : 'unrestricted' };
      const covered = anyMatch(d.tool_id, a.tools) || a.toolsets.some((t) => c.toolsetMembers(t).includes(d.tool_id));
      return covered ? { result: 'allowed' } : { result: 'denied', reasons: ['policy_denied'], deny: true };
    },
  },
  {
    layer: 'source_policy', field: 'source_policy_result',
    run: (d, c, explicit) => {
      if (d.source.kind === 'builtin') return { result: 'allowed' };
      if (d.source.kind === 'dynamic') return { result: 'denied', reasons: ['source_disabled'], deny: true };
      if (explicit) return { result: 'allowed' };
      if (c.policy.trusted_sources.includes(d.source.owner) && autoApprovable(d)) return { result: 'trusted' };
      switch (c.policy.external_default) {
        case 'enabled': return { result: 'allowed' };
        case 'ask': return { result: 'approval_required', reasons: ['approval_required'], approval: true };
        default: return { result: 'denied', reasons: ['source_disabled'], deny: true };
      }
    },
  },
];

const MODES: Decision['system_permission_mode'][] = ['approve-all', 'approve-reads', 'deny-all'];

/**
 * permissionMode is the ceiling in force: the agent's `permissions`, else the configured system mode; with starters,
 * the strictest of theirs and its own (a starter that asks approval of every call keeps asking it of what it started).
 */
export function permissionMode(c: PolicyContext): Decision['system_permission_mode'] {
  const modeOf = (m: string | undefined) => (MODES.includes(m as Decision['system_permission_mode']) ? m as Decision['system_permission_mode'] : c.policy.permission_mode);
  return [c.agent?.permissions, ...(c.starters ?? []).map((s) => s.agent?.permissions)].map(modeOf).reduce((a, b) => (MODES.indexOf(b) > MODES.indexOf(a) ? b : a));
}

/**
 * starterDenial is the first starter whose agent or session policy refuses the tool (the same agent_deny,
 * session_policy and agent_allow rules the context's own policy passed), else undefined.
 */
function starterDenial(d: Descriptor, c: PolicyContext): string | undefined {
  for (const s of c.starters ?? []) {
    const own: PolicyContext = { policy: c.policy, agent: s.agent, sessionTools: s.sessionTools, sessionMcpServers: s.sessionMcpServers, toolsetMembers: s.toolsetMembers };
    if (LAYERS.filter((l) => STARTER_LAYERS.includes(l.layer)).some((l) => l.run(d, own, false).deny)) return s.session_id;
  }
  return undefined;
}

/** STARTER_LAYERS are the layers a starter's policy is held to (the registry and source layers are the context's own). */
const STARTER_LAYERS = ['agent_deny', 'session_policy', 'agent_allow'];

/**
 * decide runs the pipeline for one tool in one context and returns its availability and decision. It starts
 * permissive, applies each layer in order (the first deny stops), then the permission ceiling and the
 * runtime availability. `callable` needs every layer to pass; a required approval does not clear it.
 */
export function decide(d: Descriptor, runtime: RuntimeState, c: PolicyContext): Pick<ToolView, 'availability' | 'decision'> {
  const mode = permissionMode(c);
  const decision: Decision = {
    agent_policy_result: c.agent ? 'allowed' : 'unrestricted', approval_required: false, availability_result: 'allowed', callable: true,
    hook_result: 'allowed', reason_codes: [], registry_policy_result: 'allowed', session_policy_result: 'unrestricted',
    source_policy_result: 'allowed', system_permission_mode: mode, visible_to_operator: true, visible_to_session: true, layers: [],
  };
  const record = (layer: string, result: PolicyResult, reasons: string[] = []) => {
    decision.layers.push({ layer, result, reason_codes: reasons } satisfies LayerTrace);
    for (const r of reasons) if (!decision.reason_codes.includes(r)) decision.reason_codes.push(r);
  };
  // NOTE: an explicit grant (registry allow, `owner:` source grant or the agent's own allow-list) lets an
  // external tool past the source default, as an operator who named it meant.
  const explicit = anyMatch(d.tool_id, c.policy.allow) || c.policy.allow.includes(`owner:${d.source.owner}`)
    || Boolean(c.agent && anyMatch(d.tool_id, c.agent.tools));
  let denied = false;
  for (const layer of LAYERS) {
    const step = layer.run(d, c, explicit);
    (decision[layer.field] as PolicyResult) = step.result;
    record(layer.layer, step.result, step.reasons);
    if (step.approval) decision.approval_required = true;
    if (step.deny) {
      denied = true;
      break;
    }
  }
  if (!denied && c.starters?.length) {
    // NOTE: reported as the session lineage's refusal: the context's own policy allowed the tool, what started it did not.
    const by = starterDenial(d, c);
    decision.session_policy_result = by ? 'denied' : decision.session_policy_result;
    record('starter_policy', by ? 'denied' : 'allowed', by ? ['session_denied'] : []);
    denied = Boolean(by);
  }
  if (!denied) {
    const ceiling = mode === 'deny-all' || (mode === 'approve-reads' && !autoApprovable(d));
    if (ceiling) decision.approval_required = true;
    record('permission_mode', ceiling ? 'approval_required' : 'allowed', ceiling ? ['approval_required'] : []);
  }
  const availability: Availability = {
    authorized: !denied, available: runtime.executable && !runtime.conflicted, conflicted: runtime.conflicted, enabled: c.policy.enabled,
    executable: runtime.executable, reason_codes: [...runtime.reason_codes], registered: true,
  };
  if (!denied && !availability.available) {
    decision.availability_result = runtime.conflicted ? 'conflicted' : 'unavailable';
    record('availability', decision.availability_result, runtime.reason_codes.length ? runtime.reason_codes : ['backend_not_executable']);
    denied = true;
  } else if (!denied) {
    record('availability', 'allowed');
  }
  if (denied) {
    decision.visible_to_session = false;
    decision.callable = false;
  }
  return { availability, decision };
}
