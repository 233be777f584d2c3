import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import { tooLong } from '../../codecs/limits.ts';
import type { Redis } from 'ioredis';
import type { ScriptCommands } from '../../store/scripts.ts';
import { EFFORTS, type RoleResolver } from '../agents/roles.ts';
import { resolveAgent, SCRIPTED_AGENT } from '../agents/resolve-agent.ts';
import { SessionKeys } from './keys.ts';
import { startSignals } from './start-signal.ts';
import type { ChannelSignals } from '../../store/channel-signals.ts';
import { planRepair, transcript, type UiMessage } from './transcript.ts';
import { lineageOf, POLICY_FIELDS, type PermissionPolicy, type SessionCommand } from './types.ts';
import { ConflictError, ForbiddenError, InputError, NotFoundError, PayloadTooLargeError, UnauthorizedError, ValidationError } from '../../store/errors.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { EventFilter, SessionEvent, SessionFields, SessionStore } from '../../store/session-store.ts';
import type { WorkspaceService } from '../workspaces/workspace-service.ts';
import type { Gate } from '../hooks/gate.ts';
import type { SecretMask } from '../security/secret-mask.ts';

const START_WAIT_MS = 30_000;
/** How often a start wait reads the session anyway: with the start signal heard, and without it. */
const START_POLL_MS = 500;
const START_POLL_UNSUBSCRIBED_MS = 25;
/** MAX_QUEUED and MAX_QUEUED_BYTES bound a busy session's input queue (10 prompts, 64 KiB of text). */
const MAX_QUEUED = 10;
const MAX_QUEUED_BYTES = 64 * 1024;
const notActive = (id: string) => new InputError(`session "${id}" is not active; resume it first`, 'session_not_active', { session_id: id });
const DECISIONS = ['allow-once', 'allow-always', 'reject-once', 'reject-always'];
const DEFAULT_BUDGET = { max_active_per_workspace: 10, max_children: 5, max_depth: 3, ttl_seconds: 3600 };
const emptyPolicy = (): PermissionPolicy => ({ mcp_servers: [], network_channels: [], sandbox_profiles: [], skills: [], tools: [], workspace_paths: [] });

/** badgeOf is the canonical session badge (first match wins). */
function badgeOf(s: SessionFields): string {
  const failure = s.failure as { kind?: string } | null;
  if (s.state === 'stopped') return failure?.kind && failure.kind !== 'cancellation' ? 'failed' : 'stopped';
  if (s.state === 'starting' || s.state === 'stopping' || s.prompt_active) return 'running';
  if (s.state === 'active') return 'idle';
  return 'unknown';
}

/** isAttachable: an active session without a failure whose badge allows an explicit attach. */
function isAttachable(s: SessionFields): boolean {
  return s.state === 'active' && !['hung', 'failed', 'stopped', 'unknown'].includes(badgeOf(s)) && !(s.failure as object | null);
}

/** sessionView is the Session object built from the stored fields. */
export function sessionView(s: SessionFields, includeHealth = false): Record<string, unknown> {
  const { prompt_active: promptActive, owner: _owner, add_dirs: _dirs, token_hash: _token, ...rest } = s;
  const badge = badgeOf(s);
  const activity = { ...((s.activity as Record<string, unknown>) ?? {}) };
  const last = Date.parse(String(activity.last_activity_at ?? s.updated_at));
  if (!Number.isNaN(last)) activity.idle_seconds = Math.max(0, Math.floor((Date.now() - last) / 1000));
  const started = Date.parse(String(activity.turn_started_at ?? ''));
  if (promptActive && !Number.isNaN(started)) {
    activity.elapsed_ms = Date.now() - started;
    activity.elapsed_seconds = Math.floor((Date.now() - started) / 1000);
  }
  const attachable = isAttachable(s);
  const view: Record<string, unknown> = { ...rest, badge, attachable, activity, failure: s.failure ?? undefined };
  if (includeHealth) {
    view.health = {
      session_id: s.id, agent_name: s.agent_name, workspace_id: s.workspace_id, state: s.state === 'stopped' ? 'stopped' : promptActive ? 'prompting' : 'idle',
      health: s.state === 'stopped' ? 'dead' : 'healthy', active_prompt: Boolean(promptActive), attachable,
      eligible_for_wake: s.state === 'active' && !promptActive, ineligibility_reason: promptActive ? 'session_prompt_active' : s.state === 'active' ? '' : 'session_not_attachable',
      last_activity_at: activity.last_activity_at ?? s.updated_at, last_presence_at: s.updated_at, last_error: (s.failure as { summary?: string } | null)?.summary ?? '', updated_at: s.updated_at,
    };
  }
  return view;
}

