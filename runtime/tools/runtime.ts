import { createHash } from 'node:crypto';
import { realpath } from 'node:fs/promises';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { Logger } from 'pino';
import type { SessionService } from '../sessions/session-service.ts';
import type { WorkspaceService } from '../workspaces/workspace-service.ts';
import { parseDuration } from '../../codecs/duration.ts';
import { RegistryCache } from '../../controllers/registry-controller.ts';
import { NotFoundError, ServiceError } from '../../store/errors.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { SessionFields } from '../../store/session-store.ts';
import type { Workspace } from '../../store/workspace-store.ts';
import type { Metrics } from '../process/metrics.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { pickAgent, SCRIPTED_AGENT } from '../agents/resolve-agent.ts';
import type { Settings } from '../process/settings.ts';
import type { SkillCatalog } from '../skills/catalog.ts';
import { Approvals, inputDigest, type Binding } from './approvals.ts';
import { Catalog, expandToolset, type CatalogEntry, type Snapshot } from './catalog.ts';
import type { Gate } from '../hooks/gate.ts';
import type { McpPool, McpProgress } from './mcp.ts';
import type { ExtensionToolHost } from '../extensions/tool-host.ts';
import type { NativeContext } from './native.ts';
import type { AutomationReader } from '../automation/types.ts';
import { decide } from './policy.ts';
import { redactString, shapeResult } from './results.ts';
import { ToolError, type AgentPolicy, type ContentBlock, type Descriptor, type PolicyContext, type StarterPolicy, type ToolEvent, type ToolPolicy, type ToolResult, type ToolView } from './types.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/** ContextQuery is the effective-context query of the tools routes (and the same fields of a request body). */
export interface ContextQuery {
  workspace_id?: string;
  workspace?: string;
  session_id?: string;
  agent_name?: string;
}

/** Effective is a resolved context: the workspace, session and agent a decision is made for, and the policy. */
export interface Effective {
  workspace?: Workspace;
  session?: SessionFields;
  agent?: AgentPolicy;
  policy: ToolPolicy;
  snapshot: Snapshot;
  pc: PolicyContext;
}

/** Toolset is the spec's Toolset view. */
export interface Toolset {
  expanded_tools: string[];
  id: string;
  reason_codes: string[];
  status: 'expanded' | 'degraded';
  tools: string[];
  toolsets: string[];
}

/** DEFAULT_POLICY is the tools configuration when neither the global nor the workspace file sets a field. */
export const DEFAULT_POLICY: ToolPolicy = {
  enabled: true, deny: [], allow: [], trusted_sources: [], external_default: 'ask', permission_mode: 'approve-reads',
  approval_timeout_ms: 120_000, call_timeout_ms: 60_000, hook_timeout_ms: 5_000, max_result_bytes: 256 * 1024, toolsets: {},
};

/** readPolicy overlays a `tools:` section on a policy; values of the wrong type are ignored. */
function readPolicy(base: ToolPolicy, raw: unknown): ToolPolicy {
  if (!raw || typeof raw !== 'object') return base;
  const t = raw as Record<string, unknown>;
  const list = (v: unknown, d: string[]) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : d);
  const one = <T extends string>(v: unknown, allowed: readonly T[], d: T) => (allowed.includes(v as T) ? (v as T) : d);
  const ms = (v: unknown, d: number) => (typeof v === 'string' && (parseDuration(v) ?? 0) > 0 ? parseDuration(v)! : d);
  const toolsets: ToolPolicy['toolsets'] = { ...base.toolsets };
  if (t.toolsets && typeof t.toolsets === 'object') {
    for (const [id, def] of Object.entries(t.toolsets as Record<string, { tools?: unknown; toolsets?: unknown }>)) toolsets[id] = { tools: list(def?.tools, []), toolsets: list(def?.toolsets, []) };
  }
  return {
    enabled: typeof t.enabled === 'boolean' ? t.enabled : base.enabled,
    deny: list(t.deny, base.deny), allow: list(t.allow, base.allow), trusted_sources: list(t.trusted_sources, base.trusted_sources),
    external_default: one(t.external_default, ['enabled', 'ask', 'disabled'] as const, base.external_default),
    permission_mode: one(t.permission_mode, ['approve-all', 'approve-reads', 'deny-all'] as const, base.permission_mode),
    approval_timeout_ms: ms(t.approval_timeout, base.approval_timeout_ms), call_timeout_ms: ms(t.call_timeout, base.call_timeout_ms),
    hook_timeout_ms: ms(t.hook_timeout, base.hook_timeout_ms),
    max_result_bytes: Number.isInteger(t.max_result_bytes) && (t.max_result_bytes as number) > 0 ? (t.max_result_bytes as number) : base.max_result_bytes,
    toolsets,
  };
}

