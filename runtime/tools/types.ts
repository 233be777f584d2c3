/** Descriptor is a registered tool as the spec's ToolView `descriptor`. */
export interface Descriptor {
  backend: { extension_id: string; handler: string; kind: string; mcp_server: string; mcp_tool: string; native_name: string; requires_capabilities: string[] };
  concurrency_safe: boolean;
  description: string;
  destructive: boolean;
  display_title: string;
  input_schema: Record<string, unknown>;
  input_schema_digest: string;
  max_result_bytes: number;
  open_world: boolean;
  output_schema: Record<string, unknown>;
  output_schema_digest: string;
  read_only: boolean;
  requires_interaction: boolean;
  risk: 'read' | 'mutating' | 'open_world' | 'destructive';
  search_hints: string[];
  source: { kind: string; owner: string; raw_server_name: string; raw_tool_name: string; resource_id: string; resource_version: string; scope: string; workspace_id: string };
  tags: string[];
  tool_id: string;
  toolsets: string[];
  visibility: 'internal' | 'operator' | 'session' | 'model';
}

/** Availability says whether a registered tool can run at all, before and after policy. */
export interface Availability {
  authorized: boolean;
  available: boolean;
  conflicted: boolean;
  enabled: boolean;
  executable: boolean;
  reason_codes: string[];
  registered: boolean;
}

/** PolicyResult is the vocabulary every layer's result uses. */
export type PolicyResult = 'allowed' | 'denied' | 'approval_required' | 'disabled' | 'trusted' | 'unrestricted' | 'unavailable' | 'conflicted';

/** LayerTrace is one named layer's outcome, so an operator sees which layer decided and why. */
export interface LayerTrace {
  layer: string;
  result: PolicyResult;
  reason_codes: string[];
}

/** Decision is the ToolView `decision`, plus `layers`: the trace of every layer that ran. */
export interface Decision {
  agent_policy_result: PolicyResult;
  approval_required: boolean;
  availability_result: PolicyResult;
  callable: boolean;
  hook_result: PolicyResult;
  reason_codes: string[];
  registry_policy_result: PolicyResult;
  session_policy_result: PolicyResult;
  source_policy_result: PolicyResult;
  system_permission_mode: PermissionMode;
  visible_to_operator: boolean;
  visible_to_session: boolean;
  layers: LayerTrace[];
}

/** ToolView is what the tools routes return for one tool. */
export interface ToolView {
  availability: Availability;
  decision: Decision;
  descriptor: Descriptor;
}

export type PermissionMode = 'approve-all' | 'approve-reads' | 'deny-all';
export type ExternalDefault = 'enabled' | 'ask' | 'disabled';

/** ToolPolicy is the `tools:` configuration section, global overlaid with the workspace's. */
export interface ToolPolicy {
  enabled: boolean;
  /** Registry deny patterns (exact ids or `prefix*`). */
  deny: string[];
  /** Explicit grants: tool patterns, or `owner:<source owner>` for a whole source. */
  allow: string[];
  /** Source owners whose read-only, auto-approvable tools need no approval. */
  trusted_sources: string[];
  external_default: ExternalDefault;
  permission_mode: PermissionMode;
  approval_timeout_ms: number;
  call_timeout_ms: number;
  hook_timeout_ms: number;
  max_result_bytes: number;
  /** Toolsets defined in configuration: id → members. */
  toolsets: Record<string, { tools: string[]; toolsets: string[] }>;
}

/** AgentPolicy is the tool-related part of the agent a call runs as. */
export interface AgentPolicy {
  name: string;
  tools: string[];
  deny_tools: string[];
  toolsets: string[];
  permissions: string;
}

/** PolicyContext is everything the decision pipeline reads for one effective context. */
export interface PolicyContext {
  policy: ToolPolicy;
  agent?: AgentPolicy;
  /** A spawned session's narrowed tool list (PermissionPolicy.tools); enforced only when non-empty. */
  sessionTools?: string[];
  /** A spawned session's narrowed MCP servers (PermissionPolicy.mcp_servers); enforced only when non-empty. */
  sessionMcpServers?: string[];
  /** Tool ids each toolset expands to, for agent `toolsets`. */
  toolsetMembers: (toolset: string) => string[];
  /**
   * The policies of whatever started this context (a spawned session's parent, the agent session that started the
   * loop run or fired the job behind it, and theirs in turn): a tool must pass each of them too, so started work
   * never does more than its starter could.
   */
  starters?: StarterPolicy[];
}