/** promptText picks the text a prompt sends: `message`, else the last user message. */
export function promptText(body: Record<string, unknown>): string {
  if (typeof body.message === 'string' && body.message.trim()) return body.message.trim();
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as { role?: string; content?: unknown; parts?: { type?: string; text?: string }[] };
    if (m?.role !== 'user') continue;
    if (typeof m.content === 'string' && m.content.trim()) return m.content.trim();
    const parts = (m.parts ?? []).filter((p) => (!p.type || p.type === 'text') && typeof p.text === 'string' && p.text.trim()).map((p) => p.text);
    if (parts.length) return parts.join('\n');
  }
  throw new InputError('message is required', 'message_required');
}

function str(body: Record<string, unknown>, field: string): string {
  const v = body[field];
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new InputError(`${field} must be a string`, 'invalid_body', { [field]: 'must be a string' });
  const long = tooLong(field, v);
  if (long) throw new ValidationError(`${field} ${long}`, 'invalid_body', { [field]: long });
  return v.trim();
}

/**
 * SESSION_CREATE_FIELDS are the fields of a session create body. NOTE: the original's `channel` (its
 * agent network) is not among them: this service has no network, so a channel would be accepted and do nothing.
 */
export const SESSION_CREATE_FIELDS = ['workspace', 'workspace_path', 'agent_name', 'provider', 'model', 'reasoning_effort', 'name'];

/** How many tokens' sessions a process keeps (sessionForToken): one per live agent, a few MB at most. */
const TOKEN_SESSIONS_KEPT = 10_000;

/**
 * SessionService is the API side of sessions: it validates requests, stores new sessions, asks the runtime
 * role (through Redis) to start them, routes commands to the runtime that owns a session, and reads events.
 */
export class SessionService {
  private readonly k: SessionKeys;
  private readonly starts: ChannelSignals;
  /** The session of each token this process accepted (sessionForToken), the oldest dropped past TOKEN_SESSIONS_KEPT. */
  private readonly tokenSessions = new Map<string, string>();

  constructor(private readonly o: { sessions: SessionStore; workspaces: WorkspaceService; resources: ResourceStore; redis: Redis & ScriptCommands; roles: RoleResolver; /** The hook gate (runtime/hooks/); none: no hooks run. */ hooks?: Gate;
    /** The process's masking set as it stands (runtime/security/known-secrets.ts); none: prompts are sent as given. */ secrets?: () => Promise<SecretMask> }) {
    this.k = new SessionKeys(o.sessions.keys);
    this.starts = startSignals(o.redis, o.sessions.keys);
  }

  /** close closes the start-signal subscription (process shutdown), instead of leaving it to its idle timer. */
  close(): void {
    this.starts.stop();
  }