/**
 * Caller is who asks for a tool call. An operator (`POST /api/tools/{id}/invoke`, authenticated as an operator)
 * may name any context. An agent (`/api/agent/mcp`, authenticated by its session token) acts only as its own
 * session, in that session's workspace; the sessions its tools may read are its lineage (agentMayRead).
 */
export type Caller = { kind: 'operator' } | { kind: 'agent'; session: SessionFields };

/** OPERATOR is the caller of the operator routes. */
export const OPERATOR: Caller = { kind: 'operator' };

/** SessionLineage is the part of a session's lineage the tool policy reads. */
interface SessionLineage {
  parent_session_id?: string;
  /** The agent session whose work created this session (a loop run or an automation run it started), if any. */
  started_by_session_id?: string;
  permission_policy?: { tools?: string[]; mcp_servers?: string[] };
}

/** DENY_ALL is the policy of a starter that cannot be read: no tool passes it. */
const DENY_ALL: AgentPolicy = { name: '', tools: [], deny_tools: ['*'], toolsets: [], permissions: 'deny-all' };

/** MAX_LINEAGE_HOPS bounds the walk up a lineage (spawn depth is bounded far lower; this guards a corrupt chain). */
const MAX_LINEAGE_HOPS = 64;

/** InvokeRequest is the body of `POST /api/tools/{id}/invoke`. */
export interface InvokeRequest extends ContextQuery {
  input?: unknown;
  approval_token?: string;
  tool_call_id?: string;
  turn_id?: string;
  correlation_id?: string;
  sensitive_input_fields?: string[];
}

/**
 * ToolRuntime answers the tools family: it resolves the effective context, merges the catalog, runs the
 * decision pipeline, and dispatches invocations (schema check → pre-call hooks → approval → backend →
 * result limiter and redaction), recording the ToolEvents of each step.
 */
export class ToolRuntime {
  readonly catalog: Catalog;
  private readonly approvals: Approvals;
  private readonly registries: RegistryCache;
  private readonly ajv = addFormats(new Ajv({ allErrors: true, strict: false }));
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly bodies = new WeakMap<Snapshot, Map<string, Buffer>>();

  constructor(private readonly o: {
    store: ResourceStore; workspaces: WorkspaceService; sessions: SessionService; settings: Settings; pool: McpPool; skills: SkillCatalog;
    dataDir: string; metrics: Metrics; logger: Logger; security: SecurityPolicy; heartbeat?: NativeContext['heartbeat'];
    /** The automation family the `svc__automation_*` tools read and fire (absent: those tools are unavailable). */
    automation?: AutomationReader;
    /** The task family the `svc__tasks`/`svc__autonomy` tools use (absent: those tools are unavailable). */
    tasks?: NativeContext['tasks'];
    /** The model catalog the `svc__provider_models` tools read and refresh (absent: those tools are unavailable). */
    models?: NativeContext['models'];
    /** The memory family the `svc__memory_*` tools use (absent: those tools are unavailable). */
    memory?: NativeContext['memory'];
    /** The loop family the `svc__loops` tools use (absent: those tools are unavailable). */
    loops?: NativeContext['loops'];
    /** The hook gate: tool.pre_call hooks run through it (runtime/hooks/gate.ts). */
    hooks: Gate;
    /** Extension daemons: their `extension_host` tools (absent: those tools are not executable). */
    extensions?: ExtensionToolHost;
  }) {
    this.registries = new RegistryCache(o.store);
    this.catalog = new Catalog(this.registries, o.pool, o.extensions);
    this.approvals = new Approvals(o.store);
  }