/** StarterPolicy is the agent and session policy of one session up the chain of who started a context. */
export interface StarterPolicy {
  session_id: string;
  agent?: AgentPolicy;
  sessionTools: string[];
  sessionMcpServers: string[];
  toolsetMembers: (toolset: string) => string[];
}

/** ToolEvent is one step of an invocation (kind `tool.call_started`, ...). */
export interface ToolEvent {
  agent_name: string;
  approval_mode: string;
  correlation_id: string;
  decision: string;
  destructive: boolean;
  display_title: string;
  duration_ms: number;
  error_code: string;
  input_digest: string;
  kind: string;
  open_world: boolean;
  read_only: boolean;
  reason_codes: string[];
  redacted_input_fields: string[];
  result_bytes: number;
  result_digest: string;
  result_redaction_paths: string[];
  risk: string;
  session_id: string;
  source_kind: string;
  source_owner: string;
  tool_id: string;
  truncated: boolean;
  workspace_id: string;
  /** progress, progress_total and progress_message are set on `tool.call_progress`: what the backend reported. */
  progress?: number;
  progress_total?: number;
  progress_message?: string;
}

/** ContentBlock is one piece of a tool result. */
export interface ContentBlock {
  data?: unknown;
  metadata?: Record<string, unknown>;
  mime_type?: string;
  text?: string;
  type: string;
}

/** ToolResult is a completed call's output after the result limiter and redaction. */
export interface ToolResult {
  artifacts: { bytes: number; mime_type: string; name: string; uri: string }[];
  bytes: number;
  content: ContentBlock[];
  duration_ms: number;
  metadata: Record<string, unknown>;
  preview: string;
  redactions: { bytes: number; path: string; reason: string }[];
  structured: unknown;
  truncated: boolean;
}

/** TOOL_STATUS is the HTTP status of each tools-family error code; any other code is a 500. */
export const TOOL_STATUS: Record<string, number> = {
  tool_invalid_input: 400, tool_not_found: 404, tool_denied: 403, tool_approval_required: 202, tool_conflict: 409,
  tool_unavailable: 422, tool_result_too_large: 422, tool_backend_failed: 502, tool_canceled: 502, tool_timed_out: 502,
};
const BAD_APPROVAL = ['approval_token_expired', 'approval_token_mismatch', 'approval_token_replayed'];

/**
 * ToolError is a tools-family failure; the API renders `{error:{code, details, layer, message, reason_codes, tool_id}}`
 * with the status its code has in TOOL_STATUS (one table, so a code cannot answer two statuses).
 */
export class ToolError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly toolId = '',
    readonly reasonCodes: string[] = [],
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }

  /** status is the code's HTTP status; an approval that is needed answers 202, a bad approval token 403. */
  get status(): number {
    if (this.code === 'tool_approval_required' && this.reasonCodes.some((r) => BAD_APPROVAL.includes(r))) return 403;
    return TOOL_STATUS[this.code] ?? 500;
  }

  /** layer is the pipeline layer of the first reason code that maps to one. */
  get layer(): string {
    for (const code of this.reasonCodes) {
      const layer = layerOf(code);
      if (layer) return layer;
    }
    return '';
  }
}

function layerOf(code: string): string {
  if (code === 'source_disabled' || code.startsWith('mcp_auth_')) return 'source_policy';
  if (code === 'session_denied') return 'session_lineage';
  if (code === 'policy_denied' || code === 'visibility_denied') return 'registry_policy';
  if (code === 'hook_denied') return 'hook';
  if (code.startsWith('approval_')) return 'approval';
  if (['backend_unhealthy', 'backend_not_executable', 'mcp_unreachable', 'dependency_missing', 'handler_missing', 'extension_not_installed'].includes(code) || code.startsWith('conflicted_')) return 'availability';
  return '';
}