  /**
   * create validates a create request (SESSION_CREATE_FIELDS), stores the session and waits for it to
   * start. `startedBy` is the agent session whose work creates it (a loop run it started): recorded in the lineage as
   * `started_by_session_id`, whose tool policy the new session is also held to.
   */
  async create(body: Record<string, unknown>, opts: { origin?: string; startedBy?: string } = {}): Promise<SessionFields> {
    const wsRef = str(body, 'workspace');
    const wsPath = str(body, 'workspace_path');
    if (!wsRef && !wsPath) throw new InputError('workspace or workspace_path is required', 'workspace_required');
    if (wsRef && wsPath) throw new InputError('workspace and workspace_path are mutually exclusive', 'workspace_ambiguous');
    if (wsPath && !path.isAbsolute(wsPath)) throw new InputError('workspace_path must be an absolute path', 'invalid_workspace_path');
    let provider = str(body, 'provider');
    let model = str(body, 'model');
    let effort = str(body, 'reasoning_effort');
    if ((model || effort) && !provider) throw new InputError('provider is required with model or reasoning_effort', 'provider_required');
    if (effort && !EFFORTS.includes(effort)) throw new InputError(`reasoning_effort must be one of ${EFFORTS.join(', ')}`, 'invalid_reasoning_effort');
    const ws = wsRef ? await this.o.workspaces.get(wsRef) : await this.o.workspaces.get(wsPath);
    // NOTE: what the request leaves open comes from the workspace, then the `session` role (see GET /api/roles).
    const role = await this.o.roles.get('session', ws);
    const agentName = str(body, 'agent_name') || ws.default_agent || role.agent || SCRIPTED_AGENT;
    if (!provider && role.provider) {
      provider = role.provider;
      model = role.model;
      effort = EFFORTS.includes(role.reasoning_effort) ? role.reasoning_effort : '';
    }
    if (!(await resolveAgent(this.o.resources, agentName, ws.id))) throw new InputError(`agent "${agentName}" is not available`, 'agent_not_available', { agent_name: agentName });
    const id = `sess-${randomBytes(8).toString('hex')}`;
    await this.gate('session.pre_create', { session_id: id, session_type: 'user', workspace_id: ws.id, workspace_root: ws.root_dir, agent_name: agentName, name: str(body, 'name'), provider, model });
    return this.startNew({
      id, name: str(body, 'name'), agent_name: agentName, provider, model, reasoning_effort: effort, type: 'user', origin: opts.origin ?? 'user',
      workspace_id: ws.id, workspace_path: ws.root_dir, add_dirs: ws.add_dirs,
      lineage: {
        parent_session_id: '', root_session_id: id, spawn_depth: 0, spawn_role: '', auto_stop_on_parent: false, ttl_expires_at: '', permission_policy: emptyPolicy(), spawn_budget: DEFAULT_BUDGET,
        ...(opts.startedBy ? { started_by_session_id: opts.startedBy } : {}),
      },
    });
  }

  private async startNew(fields: SessionFields & { workspace_id: string }): Promise<SessionFields> {
    const now = new Date().toISOString();
    await this.o.sessions.create({
      channel: '', acp_session_id: '', stop_reason: '', stop_detail: '', failure: null, activity: {}, prompt_active: false,
      ...fields, state: 'starting', created_at: now, updated_at: now,
    });
    await this.o.redis.lpush(this.k.starts, JSON.stringify({ session_id: fields.id, resume: false }));
    return this.waitStarted(fields.id);
  }

  /**
   * waitStarted waits until a session leaves `starting` (or the wait lapses) and returns it: woken by the runtime's
   * start signal (start-signal.ts), with a slow poll in case a signal is lost (or a runtime does not send one).
   */
  private waitStarted(id: string): Promise<SessionFields> {
    return this.starts.until(id, () => this.get(id), (s) => s.state !== 'starting', { timeoutMs: START_WAIT_MS, recheckMs: START_POLL_MS, pollMs: START_POLL_UNSUBSCRIBED_MS });
  }

  /** get returns a session or 404; with a workspace, a session outside it is also 404. */
  async get(id: string, workspaceRef?: string): Promise<SessionFields> {
    // NOTE: both reads at once (one round trip); a missing session is reported before a missing workspace.
    const [s, ws] = await Promise.all([this.o.sessions.get(id), workspaceRef ? this.o.workspaces.get(workspaceRef).catch((err: Error) => err) : undefined]);
    if (!s) throw new NotFoundError(`session "${id}" does not exist`, 'session_not_found', { session_id: id });
    if (ws instanceof Error) throw ws;
    if (ws && s.workspace_id !== ws.id) throw new NotFoundError(`session "${id}" is not in workspace "${workspaceRef}"`, 'session_not_found', { session_id: id });
    return s;
  }