  /** resolve turns an effective-context query into the workspace, session, agent, policy and catalog. */
  async resolve(q: ContextQuery): Promise<Effective> {
    const ref = q.workspace_id || q.workspace;
    let workspace = ref ? await this.o.workspaces.get(ref) : undefined;
    const session = q.session_id ? await this.o.sessions.get(q.session_id) : undefined;
    if (session && workspace && session.workspace_id !== workspace.id) {
      throw new ToolError('tool_invalid_input', 'invalid tool request', '', ['scope_mismatch'], { session_id: session.id, workspace_id: workspace.id });
    }
    if (session && !workspace) workspace = await this.o.workspaces.get(String(session.workspace_id));
    const [global, local] = await Promise.all([this.o.settings.global(), workspace ? this.o.settings.workspace(workspace.root_dir) : undefined]);
    const policy = readPolicy(readPolicy(DEFAULT_POLICY, global.data.tools), local?.data.tools);
    const agentName = q.agent_name || (session?.agent_name as string | undefined);
    const memo = new Map<string, string[]>();
    // NOTE: toolsetMembers is first called when a decision is made, after the snapshot is read; the starters are read
    // beside the snapshot and the agent, so they add no round trip of their own.
    let snapshot!: Snapshot;
    const toolsetMembers = (id: string) => memo.get(id) ?? memo.set(id, expandToolset(id, snapshot.toolsets, (t) => snapshot.byId.has(t)).tools).get(id)!;
    const [snap, agent, starters] = await Promise.all([
      this.catalog.snapshot(workspace?.id, policy), agentName ? this.agent(agentName, workspace?.id) : undefined, session ? this.starters(session, toolsetMembers) : [],
    ]);
    snapshot = snap;
    const lineage = (session?.lineage ?? {}) as SessionLineage;
    const pc: PolicyContext = {
      policy, agent, sessionTools: lineage.permission_policy?.tools ?? [], sessionMcpServers: lineage.permission_policy?.mcp_servers ?? [],
      toolsetMembers, ...(starters.length ? { starters } : {}),
    };
    return { workspace, session, agent, policy, snapshot, pc };
  }

  /**
   * starters walks up who started a session: a spawned session's parent, the agent session a loop run or an
   * automation run that created it acted for (lineage `started_by_session_id`), and the agent session that started
   * the task run it holds the lease of, then theirs in turn. NOTE: a
   * starter that cannot be read (deleted, or its agent definition gone) is held to deny everything: what it would
   * have allowed is unknown, and started work is narrowed, never widened.
   */
  private async starters(session: SessionFields, toolsetMembers: (id: string) => string[]): Promise<StarterPolicy[]> {
    const out: StarterPolicy[] = [];
    const seen = new Set([session.id]);
    const next = async (s: SessionFields) => {
      const l = (s.lineage ?? {}) as SessionLineage;
      const lease = this.o.tasks ? await this.o.tasks.leaseStarter(s.id) : '';
      return [l.parent_session_id, l.started_by_session_id, lease].filter((id): id is string => typeof id === 'string' && id !== '' && !seen.has(id));
    };
    const queue = await next(session);
    while (queue.length && out.length < MAX_LINEAGE_HOPS) {
      const id = queue.shift()!;
      if (seen.has(id)) continue;
      seen.add(id);
      const s = await this.o.sessions.get(id).catch(() => undefined);
      const agent = s && s.agent_name ? await this.agent(String(s.agent_name), String(s.workspace_id)).catch(() => DENY_ALL) : s ? undefined : DENY_ALL;
      const l = (s?.lineage ?? {}) as SessionLineage;
      out.push({ session_id: id, agent, sessionTools: l.permission_policy?.tools ?? [], sessionMcpServers: l.permission_policy?.mcp_servers ?? [], toolsetMembers });
      if (s) queue.push(...(await next(s)));
    }
    return out;
  }

