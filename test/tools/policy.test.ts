import { expect } from 'chai';
import { decide, matchesPattern, type RuntimeState } from '../../runtime/tools/policy.ts';
import { DEFAULT_POLICY } from '../../runtime/tools/runtime.ts';
import type { AgentPolicy, Descriptor, PolicyContext, StarterPolicy, ToolPolicy } from '../../runtime/tools/types.ts';

const tool = (over: Partial<Descriptor> = {}): Descriptor => ({
  backend: { extension_id: '', handler: '', kind: 'mcp', mcp_server: 'fx', mcp_tool: 'echo', native_name: '', requires_capabilities: [] },
  concurrency_safe: true, description: '', destructive: false, display_title: 'Echo', input_schema: { type: 'object' }, input_schema_digest: '',
  max_result_bytes: 1000, open_world: false, output_schema: { type: 'object' }, output_schema_digest: '', read_only: true, requires_interaction: false,
  risk: 'read', search_hints: [], source: { kind: 'mcp', owner: 'fx', raw_server_name: 'fx', raw_tool_name: 'echo', resource_id: 'fx', resource_version: '1', scope: 'global', workspace_id: '' },
  tags: [], tool_id: 'mcp__fx__echo', toolsets: ['team__reads'], visibility: 'session', ...over,
});
const builtin = (over: Partial<Descriptor> = {}) => tool({
  tool_id: 'svc__tool_info', backend: { ...tool().backend, kind: 'native_go', mcp_server: '', mcp_tool: '', native_name: 'tool_info' },
  source: { ...tool().source, kind: 'builtin', owner: 'daemon' }, toolsets: ['svc__catalog'], ...over,
});
const ok: RuntimeState = { executable: true, conflicted: false, reason_codes: [] };
const agent = (over: Partial<AgentPolicy> = {}): AgentPolicy => ({ name: 'coder', tools: [], deny_tools: [], toolsets: [], permissions: '', ...over });
const starter = (over: Partial<StarterPolicy> = {}): StarterPolicy => ({ session_id: 'sess-parent', agent: agent({ name: 'parent' }), sessionTools: [], sessionMcpServers: [], toolsetMembers: () => [], ...over });
const ctx = (policy: Partial<ToolPolicy> = {}, extra: Partial<PolicyContext> = {}): PolicyContext => ({
  policy: { ...DEFAULT_POLICY, ...policy }, toolsetMembers: (id) => (id === 'team__reads' ? ['mcp__fx__echo'] : []), ...extra,
});