  /** list returns sessions (newest first), filtered by the list parameters. */
  async list(q: { workspace?: string; resumable?: boolean; sort?: string; limit?: number }): Promise<SessionFields[]> {
    const ws = q.workspace ? await this.o.workspaces.get(q.workspace) : undefined;
    let all = await this.o.sessions.list(ws?.id);
    if (q.resumable) {
      // NOTE: resumable means "can be picked up": a stopped session to resume, or a live one to attach to.
      all = all.filter((s) => s.state === 'stopped' || isAttachable(s));
      if (q.sort === 'last_activity') {
        const at = (s: SessionFields) => String((s.activity as { last_activity_at?: string })?.last_activity_at ?? s.updated_at);
        all.sort((a, b) => at(b).localeCompare(at(a)));
      }
      if (q.limit) all = all.slice(0, q.limit);
    }
    return all;
  }

  /** command routes a command to the runtime that owns the session; 400 when none does. */
  async command(cmd: SessionCommand): Promise<void> {
    const owner = await this.o.redis.get(this.k.lease(cmd.session_id));
    if (!owner) throw notActive(cmd.session_id);
    await this.send(owner, cmd);
  }

  /**
   * send appends a command to a runtime's command stream. NOTE: the owner is read from the session's lease first:
   * the stream (tag `{rt:<owner>}`) and the lease (`{s:<id>}`) are in two slots on a Redis Cluster, so no script
   * joins them. A lease that moves in between (its owner died) costs the command, as a crash just after it would:
   * the session is then stopped and resumable, and the caller sees it in its state.
   */
  private async send(owner: string, cmd: SessionCommand | Record<string, unknown>): Promise<void> {
    await this.o.redis.xadd(this.k.commands(owner), 'MAXLEN', '~', 10000, '*', 'c', JSON.stringify(cmd));
  }

  /**
   * queuePrompt queues a prompt for a busy session within the input queue's limits: at most
   * MAX_QUEUED prompts and MAX_QUEUED_BYTES of their text, counted atomically across api replicas; over either,
   * 413 and nothing is queued.
   */
  async queuePrompt(cmd: Extract<SessionCommand, { type: 'prompt' }>): Promise<void> {
    const bytes = Buffer.byteLength(cmd.text);
    const queue = this.k.queue(cmd.session_id);
    const res = await this.o.redis.queuePrompt(this.k.lease(cmd.session_id), queue, bytes, MAX_QUEUED, MAX_QUEUED_BYTES);
    if (!res) throw notActive(cmd.session_id);
    if (res === 'full') throw new PayloadTooLargeError(`the session's input queue is full (${MAX_QUEUED} prompts)`, 'input_queue_full', { max_queued: MAX_QUEUED });
    if (res === 'too_large') throw new PayloadTooLargeError(`queued text would exceed ${MAX_QUEUED_BYTES} bytes`, 'queued_text_too_large', { text_bytes: bytes, max_queued_bytes: MAX_QUEUED_BYTES });
    try {
      await this.send(res, { ...cmd, queued_bytes: bytes });
    } catch (err) {
      // NOTE: the prompt was counted but never queued: take it back off (best effort; a runtime that starts the
      // session afresh resets the accounting anyway).
      await this.o.redis.multi().hincrby(queue, 'n', -1).hincrby(queue, 'bytes', -bytes).exec().catch(() => undefined);
      throw err;
    }
  }