  /** agent reads the tool policy of an agent definition; a workspace definition wins over a global one. */
  private async agent(name: string, workspaceId?: string): Promise<AgentPolicy> {
    const { agent: entries } = (await this.registries.read(['agent'])).entries;
    const pick = pickAgent(entries, name, workspaceId);
    if (!pick && name !== SCRIPTED_AGENT) throw new NotFoundError(`agent "${name}" does not exist`, 'agent_not_found', { agent_name: name });
    const s = pick?.spec ?? {};
    return { name, tools: s.tools ?? [], deny_tools: s.deny_tools ?? [], toolsets: s.toolsets ?? [], permissions: s.permissions ?? '' };
  }

  /** view decides one catalog entry in a resolved context. */
  viewOf(e: CatalogEntry, eff: Effective): ToolView {
    return { ...decide(e.descriptor, e.runtime, eff.pc), descriptor: e.descriptor };
  }

  /**
   * listJson is `list` serialized as the `{tools}` body. NOTE: with a thousand tools, deciding and serializing
   * dominate a list request; both depend only on the snapshot and the context, so the body is kept per pair,
   * encoded once (a Buffer is sent as it is; a string would be encoded again for every response).
   */
  listJson(eff: Effective, sessionOnly: boolean): Buffer {
    const starters = (eff.pc.starters ?? []).map((s) => [s.agent ?? null, s.sessionTools, s.sessionMcpServers]);
    const key = JSON.stringify([sessionOnly, eff.policy, eff.agent ?? null, eff.pc.sessionTools ?? [], eff.pc.sessionMcpServers ?? [], starters]);
    let bodies = this.bodies.get(eff.snapshot);
    if (!bodies) this.bodies.set(eff.snapshot, (bodies = new Map()));
    let body = bodies.get(key);
    if (body === undefined) {
      if (bodies.size >= 64) bodies.delete(bodies.keys().next().value!);
      bodies.set(key, (body = Buffer.from(JSON.stringify({ tools: this.list(eff, sessionOnly) }))));
    }
    return body;
  }

  /** list is the operator list (every registered tool) or, for a session, the tools it can see and call. */
  list(eff: Effective, sessionOnly: boolean): ToolView[] {
    const views = eff.snapshot.entries.map((e) => this.viewOf(e, eff));
    return sessionOnly ? views.filter((v) => v.decision.visible_to_session && v.decision.callable) : views;
  }

  /** get returns one tool's view, or tool_not_found. */
  get(id: string, eff: Effective): ToolView {
    const e = eff.snapshot.byId.get(id);
    if (!e) throw new ToolError('tool_not_found', 'tool not found', id, ['tool_unknown']);
    return this.viewOf(e, eff);
  }

  /**
   * search ranks tools matching a case-insensitive substring over id, title, description, source owner, raw
   * names, tags, search hints and toolsets: an exact id first, then id, title, hints/tags, and description
   * matches; an empty query returns everything. Ties keep id order.
   */
  search(views: ToolView[], query: string, limit: number): ToolView[] {
    const q = query.trim().toLowerCase();
    if (!q) return views.slice(0, limit);
    const score = (d: Descriptor): number => {
      const has = (s: string) => s.toLowerCase().includes(q);
      if (d.tool_id === q) return 100;
      if (has(d.tool_id)) return 50;
      if (has(d.display_title)) return 40;
      if (d.search_hints.some(has) || d.tags.some(has)) return 30;
      if (d.toolsets.some(has) || has(d.source.owner) || has(d.source.raw_server_name) || has(d.source.raw_tool_name)) return 20;
      if (has(d.description)) return 10;
      return 0;
    };
    return views.map((v) => ({ v, s: score(v.descriptor) })).filter((x) => x.s > 0).sort((a, b) => b.s - a.s).slice(0, limit).map((x) => x.v);
  }

  /** toolsets lists every toolset with its expansion; in a session or agent context only tools it may call. */
  toolsets(eff: Effective): Toolset[] {
    return [...eff.snapshot.toolsets.keys()].sort().map((id) => this.toolset(id, eff));
  }