/** Each row: the policies in force → the decision's deciding layer result, callable, approval and reason codes. */
const TABLE: { name: string; d: Descriptor; c: PolicyContext; rt?: RuntimeState; want: Record<string, unknown> }[] = [
  { name: 'builtin read tool, defaults: callable, no approval', d: builtin(), c: ctx(), want: { callable: true, approval_required: false, reason_codes: [], source_policy_result: 'allowed', agent_policy_result: 'unrestricted' } },
  { name: 'registry: tools disabled', d: builtin(), c: ctx({ enabled: false }), want: { callable: false, registry_policy_result: 'disabled', reason_codes: ['source_disabled'] } },
  { name: 'registry: internal visibility', d: builtin({ visibility: 'internal' }), c: ctx(), want: { callable: false, visible_to_session: false, visible_to_operator: true, registry_policy_result: 'denied', reason_codes: ['visibility_denied'] } },
  { name: 'registry: deny pattern', d: builtin(), c: ctx({ deny: ['svc__tool_*'] }), want: { callable: false, registry_policy_result: 'denied', reason_codes: ['policy_denied'] } },
  { name: 'agent: deny_tools', d: builtin(), c: ctx({}, { agent: agent({ deny_tools: ['svc__tool_info'] }) }), want: { callable: false, agent_policy_result: 'denied', reason_codes: ['policy_denied'] } },
  { name: 'session: narrowed policy without the tool', d: builtin(), c: ctx({}, { sessionTools: ['svc__workspace_*'] }), want: { callable: false, session_policy_result: 'denied', reason_codes: ['session_denied'] } },
  { name: 'session: narrowed policy with the tool', d: builtin(), c: ctx({}, { sessionTools: ['svc__tool_info'] }), want: { callable: true, session_policy_result: 'allowed' } },
  { name: 'session: narrowed MCP servers without the tool\'s server', d: tool(), c: ctx({ external_default: 'enabled' }, { sessionMcpServers: ['github'] }), want: { callable: false, session_policy_result: 'denied', reason_codes: ['session_denied'] } },
  { name: 'session: narrowed MCP servers do not restrict built-ins', d: builtin(), c: ctx({}, { sessionMcpServers: ['github'] }), want: { callable: true, session_policy_result: 'allowed' } },
  { name: 'agent: allow-list not covering the tool', d: builtin(), c: ctx({}, { agent: agent({ tools: ['svc__workspace_read_file'] }) }), want: { callable: false, agent_policy_result: 'denied', reason_codes: ['policy_denied'] } },
  { name: 'agent: toolset covering the tool', d: tool(), c: ctx({ external_default: 'disabled' }, { agent: agent({ toolsets: ['team__reads'] }) }), want: { callable: false, agent_policy_result: 'allowed', source_policy_result: 'denied', reason_codes: ['source_disabled'] } },
  { name: 'source: external default disabled', d: tool(), c: ctx({ external_default: 'disabled' }), want: { callable: false, source_policy_result: 'denied', reason_codes: ['source_disabled'] } },
  { name: 'source: external default ask', d: tool(), c: ctx({ external_default: 'ask' }), want: { callable: true, approval_required: true, source_policy_result: 'approval_required', reason_codes: ['approval_required'] } },
  { name: 'source: external default enabled', d: tool(), c: ctx({ external_default: 'enabled' }), want: { callable: true, approval_required: false, source_policy_result: 'allowed' } },
  { name: 'source: trusted owner, read-only tool', d: tool(), c: ctx({ trusted_sources: ['fx'] }), want: { callable: true, approval_required: false, source_policy_result: 'trusted' } },
  { name: 'source: trusted owner does not cover a mutating tool', d: tool({ read_only: false, risk: 'mutating' }), c: ctx({ trusted_sources: ['fx'] }), want: { approval_required: true, source_policy_result: 'approval_required' } },
  { name: 'source: explicit owner grant', d: tool(), c: ctx({ allow: ['owner:fx'] }), want: { callable: true, approval_required: false, source_policy_result: 'allowed' } },
  { name: 'source: agent allow-list is an explicit grant', d: tool(), c: ctx({ external_default: 'disabled' }, { agent: agent({ tools: ['mcp__fx__*'] }) }), want: { callable: true, source_policy_result: 'allowed' } },
  { name: 'source: dynamic tools are disabled', d: tool({ source: { ...tool().source, kind: 'dynamic' } }), c: ctx({ allow: ['mcp__fx__echo'] }), want: { callable: false, reason_codes: ['source_disabled'] } },
  { name: 'ceiling: approve-reads asks for a mutating builtin', d: builtin({ read_only: false, risk: 'mutating' }), c: ctx(), want: { callable: true, approval_required: true, reason_codes: ['approval_required'], system_permission_mode: 'approve-reads' } },
  { name: 'ceiling: approve-all lets a mutating builtin through', d: builtin({ read_only: false, risk: 'mutating' }), c: ctx({ permission_mode: 'approve-all' }), want: { approval_required: false, system_permission_mode: 'approve-all' } },
  { name: 'ceiling: deny-all asks even for reads', d: builtin(), c: ctx({ permission_mode: 'deny-all' }), want: { callable: true, approval_required: true } },
  { name: 'ceiling: the agent\'s permissions override the system mode', d: builtin(), c: ctx({ permission_mode: 'approve-all' }, { agent: agent({ permissions: 'deny-all' }) }), want: { approval_required: true, system_permission_mode: 'deny-all' } },
  { name: 'ceiling: open-world read is not auto-approvable', d: builtin({ open_world: true, risk: 'open_world' }), c: ctx(), want: { approval_required: true } },
  { name: 'availability: unreachable backend', d: tool(), c: ctx({ external_default: 'enabled' }), rt: { executable: false, conflicted: false, reason_codes: ['mcp_unreachable'] }, want: { callable: false, availability_result: 'unavailable', reason_codes: ['mcp_unreachable'] } },
  { name: 'availability: conflicted id', d: tool(), c: ctx({ external_default: 'enabled' }), rt: { executable: false, conflicted: true, reason_codes: ['conflicted_id'] }, want: { callable: false, availability_result: 'conflicted', reason_codes: ['conflicted_id'] } },
  { name: 'starter: its agent denies the tool the context\'s own agent allows', d: builtin(), c: ctx({}, { agent: agent(), starters: [starter({ agent: agent({ name: 'parent', deny_tools: ['svc__tool_*'] }) })] }), want: { callable: false, agent_policy_result: 'allowed', session_policy_result: 'denied', reason_codes: ['session_denied'] } },
  { name: 'starter: its allow-list does not cover the tool', d: builtin(), c: ctx({}, { starters: [starter({ agent: agent({ tools: ['svc__workspace_*'] }) })] }), want: { callable: false, reason_codes: ['session_denied'] } },
  { name: 'starter: its narrowed session policy without the tool', d: builtin(), c: ctx({}, { starters: [starter({ sessionTools: ['svc__workspace_*'] })] }), want: { callable: false, reason_codes: ['session_denied'] } },
  { name: 'starter: any one of several refusing denies', d: builtin(), c: ctx({}, { starters: [starter(), starter({ agent: agent({ deny_tools: ['svc__tool_info'] }) })] }), want: { callable: false, reason_codes: ['session_denied'] } },
  { name: 'starter: one allowing the tool grants nothing the context\'s own agent denies', d: builtin(), c: ctx({}, { agent: agent({ deny_tools: ['svc__tool_info'] }), starters: [starter({ agent: agent({ tools: ['svc__tool_info'] }) })] }), want: { callable: false, agent_policy_result: 'denied', reason_codes: ['policy_denied'] } },
  { name: 'starter: allowing the tool leaves it callable', d: builtin(), c: ctx({}, { starters: [starter({ agent: agent({ toolsets: ['svc__catalog'] }), toolsetMembers: () => ['svc__tool_info'] })] }), want: { callable: true, approval_required: false, session_policy_result: 'unrestricted' } },
  { name: 'starter: its stricter permissions are the ceiling', d: builtin(), c: ctx({ permission_mode: 'approve-all' }, { agent: agent({ permissions: 'approve-all' }), starters: [starter({ agent: agent({ permissions: 'deny-all' }) })] }), want: { callable: true, approval_required: true, system_permission_mode: 'deny-all' } },
  { name: 'starter: its looser permissions do not lift the context\'s own', d: builtin({ read_only: false, risk: 'mutating' }), c: ctx({ permission_mode: 'approve-all' }, { agent: agent({ permissions: 'approve-reads' }), starters: [starter({ agent: agent({ permissions: 'approve-all' }) })] }), want: { approval_required: true, system_permission_mode: 'approve-reads' } },
  { name: 'first deny stops: a registry deny hides later layers', d: tool(), c: ctx({ deny: ['mcp__*'], external_default: 'disabled' }, { agent: agent({ deny_tools: ['mcp__fx__echo'] }) }), want: { registry_policy_result: 'denied', agent_policy_result: 'allowed', source_policy_result: 'allowed', reason_codes: ['policy_denied'] } },
];

describe('Tool decision pipeline (table: policies → decision and reason codes)', () => {
  for (const row of TABLE) {
    it(row.name, () => {
      const { decision, availability } = decide(row.d, row.rt ?? ok, row.c);
      expect(decision).to.include(Object.fromEntries(Object.entries(row.want).filter(([k]) => k !== 'reason_codes')));
      if (row.want.reason_codes) expect(decision.reason_codes).to.deep.equal(row.want.reason_codes);
      expect(availability.authorized).to.equal(decision.callable || decision.availability_result !== 'allowed');
      if (!decision.callable) expect(decision.visible_to_session).to.equal(false);
      // Every layer that ran is visible with its own result.
      expect(decision.layers[0].layer).to.equal('registry_policy');
      expect(decision.hook_result).to.equal('allowed');
    });
  }

  it('matches exact ids and prefix wildcards only', () => {
    expect(matchesPattern('svc__tool_info', 'svc__tool_info')).to.equal(true);
    expect(matchesPattern('svc__tool_info', 'svc__tool_*')).to.equal(true);
    expect(matchesPattern('svc__tool_info', 'svc__tool')).to.equal(false);
    expect(matchesPattern('mcp__fx__echo', 'svc__*')).to.equal(false);
  });
});