  /** stopAndWait stops a live session and waits for it to be stopped. */
  private async stopAndWait(s: SessionFields, reason: string, detail: string): Promise<void> {
    if (s.state === 'stopped') return;
    await this.command({ type: 'stop', session_id: s.id, reason, detail }).catch(() => undefined);
    const deadline = Date.now() + 10_000;
    // NOTE: until the owner releases the lease, its last step: the session is then stopped, its session_stopped event
    // recorded and its stop hook (the memory ledger) run, so what a client reads after the stop answered is complete.
    while (Date.now() < deadline && (await this.o.redis.exists(this.k.lease(s.id)))) {
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /** stop stops a live session as `user_canceled`; a stopped session is left as it is. */
  async stop(id: string, workspaceRef?: string): Promise<void> {
    const s = await this.get(id, workspaceRef);
    if (s.state !== 'stopped') await this.gate('session.pre_stop', { ...this.hookFields(s), stop_reason: 'user_canceled' });
    await this.stopAndWait(s, 'user_canceled', 'stopped by the operator');
  }

  /**
   * stopWorkspace stops every live session of a workspace (`user_canceled`, with `detail`), all at once; the
   * stopped sessions stay readable and resumable while the workspace exists again.
   */
  async stopWorkspace(workspaceId: string, detail: string): Promise<void> {
    const live = (await this.o.sessions.list(workspaceId)).filter((s) => s.state !== 'stopped');
    await Promise.all(live.map((s) => this.stopAndWait(s, 'user_canceled', detail)));
  }

  /** delete stops a live session and removes it with its events from persisted history. */
  async delete(id: string, workspaceRef?: string): Promise<void> {
    const s = await this.get(id, workspaceRef);
    await this.stopAndWait(s, 'user_canceled', 'session deleted');
    await this.o.sessions.delete(id, String(s.workspace_id));
  }

  /** resume restarts a stopped session on any runtime (session/load when the agent supports it). */
  async resume(id: string, workspaceRef?: string): Promise<SessionFields> {
    const s = await this.get(id, workspaceRef);
    if (s.state !== 'stopped') return s;
    await this.gate('session.pre_resume', this.hookFields(s));
    await this.o.sessions.patch(id, { state: 'starting', updated_at: new Date().toISOString() });
    await this.o.redis.lpush(this.k.starts, JSON.stringify({ session_id: id, resume: true }));
    return this.waitStarted(id);
  }

  /** approve answers a pending permission request. */
  async approve(id: string, body: Record<string, unknown>, workspaceRef?: string): Promise<{ status: string }> {
    const s = await this.get(id, workspaceRef);
    const decision = str(body, 'decision');
    const requestId = str(body, 'request_id');
    const turnId = str(body, 'turn_id');
    if (!DECISIONS.includes(decision)) throw new InputError(`decision must be one of ${DECISIONS.join(', ')}`, 'invalid_decision', { decision });
    if (!requestId && !turnId) throw new InputError('request_id or turn_id is required', 'request_id_required');
    if (s.state !== 'active') throw new InputError(`session "${id}" is not active`, 'session_not_active');
    const pending = Object.entries(await this.o.redis.hgetall(this.k.permissions(id))).map(([rid, v]) => ({ rid, ...(JSON.parse(v) as { turn_id: string; options: string[] }) }));
    const matches = requestId ? pending.filter((p) => p.rid === requestId) : pending.filter((p) => p.turn_id === turnId);
    if (matches.length === 0) throw new ConflictError('pending permission not found', 'permission_not_found', { request_id: requestId, turn_id: turnId });
    if (matches.length > 1) throw new ConflictError('more than one pending permission matches; give request_id', 'permission_ambiguous', { turn_id: turnId });
    const kind = decision.replace('-', '_');
    const sibling = kind.endsWith('once') ? kind.replace('once', 'always') : kind.replace('always', 'once');
    if (!matches[0].options.includes(kind) && !matches[0].options.includes(sibling)) throw new InputError(`the agent did not offer "${decision}"`, 'decision_not_offered');
    await this.command({ type: 'approve', session_id: id, request_id: matches[0].rid, decision });
    return { status: 'approved' };
  }

  /** events reads a session's events with the spec's filters. */
  async events(id: string, f: EventFilter, workspaceRef?: string): Promise<SessionEvent[]> {
    await this.get(id, workspaceRef);
    return this.o.sessions.events(id, f);
  }

  /**
   * sessionForToken finds the live session a per-session agent token belongs to (401 otherwise); with `identityOnly`
   * it reads only the session's identity fields (SessionStore.identity: an agent route's caller check), else the
   * whole session.
   */
  async sessionForToken(authorization: string | undefined, identityOnly = false): Promise<SessionFields> {
    const token = /^Bearer\s+(\S+)$/i.exec(authorization ?? '')?.[1];
    if (!token) throw new UnauthorizedError('a session token is required (Authorization: Bearer …)', 'unauthenticated');
    const hash = createHash('sha256').update(token).digest('hex');
    const read = (id: string): Promise<SessionFields | undefined> => (identityOnly ? this.o.sessions.identity(id) : this.o.sessions.get(id));
    // NOTE: a token names one session for good, so its session id is kept once the token was accepted, and an agent's
    // next calls read only the session (one round trip, not two). What decides is the state and the token_hash of
    // the session's current run, which a stop clears and a resume replaces: read each time, or with `identityOnly`
    // kept until a write announces their change (SessionStore.identity).
    const known = this.tokenSessions.get(hash);
    let s = known ? await read(known) : undefined;
    if (!s || s.token_hash !== hash) {
      this.tokenSessions.delete(hash);
      const id = await this.o.redis.get(this.k.token(hash));
      s = id ? await read(id) : undefined;
    }
    // NOTE: the session's current token only: a token of an earlier run of a resumed session is not deleted when
    // the runtime that held it was lost, and would otherwise count again once the session is active. A session
    // started by a runtime of an earlier release has no token_hash field yet: its token counts until it stops.
    if (!s || s.state !== 'active' || (s.token_hash !== undefined && s.token_hash !== hash)) throw new UnauthorizedError('the session token is not valid', 'unauthenticated');
    if (s.token_hash === hash && !this.tokenSessions.has(hash)) this.rememberToken(hash, s.id);
    const { token_hash: _hash, ...session } = s;
    return session as SessionFields;
  }

  private rememberToken(hash: string, id: string): void {
    if (this.tokenSessions.size >= TOKEN_SESSIONS_KEPT) this.tokenSessions.delete(this.tokenSessions.keys().next().value!);
    this.tokenSessions.set(hash, id);
  }

  /**
   * spawn starts a child session of the calling agent's session with a narrowed policy, within its budget; the
   * child runs an agent with a `command` only when the global spawn role names that agent (403 otherwise).
   */
  async spawn(parent: SessionFields, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const pl = parent.lineage as { spawn_depth: number; root_session_id: string; permission_policy: PermissionPolicy; spawn_budget: typeof DEFAULT_BUDGET };
    const budget = { ...DEFAULT_BUDGET, ...(pl.spawn_budget ?? {}) };
    const requested = (body.permissions ?? {}) as Record<string, unknown>;
    if (typeof requested !== 'object' || Array.isArray(requested)) throw new ValidationError('permissions must be an object', 'invalid_permissions', { permissions: 'must be an object' });
    const policy = emptyPolicy();
    const widened: Record<string, string> = {};
    for (const f of POLICY_FIELDS) {
      const want = requested[f];
      if (want !== undefined && (!Array.isArray(want) || want.some((x) => typeof x !== 'string'))) throw new ValidationError(`permissions.${f} must be a list of strings`, 'invalid_permissions', { [`permissions.${f}`]: 'must be a list of strings' });
      const parentList = pl.permission_policy?.[f] ?? [];
      const list = (want as string[] | undefined) ?? parentList;
      const extra = parentList.length ? list.filter((x) => !parentList.includes(x)) : [];
      if (extra.length) widened[`permissions.${f}`] = `widens the parent's policy with ${extra.join(', ')}`;
      policy[f] = [...new Set(list)].sort();
    }
    if (Object.keys(widened).length) throw new ValidationError('the requested permissions widen the parent session\'s policy', 'permission_widened', widened);
    const depth = (pl.spawn_depth ?? 0) + 1;
    if (depth > budget.max_depth) throw new ConflictError(`spawn depth ${depth} exceeds max_depth ${budget.max_depth}`, 'spawn_budget_exceeded', { max_depth: budget.max_depth });
    const siblings = (await this.o.sessions.list(String(parent.workspace_id))).filter((s) => (s.lineage as { parent_session_id?: string })?.parent_session_id === parent.id);
    if (siblings.length >= budget.max_children) throw new ConflictError(`parent already has ${siblings.length} children (max_children ${budget.max_children})`, 'spawn_budget_exceeded', { max_children: budget.max_children });
    const active = (await this.o.sessions.list(String(parent.workspace_id))).filter((s) => s.type === 'spawned' && s.state !== 'stopped');
    if (active.length >= budget.max_active_per_workspace) throw new ConflictError(`workspace already has ${active.length} active spawned sessions`, 'spawn_budget_exceeded', { max_active_per_workspace: budget.max_active_per_workspace });
    const ttlReq = body.ttl_seconds === undefined ? budget.ttl_seconds : Number(body.ttl_seconds);
    if (!Number.isInteger(ttlReq) || ttlReq <= 0) throw new ValidationError('ttl_seconds must be a positive integer', 'invalid_ttl', { ttl_seconds: 'must be a positive integer' });
    const ttl = Math.min(ttlReq, budget.ttl_seconds);
    const role = await this.o.roles.get('spawn', await this.o.workspaces.get(String(parent.workspace_id)));
    if (!role.enabled) throw new ConflictError('spawning is disabled by the spawn role (roles.spawn.enabled)', 'spawn_disabled', { role: 'spawn' });
    const agentName = str(body, 'agent_name') || role.agent || String(parent.agent_name);
    const target = await resolveAgent(this.o.resources, agentName, String(parent.workspace_id));
    if (!target) throw new InputError(`agent "${agentName}" is not available`, 'agent_not_available');
    // NOTE: an agent definition with a `command` runs a program of its own on the service. An agent may start
    // one only when the spawn role names it in the global configuration file (roles.spawn.agent); otherwise
    // children run the built-in agent (or definitions without a command), whatever the parent asks for. A
    // workspace's .svc/config.yaml does not count: it lies in the directory the agents themselves write to.
    // Checked before anything is stored, so a refused spawn leaves no session behind.
    if (!target.builtin && !(role.agent === agentName && role.provenance.agent === 'global')) {
      throw new ForbiddenError(`agent "${agentName}" runs a program (command); a spawned session may run it only when the global configuration's spawn role names it (roles.spawn.agent)`, 'spawn_command_agent_denied', { agent_name: agentName, spawn_role_agent: role.agent });
    }
    const lineage = {
      parent_session_id: parent.id, root_session_id: pl.root_session_id ?? parent.id, spawn_depth: depth, spawn_role: str(body, 'spawn_role'),
      auto_stop_on_parent: body.auto_stop_on_parent === true, ttl_expires_at: new Date(Date.now() + ttl * 1000).toISOString(),
      permission_policy: policy, spawn_budget: budget,
    };
    const id = `sess-${randomBytes(8).toString('hex')}`;
    // NOTE: a spawned session passes the same session.pre_create hooks as an operator's, so a deny cannot be side-stepped by spawning.
    await this.gate('session.pre_create', {
      session_id: id, session_type: 'spawned', workspace_id: String(parent.workspace_id), workspace_root: String(parent.workspace_path), agent_name: agentName,
      name: lineage.spawn_role, autonomy: { parent_session_id: parent.id, root_session_id: lineage.root_session_id, spawn_role: lineage.spawn_role },
    });
    const child = await this.startNew({
      id, name: lineage.spawn_role || `child of ${parent.id}`, agent_name: agentName, provider: '', model: '', reasoning_effort: '', type: 'spawned',
      // NOTE: a child acts for whatever started its parent, so an automation's own events include its children's.
      origin: String(parent.origin ?? 'user'),
      workspace_id: String(parent.workspace_id), workspace_path: String(parent.workspace_path), add_dirs: parent.add_dirs ?? [], lineage,
    });
    return { lineage, permissions: policy, session: sessionView(child) };
  }

  /** transcript returns the session's canonical replay messages. */
  async transcript(id: string, workspaceRef?: string): Promise<UiMessage[]> {
    await this.get(id, workspaceRef);
    return transcript(await this.o.sessions.events(id));
  }

  /** recap is a bounded reorientation snapshot: the session, recent markers and the last messages. */
  async recap(id: string, limit: number, workspaceRef?: string): Promise<Record<string, unknown>> {
    const s = await this.get(id, workspaceRef);
    const events = await this.o.sessions.events(id);
    const messages = transcript(events);
    const markers = events.filter((e) => e.type.startsWith('transcript_marker.')).slice(-5).map((e) => {
      const c = e.content as { kind?: string; summary?: string };
      return { kind: c.kind ?? e.type, occurred_at: e.timestamp, summary: c.summary ?? '' };
    });
    return {
      session: sessionView(s), recent_markers: markers, recent_messages: messages.slice(-limit), pending_inputs: 0, pending_markers: 0,
      snapshot: { generated_at: new Date().toISOString(), event_cursor: events.at(-1)?.sequence ?? 0, transcript_cursor: messages.length, queue_generation: 0, consistency: 'persisted_reads' },
    };
  }

  /** repair plans (and unless dry_run, appends) the repairs of a stopped session's final turn. */
  async repair(id: string, dryRun: boolean, force: boolean, workspaceRef?: string): Promise<Record<string, unknown>> {
    const s = await this.get(id, workspaceRef);
    const events = await this.o.sessions.events(id);
    const plan = planRepair(events, String(s.state), String(s.stop_reason ?? ''), force);
    const persist = !dryRun && !plan.blocked && plan.actions.length > 0;
    if (persist) {
      for (const a of plan.actions) {
        const now = new Date().toISOString();
        const content = a.code === 'append_interrupted_tool_result'
          ? { tool_call_id: a.tool_call_id, tool_name: a.tool_name, tool_error: true, tool_result: { error: 'Tool call interrupted before a result was persisted.' }, text: 'Tool call interrupted before a result was persisted.' }
          : { error: 'turn ended without a terminal event (repaired)', text: 'turn ended without a terminal event (repaired)' };
        const type = a.code === 'append_interrupted_tool_result' ? 'tool_result' : 'error';
        const e = await this.o.sessions.append({
          session_id: id, turn_id: a.turn_id, type, agent_name: String(s.agent_name), workspace_id: String(s.workspace_id), workspace_path: String(s.workspace_path),
          content: { schema: 'svc.session.event.v1', type, session_id: s.acp_session_id, turn_id: a.turn_id, timestamp: now, ...content }, timestamp: now, ...lineageOf(s),
        });
        a.event_id = e.id;
        a.persisted = true;
      }
    }
    return { session_id: id, issues: plan.issues, actions: plan.actions, persisted: persist };
  }

  /**
   * sendPrompt sends a prompt to its session: queued (within the input queue's limits) while a turn runs, unless it
   * interrupts; otherwise to the runtime at once. It answers the session's newest sequence read before the prompt
   * was sent, so a stream of the prompt's turn that starts after it misses none of the turn's events.
   */
  async sendPrompt(s: SessionFields, given: Extract<SessionCommand, { type: 'prompt' }>): Promise<number> {
    // NOTE: by the state read, not only by the lease (command, queuePrompt): a runtime ending a run marks it stopped
    // before it releases the lease, and a prompt sent to it then was dropped by the runtime, its stream left open.
    if (s.state === 'stopped') throw notActive(s.id);
    // NOTE: a secret pasted into a prompt is masked before the prompt goes anywhere: the hooks, the runtime's command
    // stream in Redis, the agent and the transcript all see the same masked text (an agent that needs a secret is
    // given it by reference, in its environment).
    const mask = await this.o.secrets?.();
    const cmd = mask ? { ...given, text: mask.text(given.text) } : given;
    await this.gate('input.pre_submit', { ...this.hookFields(s), turn_id: cmd.turn_id, input_class: cmd.mode, text: cmd.text });
    if (s.prompt_active && cmd.mode !== 'interrupt') {
      const after = await this.lastSequence(s.id);
      await this.queuePrompt(cmd);
      return after;
    }
    // NOTE: both on one connection, sent in this order: the sequence is read before the prompt is sent.
    const [after] = await Promise.all([this.lastSequence(s.id), this.command(cmd)]);
    return after;
  }

  /**
   * gate runs a gated point's sync hooks (runtime/hooks/gate.ts); a deny is a 403 `hook_denied` naming the hook,
   * thrown before the action changes anything.
   */
  private async gate(event: string, payload: Record<string, unknown>): Promise<void> {
    const r = await this.o.hooks?.gate(event, payload, { source: 'sessions' });
    if (r?.denied) throw new ForbiddenError(`${event} denied by hook ${r.hook}: ${r.reason}`, 'hook_denied', { event, hook: r.hook, reason: r.reason });
  }

  /** hookFields are the fields every session hook event carries (and its matcher reads). */
  private hookFields(s: SessionFields): Record<string, unknown> {
    return { session_id: s.id, session_type: String(s.type ?? 'user'), workspace_id: String(s.workspace_id), workspace_root: String(s.workspace_path ?? ''), agent_name: String(s.agent_name) };
  }

  /** lastSequence is the newest event's sequence of a session. */
  lastSequence(id: string): Promise<number> {
    return this.o.sessions.lastSequence(id);
  }
}