  /** toolset is one toolset, expanded through nested toolsets (unknown members and cycles make it degraded). */
  toolset(id: string, eff: Effective): Toolset {
    const def = eff.snapshot.toolsets.get(id);
    if (!def) throw new ToolError('tool_not_found', 'toolset not found', id, ['toolset_unknown']);
    const exp = expandToolset(id, eff.snapshot.toolsets, (t) => eff.snapshot.byId.has(t));
    const scoped = eff.session || eff.agent;
    const expanded = scoped ? exp.tools.filter((t) => this.viewOf(eff.snapshot.byId.get(t)!, eff).decision.callable) : exp.tools;
    return { id, tools: def.tools, toolsets: def.toolsets, expanded_tools: expanded, reason_codes: exp.reason_codes, status: exp.reason_codes.length ? 'degraded' : 'expanded' };
  }

  /** approve issues an approval token bound to the tool, the session's scope and the input digest. */
  async approve(id: string, body: ContextQuery & { input?: unknown; input_digest?: unknown }) {
    if (typeof body.session_id !== 'string' || !body.session_id) {
      throw new ToolError('tool_invalid_input', 'invalid tool request', id, [], { session_id: 'is required' });
    }
    const eff = await this.resolve(body);
    const view = this.get(id, eff);
    if (!view.decision.visible_to_session) throw this.denied(id, view);
    const digest = inputDigest(body.input);
    if (body.input_digest !== undefined && body.input_digest !== digest) {
      throw new ToolError('tool_invalid_input', 'invalid tool request', id, ['approval_token_mismatch'], { input_digest: 'does not match the input', expected: digest });
    }
    return this.approvals.issue(this.binding(id, eff, digest), eff.policy.approval_timeout_ms);
  }

  /**
   * grant issues an approval token for one call that an operator already approved elsewhere, in any context (with or
   * without a session): a loop's tool node whose call needed approval and was approved through the loop run's approve
   * route. NOTE: in-process only; no route reaches it, and the token is bound like approve's (tool, context, input).
   */
  async grant(id: string, q: ContextQuery, input: unknown) {
    const eff = await this.resolve(q);
    return this.approvals.issue(this.binding(id, eff, inputDigest(input)), eff.policy.approval_timeout_ms);
  }

  private binding(id: string, eff: Effective, digest: string): Binding {
    return { tool_id: id, session_id: eff.session?.id ?? '', workspace_id: eff.workspace?.id ?? '', agent_name: eff.agent?.name ?? '', input_digest: digest };
  }

  private denied(id: string, view: ToolView): ToolError {
    const d = view.decision;
    const details = { layers: d.layers };
    // NOTE: the deciding (last) layer's reasons come first, so the error's `layer` names the layer that refused.
    const deciding = d.layers.at(-1)?.reason_codes ?? [];
    const reasons = [...deciding, ...d.reason_codes.filter((r) => !deciding.includes(r))];
    if (d.availability_result === 'conflicted') return new ToolError('tool_conflict', 'tool id is conflicted', id, reasons, details);
    if (d.availability_result === 'unavailable') return new ToolError('tool_unavailable', 'tool is unavailable', id, reasons, details);
    return new ToolError('tool_denied', 'tool call denied', id, reasons, details);
  }

  /**
   * agentMayRead refuses (403 `tool_denied`, `scope_mismatch`) a session an agent's tool may not read. It may
   * read its own session and the sessions it spawned, directly or through its children. NOTE: not its parent
   * or siblings: spawning narrows what a session may do and never widens it, so a child must not read what its
   * parent saw. A session that does not exist is refused the same way, so the answer does not tell an agent
   * which session ids exist elsewhere.
   */
  private async agentMayRead(caller: SessionFields, sessionId: string, toolId: string): Promise<void> {
    let cur = sessionId;
    for (let hops = 0; cur && hops <= MAX_LINEAGE_HOPS; hops++) {
      if (cur === caller.id) return;
      const s = await this.o.sessions.get(cur).catch(() => undefined);
      if (!s || s.workspace_id !== caller.workspace_id) break;
      cur = String((s.lineage as { parent_session_id?: string } | undefined)?.parent_session_id ?? '');
    }
    throw new ToolError('tool_denied', 'the session is outside the calling session\'s lineage', toolId, ['scope_mismatch'], { session_id: sessionId });
  }

  /**
   * invoke runs one call through the dispatch order and returns the ToolInvocation. An agent
   * caller's context must be its own session (and that session's workspace). `onprogress` receives an MCP
   * backend's progress notifications (message redacted like the result) while the call runs; each is also
   * recorded as a `tool.call_progress` event.
   */
  async invoke(id: string, req: InvokeRequest, caller: Caller = OPERATOR, onprogress?: (p: McpProgress) => void) {
    const started = Date.now();
    if (caller.kind === 'agent') {
      const ws = req.workspace_id || req.workspace;
      if (req.session_id !== caller.session.id || (ws && ws !== caller.session.workspace_id)) {
        throw new ToolError('tool_denied', 'an agent calls tools only as its own session', id, ['scope_mismatch'], { session_id: req.session_id ?? '', ...(ws ? { workspace_id: ws } : {}) });
      }
    }
    const eff = await this.resolve(req);
    const entry = eff.snapshot.byId.get(id);
    if (!entry) throw new ToolError('tool_not_found', 'tool not found', id, ['tool_unknown']);
    const view = this.viewOf(entry, eff);
    const d = entry.descriptor;
    const input = req.input ?? {};
    const digest = inputDigest(input);
    const events: ToolEvent[] = [];
    const ev = (kind: string, extra: Partial<ToolEvent> = {}) => events.push({
      agent_name: eff.agent?.name ?? '', approval_mode: view.decision.approval_required ? 'token' : 'none', correlation_id: req.correlation_id ?? '',
      decision: '', destructive: d.destructive, display_title: d.display_title, duration_ms: Date.now() - started, error_code: '', input_digest: digest, kind,
      open_world: d.open_world, read_only: d.read_only, reason_codes: [], redacted_input_fields: req.sensitive_input_fields ?? [], result_bytes: 0,
      result_digest: '', result_redaction_paths: [], risk: d.risk, session_id: eff.session?.id ?? '', source_kind: d.source.kind, source_owner: d.source.owner,
      tool_id: id, truncated: false, workspace_id: eff.workspace?.id ?? '', ...extra,
    });
    const fail = (err: ToolError, kind: 'tool.call_failed' | 'tool.call_denied'): ToolError => {
      ev(kind, { decision: kind === 'tool.call_denied' ? 'deny' : '', error_code: err.code, reason_codes: err.reasonCodes });
      this.o.metrics.toolCalls.inc({ source_kind: d.source.kind, outcome: err.code });
      return new ToolError(err.code, err.message, id, err.reasonCodes, { ...err.details, events });
    };
    ev('tool.call_started');
    if (!view.decision.callable) throw fail(this.denied(id, view), 'tool.call_denied');

    const validate = this.validator(d);
    if (!validate(input)) {
      const errors = (validate.errors ?? []).map((e) => ({ path: e.keyword === 'required' ? `${e.instancePath}/${(e.params as { missingProperty: string }).missingProperty}` : e.instancePath || '/', message: e.message ?? 'is invalid' }));
      throw fail(new ToolError('tool_invalid_input', `input does not match the tool's input_schema at ${errors[0]?.path ?? '/'}`, id, ['schema_invalid'], { errors }), 'tool.call_failed');
    }

    // Gated point tool.pre_call: sync hooks in priority order; the first deny (or a required hook's error) stops the call.
    const gate = await this.o.hooks.gate('tool.pre_call', {
      tool_id: d.tool_id, tool_name: d.backend.mcp_tool || d.backend.native_name || d.tool_id, tool_read_only: d.read_only,
      input, input_digest: digest, session_id: eff.session?.id ?? '', session_type: eff.session ? String(eff.session.type || 'user') : '',
      workspace_id: eff.workspace?.id ?? '', workspace_root: eff.workspace?.root_dir ?? '', agent_name: eff.agent?.name ?? '',
    }, { timeoutMs: eff.policy.hook_timeout_ms, cwd: eff.workspace?.root_dir ?? this.o.dataDir, private: ['input'], source: 'tools' });
    const hooks = gate.hooks;
    if (gate.denied) throw fail(new ToolError('tool_denied', 'tool call denied by a hook', id, ['hook_denied'], { hook: gate.hook, reason: gate.reason, hooks }), 'tool.call_denied');

    if (view.decision.approval_required) {
      const reasons = !req.approval_token ? ['approval_token_missing'] : await this.approvals.consume(req.approval_token, this.binding(id, eff, digest)).then((r) => (r ? [r] : []));
      if (reasons.length) {
        // NOTE: a missing token is an ordinary "needs approval" answer (202); a bad one is refused (403).
        throw fail(new ToolError('tool_approval_required', 'tool approval required', id, [...reasons, 'approval_required'], { input_digest: digest }), 'tool.call_denied');
      }
    }

    const progress = (p: McpProgress) => {
      const message = p.message === undefined ? undefined : redactString(p.message, entry.secrets).text;
      ev('tool.call_progress', { progress: p.progress, ...(p.total !== undefined ? { progress_total: p.total } : {}), ...(message !== undefined ? { progress_message: message } : {}) });
      onprogress?.({ progress: p.progress, ...(p.total !== undefined ? { total: p.total } : {}), ...(message !== undefined ? { message } : {}) });
    };
    let raw: { content: ContentBlock[]; structured?: unknown; isError?: boolean };
    try {
      raw = await this.call(entry, input, eff, req, caller, progress);
    } catch (err) {
      if (err instanceof ToolError) throw fail(err, err.code === 'tool_denied' ? 'tool.call_denied' : 'tool.call_failed');
      // NOTE: a built-in tool asked for something that does not exist (a session, a skill): the input is at fault.
      if (err instanceof ServiceError && err.status < 500) throw fail(new ToolError('tool_invalid_input', err.message, id, [], { code: err.code, ...err.evidence }), 'tool.call_failed');
      // NOTE: a backend's error may quote its secrets (an MCP server's or a daemon's): masked as its results are.
      const timedOut = /timed? ?out/i.test((err as Error).message);
      throw fail(new ToolError(timedOut ? 'tool_timed_out' : 'tool_backend_failed', timedOut ? 'tool call timed out' : 'tool backend failed', id, [timedOut ? 'call_timed_out' : 'backend_unhealthy'], { message: redactString((err as Error).message, entry.secrets).text.slice(0, 500) }), 'tool.call_failed');
    }
    // NOTE: the backend's own secrets with their redaction report, then every value the process knows as secret (an
    // echo tool handed another's key, a built-in reading what was stored before the value became a secret).
    const result: ToolResult = (await this.o.security.secrets.known.mask()).value(shapeResult(raw, d.max_result_bytes, entry.secrets, Date.now() - started));
    result.metadata = { ...result.metadata, hooks };
    const resultDigest = `sha256:${createHash('sha256').update(JSON.stringify({ content: result.content, structured: result.structured })).digest('hex')}`;
    const done = { result_bytes: result.bytes, result_digest: resultDigest, truncated: result.truncated, result_redaction_paths: result.redactions.map((r) => r.path) };
    if (raw.isError) {
      throw fail(new ToolError('tool_backend_failed', 'the tool reported an error', id, [], { result }), 'tool.call_failed');
    }
    ev('tool.call_completed', { ...done, decision: 'allow' });
    if (result.truncated) ev('tool.result_truncated', { ...done, reason_codes: ['result_budget_exceeded'] });
    this.o.metrics.toolCalls.inc({ source_kind: d.source.kind, outcome: 'completed' });
    return { tool_id: id, status: 'completed', result, truncated: result.truncated, duration_ms: Date.now() - started, events };
  }

  private validator(d: Descriptor): ValidateFunction {
    let v = this.validators.get(d.input_schema_digest);
    if (!v) {
      try {
        v = this.ajv.compile(d.input_schema);
      } catch (err) {
        throw new ToolError('tool_unavailable', 'the tool\'s input_schema does not compile', d.tool_id, ['schema_invalid'], { message: (err as Error).message });
      }
      this.validators.set(d.input_schema_digest, v);
    }
    return v;
  }

  private async call(entry: CatalogEntry, input: unknown, eff: Effective, req: InvokeRequest, caller: Caller, onprogress: (p: McpProgress) => void): Promise<{ content: ContentBlock[]; structured?: unknown; isError?: boolean }> {
    const b = entry.backend;
    if (b.kind === 'native') {
      if (b.tool.needs.includes('workspace') && !eff.workspace) throw new ToolError('tool_unavailable', 'this tool needs a workspace in its context', entry.descriptor.tool_id, ['dependency_missing'], { context: 'workspace_id' });
      if (b.tool.needs.includes('workspace')) {
        // NOTE: checked again at each call, not only when the workspace was stored: its root may have been
        // replaced by a symlink since, or WORKSPACE_ROOTS tightened.
        const root = await realpath(eff.workspace!.root_dir).catch(() => eff.workspace!.root_dir);
        const why = this.o.security.workspaceRoots.workspaceRefusal(root);
        if (why) throw new ToolError('tool_denied', `the workspace root ${root} is not allowed: ${why}`, entry.descriptor.tool_id, ['scope_mismatch'], { workspace_id: eff.workspace!.id });
      }
      const ctx: NativeContext = {
        workspace: eff.workspace, sessionId: eff.session?.id ?? req.session_id ?? '',
        recap: async (sid, limit) => {
          if (caller.kind === 'agent') await this.agentMayRead(caller.session, sid, entry.descriptor.tool_id);
          return this.o.sessions.recap(sid, limit);
        },
        search: async (query, limit) => this.search(this.list(eff, Boolean(eff.session)), query, limit).map((v) => v.descriptor),
        describe: async (toolId) => eff.snapshot.byId.get(toolId)?.descriptor,
        skills: () => this.o.skills.list({ workspace: eff.workspace, agentName: eff.agent?.name }),
        skill: (name) => this.o.skills.content(name, { workspace: eff.workspace, agentName: eff.agent?.name }),
        heartbeat: this.o.heartbeat, agentName: eff.agent?.name ?? '',
        automation: this.o.automation,
        tasks: this.o.tasks,
        models: this.o.models,
        memory: this.o.memory,
        loops: this.o.loops,
      };
      const out = await withTimeout(b.tool.run(input, ctx), eff.policy.call_timeout_ms);
      return { content: out.content, structured: out.structured };
    }
    if (b.kind === 'mcp') {
      const res = await this.o.pool.call(b.server, b.tool, input, eff.policy.call_timeout_ms, undefined, onprogress);
      const content = (res.content as Record<string, any>[] ?? []).map(fromMcpBlock);
      return { content, structured: res.structuredContent, isError: Boolean(res.isError) };
    }
    if (b.kind === 'extension' && this.o.extensions) {
      // NOTE: a daemon answers `tools/call` as an MCP server does: content blocks, structuredContent, isError.
      const res = await this.o.extensions.call(b.extension, b.handler, input, eff.policy.call_timeout_ms);
      const content = ((res.content ?? []) as Record<string, any>[]).map(fromMcpBlock);
      return { content, structured: res.structuredContent, isError: Boolean(res.isError) };
    }
    throw new ToolError('tool_unavailable', 'tool is unavailable', entry.descriptor.tool_id, entry.runtime.reason_codes);
  }
}

/**
 * fromMcpBlock keeps an MCP content block's type and what describes it: `data` is the payload (base64 of an image
 * or audio block, the embedded resource, a link's uri) and `metadata` the rest (annotations; a link's name,
 * title, description, size), so /api/agent/mcp can give the agent the same block back (toMcpBlock).
 */
function fromMcpBlock(c: Record<string, any>): ContentBlock {
  const { type, text, data, resource, uri, mimeType, ...rest } = c;
  const metadata = Object.keys(rest).length ? { metadata: rest } : {};
  if (type === 'text') return { type: 'text', text: String(text ?? ''), ...metadata };
  return { type: String(type), data: data ?? resource ?? uri ?? null, mime_type: mimeType ?? resource?.mimeType ?? '', ...metadata };
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`call timed out after ${ms} ms`)), ms); })]).finally(() => clearTimeout(timer));
}
