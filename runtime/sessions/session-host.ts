import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readFile, realpath, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { methods, RequestError, type InitializeResponse, type McpServer, type PromptRequest, type RequestPermissionRequest, type RequestPermissionResponse } from '@agentclientprotocol/sdk';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { duplicateConnection } from '../../store/connections.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import type { SessionEvent, SessionFailure, SessionFields, SessionStore } from '../../store/session-store.ts';
import { realPath, within } from '../security/workspace-roots.ts';
import { childEnv, type ResolvedSecrets } from '../security/child-env.ts';
import { resolveAgent, SCRIPTED_AGENT } from '../agents/resolve-agent.ts';
import type { ResolvedAgent } from '../agents/types.ts';
import { eventFromUpdate, toolNameOf } from './acp-events.ts';
import { matchesPattern } from '../tools/policy.ts';
import type { Settings } from '../process/settings.ts';
import { sanitize } from '../tools/catalog.ts';
import { acpCapsOf, reportsModels, type AcpCaps, type ReportedModel } from './acp-caps.ts';
import type { BusEventInput, EventBus } from '../../store/event-bus.ts';
import { busEventsOf } from './bus-events.ts';
import { AgentPool, type AgentLaunch, type AgentSessionClient, type AgentSlot } from './agent-pool.ts';
import { SessionKeys } from './keys.ts';
import { signalStarted } from './start-signal.ts';
import { redactText, redactValue } from './redact.ts';
import { lineageOf, type SessionCommand, type StartRequest, type SupervisionConfig } from './types.ts';

/** Session starts one runtime runs at once (see startLoop). */
const START_CONCURRENCY = 16;
const LEASE_MS = 15_000;
/** How often a start whose session's lease is still held (its previous run is ending) tries again. */
const LEASE_RETRY_MS = 50;
const RENEW_MS = 5_000;
/** How often running prompts are checked for inactivity. */
const SUPERVISE_MS = 100;
const PERMISSION_TIMEOUT_MS = 5 * 60_000;

/**
 * READ_KINDS are the ACP tool kinds the `approve-reads` mode approves without asking: they only look.
 * NOTE: `fetch` reaches outside the workspace (open world), so it is asked like a write.
 */
const READ_KINDS = new Set(['read', 'search', 'think']);

/** agentToolId is the tool id an agent's own tool is matched by in `deny_tools`: its name when that is an id, else `agent__<name>`. */
function agentToolId(name: string): string {
  return /^[a-z][a-z0-9_]*__[a-z0-9_]+$/.test(name) ? name : `agent__${sanitize(name)}`;
}
const HANDSHAKE_TIMEOUT_MS = 30_000;
/**
 * updatesBefore waits until the agent's updates sent before its answer have been appended. NOTE: the SDK settles
 * a prompt's answer in fewer steps than it hands a notification to its handler, so those updates may still be on
 * their way: one turn of the event loop lets them issue their appends, which then precede the turn's end on the
 * one connection (no reply awaited).
 */
const updatesBefore = () => new Promise((resolve) => setImmediate(resolve));
/**
 * The built-in agent's argv after `node`. NOTE: from compiled output (dist/, `make build`) the agent is the
 * compiled scripted.js next to this file and starts without a TypeScript loader; from sources it runs under tsx,
 * resolved here because the agent runs in the workspace directory, where `tsx` is not installed (with require's
 * resolver: import.meta.resolve is missing where a test runner loads the sources as CommonJS).
 */
const COMPILED = import.meta.url.endsWith('.js');
const SCRIPTED_ARGS = COMPILED
  ? [fileURLToPath(new URL('../agents/scripted.js', import.meta.url))]
  : ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href, fileURLToPath(new URL('../agents/scripted.ts', import.meta.url))];
/** POOL_ENV is the variable an agent definition's `env` sets to "1" to say its command hosts many sessions per process. */
export const POOL_ENV = 'SVC_AGENT_POOL';

/** SessionHostOptions configures the runtime role's session host. */
export interface SessionHostOptions {
  redis: Redis;
  sessions: SessionStore;
  resources: ResourceStore;
  logger: Logger;
  dataDir: string;
  /** The API base URL agents call back (spawn); empty when this process serves no API. */
  apiUrl: () => string;
  supervision: SupervisionConfig;
  /** The execution policy (checked before each spawn), scrubbed child environments and secret refs. */
  security: SecurityPolicy;
  /** Sessions one shared agent process hosts at most (AGENT_SESSIONS_PER_PROCESS). */
  sessionsPerProcess: number;
  /** A session with no turn for this long leaves its agent process until its next prompt (SESSION_IDLE_SUSPEND); 0 never. */
  idleSuspendMs: number;
  /** Where lifecycle, turn, tool and permission events are published (busEventsOf). */
  bus: EventBus;
  /**
   * Called once a session is stopped and its `session_stopped` event recorded, before its lease is released (so a
   * stop the API waits for has run it): the memory ledger writer (runtime/memory/ledger-service.ts). A failure is
   * logged; repair builds what it missed.
   */
  onStopped?: (sessionId: string) => Promise<unknown>;
  /**
   * Called when an agent's session/new or session/load answer carries a model state (acp-caps.ts), with the
   * agent's name and its definition's provider: the model catalog's `acp_session` source. A failure is logged and
   * does not fail the start.
   */
  onAgentModels?: (report: { agent: string; provider: string; models: ReportedModel[] }) => Promise<unknown>;
  /**
   * What a fresh ACP session's first prompt starts with (the memory family's injection, runtime/memory/injection.ts):
   * asked once per session/new (a new session, or a resume or wake whose agent could not load its context), at its
   * first prompt, so memories written meanwhile are included. A failure is logged and the prompt goes without it.
   */
  preamble?: (s: { workspace_id: string; agent_name: string; origin: string }) => Promise<SessionPreamble | undefined>;
  /** The global and workspace settings files: their `tools.deny` patterns reject the agent's own tools too. */
  settings?: Settings;
}

/** SessionPreamble is a text given before a session's first prompt, and what its transcript marker records. */
export interface SessionPreamble {
  /** The text given before the first prompt ('' gives none: the marker still says what was left out). */
  text: string;
  summary: string;
  details: Record<string, unknown>;
}

interface PendingPermission {
  resolve: (r: RequestPermissionResponse) => void;
  params: RequestPermissionRequest;
  turnId: string;
  toolName: string;
}

/** LiveSession is the in-process half of a session this runtime owns: its place on an agent process and its ACP session. */
interface LiveSession {
  id: string;
  meta: SessionFields;
  /** Its slot on an agent process; undefined before a spawn, after a refused start and while suspended. */
  agent?: AgentSlot;
  /**
   * How its agent runs, the pool key of a process it may share (undefined: a process of its own), and the ACP auth
   * method its definition names (empty: none).
   */
  spawn?: { key: string | undefined; launch: AgentLaunch; authMethod: string };
  /** The secret values resolved for this agent, redacted from everything the session records. */
  secrets: string[];
  acpSessionId: string;
  /** The session's own token, handed to the agent in the MCP server of session/new and session/load. */
  token: string;
  tokenHash: string;
  /** Whether the agent opened a fresh ACP session (session/new) whose first prompt has not run: it gets the preamble. */
  preamblePending: boolean;
  /** Whether the agent can session/load: only such sessions are suspended when idle. */
  canLoad: boolean;
  /** What the agent's last session/new or session/load answer said it can do; whether it carried a model state. */
  caps: AcpCaps;
  reportsModels: boolean;
  /** The agent definition's provider ('' when it names none). */
  provider: string;
  /** Idle-suspended: the session holds no agent slot; the next prompt wakes it. */
  suspended: boolean;
  waking?: Promise<boolean>;
  busy: boolean;
  turnId: string;
  queue: Extract<SessionCommand, { type: 'prompt' }>[];
  pending: Map<string, PendingPermission>;
  /** The names of the agent's tool calls by id, so a result carries the name of its call. */
  toolNames: Map<string, string>;
  /** The definition's permission mode, `deny_tools` and the client file methods it is offered. */
  permissions: string;
  denyTools: string[];
  clientFs: { read: boolean; write: boolean };
  chain: Promise<unknown>;
  loading: boolean;
  stopping: boolean;
  lastActivity: number;
  warned: boolean;
  /** When the running prompt began; whether the agent has been heard from (an update or a request) since then. */
  promptStartedAt: number;
  heard: boolean;
  /** Whether the running prompt got its first-activity warning. */
  firstWarned: boolean;
  cancelSentAt: number;
  usage: Record<string, number>;
}

/** pickOption is the option of the wanted kind the agent offered, else its sibling (`allow_once` and `allow_always`). */
function pickOption(options: RequestPermissionRequest['options'], want: string): RequestPermissionRequest['options'][number] | undefined {
  const sibling = want.endsWith('once') ? want.replace('once', 'always') : want.replace('always', 'once');
  return options.find((o) => o.kind === want) ?? options.find((o) => o.kind === sibling);
}

/**
 * SessionHost runs the `runtime` role for sessions: it takes start requests from Redis, owns each live
 * session through a renewed Redis lease, speaks ACP to the agent process over stdio, records every event,
 * carries out commands other replicas route to it, supervises inactivity, and reaps sessions whose owner
 * died (they are marked stopped and stay resumable).
 */
export class SessionHost {
  readonly owner = `rt-${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private readonly live = new Map<string, LiveSession>();
  private readonly k: SessionKeys;
  /** The agent processes of this runtime's sessions. */
  readonly agents: AgentPool;
  private startConn?: Redis;
  private cmdConn?: Redis;
  private running = false;
  private loops: Promise<void>[] = [];
  /** Session starts in flight (startLoop runs several at once). */
  private readonly starting = new Set<Promise<void>>();
  private timers: NodeJS.Timeout[] = [];

  constructor(private readonly o: SessionHostOptions) {
    this.k = new SessionKeys(o.sessions.keys);
    this.agents = new AgentPool({ sessionsPerProcess: o.sessionsPerProcess });
  }

  async start(): Promise<void> {
    this.running = true;
    this.startConn = duplicateConnection(this.o.redis);
    this.cmdConn = duplicateConnection(this.o.redis);
    this.loops = [this.startLoop(), this.commandLoop()];
    // NOTE: one supervision tick for every session (not a timer each): only sessions running a prompt need it.
    const supervise = () => { for (const ls of this.live.values()) if (ls.busy) void this.supervise(ls); };
    this.timers.push(setInterval(() => void this.renewLeases(), RENEW_MS), setInterval(() => void this.reap(), RENEW_MS), setInterval(supervise, SUPERVISE_MS));
    const { idleSuspendMs } = this.o;
    if (idleSuspendMs > 0) this.timers.push(setInterval(() => this.suspendIdle(), Math.max(50, Math.min(5_000, idleSuspendMs / 4))));
    await this.reap();
  }

  /** stop stops every live session as `shutdown` (they stay resumable) and closes the loops. */
  async stop(): Promise<void> {
    this.running = false;
    for (const t of this.timers) clearInterval(t);
    this.startConn?.disconnect();
    const stopLive = () => Promise.all([...this.live.values()].map((ls) => this.stopSession(ls, 'shutdown', 'runtime shutdown')));
    await stopLive();
    // NOTE: killing the agents fails the handshakes of starts still in flight at once; a start that finished its
    // handshake meanwhile is live now and stopped in the second pass, so no agent process outlives the runtime.
    this.agents.stop();
    await Promise.allSettled(this.starting);
    await stopLive();
    this.agents.stop();
    this.cmdConn?.disconnect();
    await Promise.allSettled(this.loops);
  }

  /** liveCount is the number of sessions this runtime owns. */
  get liveCount(): number {
    return this.live.size;
  }

  /**
   * startLoop takes start requests and runs up to START_CONCURRENCY of them at once. NOTE: a start waits on the
   * agent (a process spawn, the ACP handshake), so one at a time caps a runtime at a few dozen starts per second;
   * the pool places concurrent starts synchronously, and each session's lease (SET NX) keeps it to one owner.
   */
  private async startLoop(): Promise<void> {
    const inFlight = this.starting;
    while (this.running) {
      try {
        if (inFlight.size >= START_CONCURRENCY) {
          await Promise.race(inFlight);
          continue;
        }
        const got = await this.startConn!.brpop(this.k.starts, 2);
        if (!got) continue;
        const started: Promise<void> = this.startSession(JSON.parse(got[1]) as StartRequest)
          .catch((err) => this.o.logger.error({ err }, 'session start failed'))
          .finally(() => inFlight.delete(started));
        inFlight.add(started);
      } catch (err) {
        if (this.running) this.o.logger.error({ err }, 'session start loop failed');
      }
    }
  }

  private async commandLoop(): Promise<void> {
    // NOTE: from the stream's start, not '$': the stream is this process's own (its owner id is new), and '$' would
    // lose a command added between a read that timed out and the next, until the first command sets a real id.
    let last = '0-0';
    while (this.running) {
      try {
        const res = (await this.cmdConn!.xread('BLOCK', 2000, 'STREAMS', this.k.commands(this.owner), last)) as [string, [string, string[]][]][] | null;
        for (const [id, fields] of res?.[0][1] ?? []) {
          last = id;
          const cmd = JSON.parse(fields[1]) as SessionCommand;
          this.handle(cmd).catch((err) => this.o.logger.error({ err, cmd: cmd.type, session: cmd.session_id }, 'session command failed'));
        }
      } catch (err) {
        if (this.running) this.o.logger.error({ err }, 'session command loop failed');
      }
    }
  }

  private async handle(cmd: SessionCommand): Promise<void> {
    const ls = this.live.get(cmd.session_id);
    if (!ls) return;
    switch (cmd.type) {
      case 'prompt':
        // NOTE: an idle-suspended session is back on an agent before its prompt is looked at; prompts that
        // arrive meanwhile wait for the same wake and then queue behind the first as usual.
        if (!(await this.wake(ls)) || ls.stopping) return;
        if (ls.busy && cmd.mode === 'interrupt') {
          await this.clearQueue(ls);
          ls.queue = [cmd];
          await this.cancelTurn(ls);
        } else if (ls.busy) {
          ls.queue.push(cmd);
          await this.append(ls, 'transcript_marker.created', { kind: `transcript_marker.prompt_${cmd.mode === 'steer' ? 'steered' : 'queued'}`, text: 'prompt queued while a turn runs', summary: 'prompt queued while a turn runs' });
        } else {
          // NOTE: queued by the API while a turn ran, which ended before the prompt arrived: it runs now.
          await this.unqueue(ls, cmd);
          void this.runPrompt(ls, cmd);
        }
        return;
      case 'cancel':
        await this.clearQueue(ls);
        await this.cancelTurn(ls);
        await this.append(ls, 'transcript_marker.created', { kind: 'transcript_marker.prompt_cancel', summary: 'prompt cancelled by the operator' });
        return;
      case 'approve': {
        const p = ls.pending.get(cmd.request_id);
        if (!p) return;
        const want = cmd.decision.replace('-', '_');
        const sibling = want.endsWith('once') ? want.replace('once', 'always') : want.replace('always', 'once');
        const option = p.params.options.find((o) => o.kind === want) ?? p.params.options.find((o) => o.kind === sibling);
        await this.resolvePermission(ls, cmd.request_id, option ? { outcome: { outcome: 'selected', optionId: option.optionId } } : { outcome: { outcome: 'cancelled' } }, cmd.decision);
        return;
      }
      case 'stop':
        await this.stopSession(ls, cmd.reason, cmd.detail);
    }
  }

  /** startSession takes the lease, starts the agent, and opens (or reloads) its ACP session. */
  private async startSession(req: StartRequest): Promise<void> {
    const { sessions, redis, logger } = this.o;
    const meta = await sessions.get(req.session_id);
    if (!meta || meta.state !== 'starting') return;
    if (!(await this.takeLease(meta.id))) return;
    const token = `svc_st_${randomBytes(24).toString('hex')}`;
    const tokenHash = createHash('sha256').update(token).digest('hex');
    // NOTE: with the lease held, the live mark, the queue's reset (a queue left by a runtime that died with this
    // session is gone with it), the agent and the session's token are independent: they go together, not one
    // after the other (each hop of a start waits behind the other starts of a burst). Separate commands, not a MULTI:
    // their keys sit in three slots on a Redis Cluster.
    const [found] = await Promise.all([
      resolveAgent(this.o.resources, String(meta.agent_name), String(meta.workspace_id)),
      redis.sadd(this.k.live, meta.id), redis.del(this.k.queue(meta.id)), redis.set(this.k.token(tokenHash), meta.id),
    ]);
    const agent = found ?? { name: SCRIPTED_AGENT, builtin: true as const };
    const secrets = await this.o.security.secrets.resolve(agent.secret_env);
    const ls: LiveSession = {
      id: meta.id, meta, secrets: secrets.values, acpSessionId: '', token, tokenHash, canLoad: false, caps: acpCapsOf(undefined), reportsModels: false, preamblePending: false, provider: agent.provider ?? '', suspended: false, busy: false, turnId: '', queue: [],
      pending: new Map(), toolNames: new Map(), permissions: agent.permissions || 'approve-reads', denyTools: agent.deny_tools ?? [],
      clientFs: agent.client_fs ?? { read: true, write: true }, chain: Promise.resolve(), loading: false, stopping: false, lastActivity: Date.now(), warned: false, cancelSentAt: 0, usage: {},
      promptStartedAt: 0, heard: false, firstWarned: false,
    };
    this.live.set(meta.id, ls);
    // NOTE: checked at every start: a workspace stored under a looser WORKSPACE_ROOTS, or whose root became a
    // symlink elsewhere, runs no agent.
    const launch = this.workspaceRefusal(meta) ?? this.launch(agent, secrets);
    if (!launch.ok) {
      await this.stopSession(ls, 'error', 'agent failed to start', { kind: 'startup_failure', summary: redactText(launch.reason, ls.secrets).slice(0, 2000) });
      return;
    }
    // NOTE: a pooled process hosts many sessions, so it holds no session's identity: each session's token reaches
    // the agent in the MCP server of its own session/new (or session/load), never in the process environment.
    const pooled = agent.builtin || agent.env?.[POOL_ENV] === '1';
    const identity: Record<string, string> = {
      SVC_API_URL: this.o.apiUrl(), ...(pooled ? {} : { SVC_SESSION_TOKEN: token, SVC_SESSION_ID: meta.id }),
      ...(agent.builtin ? { SCRIPTED_STATE_DIR: path.join(this.o.dataDir, 'scripted') } : {}),
      // NOTE: a bare name is looked up on the child's PATH, so a restricted policy keeps the PATH it checked against.
      ...(this.o.security.exec.unrestricted ? {} : { PATH: process.env.PATH ?? '' }),
    };
    // NOTE: the agent starts from a scrubbed environment: a child holding REDIS_URL or AUTH_* could act as the service.
    const env = childEnv({ ...agent.env, ...secrets.env }, identity);
    const cwd = String(meta.workspace_path);
    const spec: AgentLaunch = { file: launch.file, args: launch.args, shell: launch.shell, cwd, env, fs: ls.clientFs };
    // NOTE: one pool per (agent definition, workspace, environment): sessions share a process only when it would be
    // started exactly the same way for each of them.
    const authMethod = agent.auth_method ?? '';
    ls.spawn = { launch: spec, authMethod, key: pooled ? createHash('sha256').update(JSON.stringify([agent.name, spec, authMethod])).digest('hex') : undefined };
    // NOTE: a runtime shutting down starts no agent process (stop() has stopped the pool, or is about to).
    if (!this.running) return void (await this.stopSession(ls, 'shutdown', 'runtime shutdown'));
    if (!(await this.openAgent(ls, req.resume ? String(meta.acp_session_id ?? '') : ''))) return;
    const now = new Date().toISOString();
    Object.assign(ls.meta, {
      state: 'active', acp_session_id: ls.acpSessionId, stop_reason: '', stop_detail: '', failure: null, updated_at: now,
      acp_caps: { config_options: ls.caps.config_options, supported_models: ls.caps.supported_models, supported_modes: ls.caps.supported_modes, supports_load_session: ls.canLoad },
      health: { last_presence_at: now },
    });
    // NOTE: token_hash names the one token this run of the session answers to (sessionForToken): a token of an
    // earlier run (a runtime that was lost and whose agent may still hold it) is refused after a resume.
    await sessions.patch(meta.id, {
      state: 'active', acp_session_id: ls.acpSessionId, stop_reason: '', stop_detail: '', failure: null, updated_at: now,
      acp_caps: ls.meta.acp_caps, prompt_active: false, owner: this.owner, token_hash: ls.tokenHash,
    });
    await this.publish([{
      type: req.resume ? 'session.post_resume' : 'session.post_create', source: 'sessions', outcome: 'success', session_id: meta.id,
      workspace_id: String(meta.workspace_id), agent_name: String(meta.agent_name), summary: `session ${req.resume ? 'resumed' : 'created'}`,
      data: { session_type: String(meta.type ?? 'user'), workspace_root: String(meta.workspace_path), pooled: Boolean(ls.spawn?.key) },
    }]);
    // NOTE: before the start signal, so the models are in the catalog once the API's create answers.
    if (ls.reportsModels && this.o.onAgentModels) {
      await this.o.onAgentModels({ agent: String(meta.agent_name), provider: ls.provider, models: ls.caps.models })
        .catch((err) => logger.warn({ session: meta.id, err: (err as Error).message }, 'the models the agent reported were not recorded'));
    }
    // NOTE: last, so the API's create (waiting on this signal) answers once the start is complete.
    await signalStarted(redis, sessions.keys, meta.id);
  }

  /**
   * takeLease takes the lease of a session to start, or answers false when another start has it. NOTE: a runtime
   * ending a session's previous run marks it stopped before it releases its lease, so a resume sent as soon as the
   * session reads stopped can find the lease still held: the start waits for it, while the session is still
   * `starting`, instead of being dropped (which left the session `starting` for good). A lease held by another start
   * of the same session ends the wait when that start moves the session on; a dead holder's, when it expires.
   */
  private async takeLease(id: string): Promise<boolean> {
    const deadline = Date.now() + 2 * LEASE_MS;
    for (;;) {
      if ((await this.o.redis.set(this.k.lease(id), this.owner, 'PX', LEASE_MS, 'NX')) === 'OK') return true;
      if (!this.running || Date.now() > deadline) return false;
      await new Promise((r) => setTimeout(r, LEASE_RETRY_MS));
      if ((await this.o.sessions.fields(id, ['state']))?.state !== 'starting') return false;
    }
  }

  /**
   * openAgent places a session on an agent process (a shared one with room, or a new one) and opens its ACP
   * session there: session/load of `loadId` when given and the agent can, else session/new. False when the agent
   * failed; the session is then stopped.
   */
  private async openAgent(ls: LiveSession, loadId: string): Promise<boolean> {
    const slot = (ls.agent = this.agents.acquire(ls.spawn!.key, ls.spawn!.launch, this.sessionClient(ls)));
    let handshook = false;
    try {
      const init = await slot.proc.ready;
      handshook = true;
      const refusal = await this.authRefusal(slot, init, ls.spawn!.authMethod);
      if (refusal) {
        await this.stopSession(ls, 'error', 'agent authentication failed', { kind: 'provider_auth_failure', summary: redactText(refusal, ls.secrets).slice(0, 2000) });
        return false;
      }
      const canLoad = Boolean(init.agentCapabilities?.loadSession);
      const cwd = ls.spawn!.launch.cwd;
      // NOTE: an agent that speaks MCP over HTTP gets the service's tools as an MCP server, scoped to this session
      // by its token, so its calls go through the same policy pipeline as operators' invokes.
      const mcpServers: McpServer[] = init.agentCapabilities?.mcpCapabilities?.http && this.o.apiUrl()
        ? [{ type: 'http', name: 'svc', url: `${this.o.apiUrl()}/api/agent/mcp`, headers: [{ name: 'Authorization', value: `Bearer ${ls.token}` }] }]
        : [];
      let acpSessionId = '';
      let answer: unknown;
      if (loadId && canLoad) {
        ls.loading = true;
        slot.attach(loadId);
        try {
          answer = await withTimeout(slot.conn.agent.request(methods.agent.session.load, { sessionId: loadId, cwd, mcpServers }), HANDSHAKE_TIMEOUT_MS, 'session/load');
          acpSessionId = loadId;
        } catch (err) {
          this.o.logger.info({ session: ls.id, err: (err as Error).message }, 'agent could not load the session; starting a fresh ACP session');
        } finally {
          ls.loading = false;
        }
      }
      let fresh = false;
      if (!acpSessionId) {
        const created = await withTimeout(slot.conn.agent.request(methods.agent.session.new, { cwd, mcpServers }), HANDSHAKE_TIMEOUT_MS, 'session/new');
        acpSessionId = created.sessionId;
        answer = created;
        fresh = true;
      }
      // NOTE: a session stopped during its handshake has given its slot back; the ACP session it opened goes too.
      if (slot.released) {
        this.agents.closeSession(slot.proc, acpSessionId);
        return false;
      }
      slot.attach(acpSessionId);
      ls.acpSessionId = acpSessionId;
      ls.canLoad = canLoad;
      // NOTE: the agent's own words, recorded on the session and in the catalog: masked like everything else it says.
      ls.caps = redactValue(acpCapsOf(answer), ls.secrets) as AcpCaps;
      ls.reportsModels = reportsModels(answer);
      if (fresh) ls.preamblePending = true;
      return true;
    } catch (err) {
      const msg = redactText(`${(err as Error).message}\n${slot.proc.stderrTail}`.trim(), ls.secrets);
      await this.stopSession(ls, 'error', 'agent failed to start', { kind: handshook ? 'handshake_failure' : 'startup_failure', summary: msg.slice(0, 2000) });
      return false;
    }
  }

  /**
   * authRefusal authenticates a session's agent process (once per process) when the agent advertises auth methods,
   * with the method its definition names; it says why that could not be done, else undefined. NOTE: an agent that
   * advertises no method needs no authentication, so a named method is then not used.
   */
  private async authRefusal(slot: AgentSlot, init: InitializeResponse, wanted: string): Promise<string | undefined> {
    const offered = init.authMethods ?? [];
    if (!offered.length) return undefined;
    const ids = offered.map((m) => m.id).join(', ');
    if (!wanted) return `the agent requires authentication (auth methods: ${ids}) and the agent record names no auth_method`;
    const method = offered.find((m) => m.id === wanted);
    if (!method) return `auth_method "${wanted}" is not one the agent advertises (${ids})`;
    // NOTE: ACP forbids passing a terminal method to `authenticate`: the user runs it interactively, which a service cannot.
    if ((method as { type?: string }).type === 'terminal') return `auth_method "${wanted}" is an interactive terminal login, which the service cannot run`;
    try {
      await slot.proc.authenticate(wanted);
      return undefined;
    } catch (err) {
      const data = (err as { data?: unknown }).data;
      const detail = data === undefined || data === null ? '' : ` (${typeof data === 'string' ? data : JSON.stringify(data)})`;
      return `authenticate with auth_method "${wanted}" (${method.name}) failed: ${(err as Error).message}${detail}`;
    }
  }

  /**
   * suspendIdle takes sessions with no turn for SESSION_IDLE_SUSPEND off their agent processes (a shared process
   * exits when its last session leaves). They stay live and `active`: the lease, events and state are untouched,
   * and the next prompt wakes them. NOTE: only agents that can session/load are suspended, so a wake restores
   * the agent's own context rather than starting it over.
   */
  private suspendIdle(): void {
    const before = Date.now() - this.o.idleSuspendMs;
    for (const ls of this.live.values()) {
      if (!ls.agent || ls.suspended || !ls.canLoad || ls.busy || ls.stopping || ls.waking || ls.loading || ls.queue.length || ls.pending.size || ls.lastActivity > before) continue;
      ls.suspended = true;
      this.agents.release(ls.agent);
      ls.agent = undefined;
    }
  }

  /** wake puts an idle-suspended session back on an agent process (session/load); false when that failed (the session stopped). */
  private wake(ls: LiveSession): Promise<boolean> {
    if (!ls.suspended) return Promise.resolve(true);
    ls.waking ??= (async () => {
      const before = ls.acpSessionId;
      if (!(await this.openAgent(ls, before))) return false;
      ls.suspended = false;
      if (ls.acpSessionId !== before) {
        ls.meta.acp_session_id = ls.acpSessionId;
        await this.o.sessions.patch(ls.id, { acp_session_id: ls.acpSessionId, updated_at: new Date().toISOString() });
      }
      return true;
    })().finally(() => { ls.waking = undefined; });
    return ls.waking;
  }

  /**
   * workspaceRefusal says why a session's directories may not host an agent now (runtime/security/workspace-roots.ts),
   * judged where their symlinks lead.
   */
  private workspaceRefusal(meta: SessionFields): { ok: false; reason: string } | undefined {
    for (const dir of [String(meta.workspace_path), ...((meta.add_dirs as string[] | undefined) ?? [])]) {
      const why = this.o.security.workspaceRoots.workspaceRefusal(realPath(dir));
      if (why) return { ok: false, reason: `WorkspaceNotAllowed: ${dir} ${why}` };
    }
    return undefined;
  }

  /**
   * launch decides how an agent runs, or why it may not: its secret refs must resolve, and a definition's command
   * must pass EXEC_ALLOWLIST (checked here again: the policy may have tightened since the record was written).
   * NOTE: a command is a shell line (as operators write them); under a restricted policy it runs without a shell,
   * as the argv the check parsed, so nothing can be chained after the allowed program. `scripted` is built in.
   */
  private launch(agent: ResolvedAgent, secrets: ResolvedSecrets):
    { ok: true; file: string; args: string[]; shell: boolean } | { ok: false; reason: string } {
    const refs = agent.secret_env ?? {};
    const unresolved = [
      ...secrets.refused.map((name) => `secret_env ${name}: ${this.o.security.secrets.refusal(refs[name])}`),
      ...secrets.missing.map((name) => `secret_env ${name}: ${secrets.problems[name] ?? `${refs[name]} is not set`}`),
    ];
    if (unresolved.length) return { ok: false, reason: `SecretNotResolved: ${unresolved.join('; ')}` };
    if (agent.builtin) return { ok: true, file: process.execPath, args: SCRIPTED_ARGS, shell: false };
    const check = this.o.security.exec.check({ command: agent.command, shell: true });
    if (!check.ok) return { ok: false, reason: `CommandNotAllowed: command: ${check.reason}` };
    if (this.o.security.exec.unrestricted || !check.argv) return { ok: true, file: agent.command, args: [], shell: true };
    return { ok: true, file: check.argv[0], args: check.argv.slice(1), shell: false };
  }

  /** sessionClient answers the agent's calls for one session (routed by its ACP sessionId) and hears its process exit. */
  private sessionClient(ls: LiveSession): AgentSessionClient {
    return {
      update: (n) => {
        if (ls.loading) return;
        ls.heard = true;
        const draft = eventFromUpdate(n.update, ls.toolNames);
        if (draft) void this.append(ls, draft.type, draft.content);
      },
      requestPermission: (params) => {
        ls.heard = true;
        return this.requestPermission(ls, params);
      },
      readTextFile: async (p) => {
        ls.heard = true;
        if (!ls.clientFs.read) throw RequestError.methodNotFound(methods.client.fs.readTextFile);
        const file = await this.confined(ls, p.path);
        let content: string;
        try {
          content = await readFile(file, 'utf8');
        } catch (e) {
          const code = (e as NodeJS.ErrnoException).code;
          if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') throw RequestError.resourceNotFound(p.path);
          throw e;
        }
        if (p.line || p.limit) {
          const lines = content.split('\n');
          const from = Math.max(0, (p.line ?? 1) - 1);
          content = lines.slice(from, p.limit ? from + p.limit : undefined).join('\n');
        }
        return { content };
      },
      writeTextFile: async (p) => {
        ls.heard = true;
        if (!ls.clientFs.write) throw RequestError.methodNotFound(methods.client.fs.writeTextFile);
        await writeFile(await this.confined(ls, p.path), p.content);
        return {};
      },
      exited: (code, signal) => void this.onExit(ls, code, signal),
    };
  }

  /** confined resolves a path an agent asked for, refusing anything outside the workspace roots. */
  private async confined(ls: LiveSession, p: string): Promise<string> {
    const roots = [String(ls.meta.workspace_path), ...((ls.meta.add_dirs as string[] | undefined) ?? [])];
    const abs = path.resolve(String(ls.meta.workspace_path), p);
    let real = abs;
    try { real = await realpath(abs); } catch { real = path.join(await realpath(path.dirname(abs)).catch(() => path.dirname(abs)), path.basename(abs)); }
    if (!roots.some((r) => within(real, r))) {
      throw RequestError.invalidParams({ path: p }, `path is outside the workspace roots`);
    }
    return real;
  }

  private async requestPermission(ls: LiveSession, params: RequestPermissionRequest): Promise<RequestPermissionResponse> {
    const requestId = `perm-${randomBytes(8).toString('hex')}`;
    const turnId = ls.turnId;
    const toolCall = params.toolCall;
    const toolName = toolNameOf(toolCall) || ls.toolNames.get(toolCall.toolCallId) || toolCall.title || '';
    const auto = this.autoDecision(ls, toolName, toolCall.kind ?? undefined, await this.policyDeny(ls));
    if (auto) {
      // NOTE: decided before a person is asked: nothing is pending, so an unattended run does not wait on anyone.
      const option = pickOption(params.options, auto.allow ? 'allow_once' : 'reject_once');
      const response: RequestPermissionResponse = option ? { outcome: { outcome: 'selected', optionId: option.optionId } } : { outcome: { outcome: 'cancelled' } };
      await this.append(ls, 'permission', {
        request_id: requestId, action: 'resolved', decision: auto.allow ? (option?.kind.replace('_', '-') ?? 'allow-once') : (option?.kind.replace('_', '-') ?? 'reject-once'),
        decided_by: auto.by, reason_codes: [auto.reason], title: toolCall.title ?? '', tool_name: toolName, kind: toolCall.kind ?? undefined,
        tool_call_id: toolCall.toolCallId, resource: (toolCall.locations ?? []).map((l) => l.path).join(','), raw: response,
      });
      return response;
    }
    // NOTE: pending before it is visible: an operator who sees the event can approve it at once.
    const answer = new Promise<RequestPermissionResponse>((resolve) => {
      ls.pending.set(requestId, { resolve, params, turnId, toolName });
      setTimeout(() => void this.resolvePermission(ls, requestId, { outcome: { outcome: 'cancelled' } }, 'canceled'), PERMISSION_TIMEOUT_MS).unref();
    });
    await this.o.redis.hset(this.k.permissions(ls.id), requestId, JSON.stringify({ turn_id: turnId, tool_call_id: toolCall.toolCallId, options: params.options.map((o) => o.kind) }));
    await this.append(ls, 'permission', {
      request_id: requestId, action: 'request', title: toolCall.title ?? '', tool_name: toolName, kind: toolCall.kind ?? undefined, tool_call_id: toolCall.toolCallId,
      resource: (toolCall.locations ?? []).map((l) => l.path).join(','), decision: '', raw: params,
    });
    return answer;
  }

  /**
   * policyDeny is the tool policy's `tools.deny` for the session's workspace (the workspace file's list replaces the
   * global one), read at each request so an edit applies at once. NOTE: an unreadable file denies nothing more
   * here; the mode and the agent's own rules still apply, and the settings route reports the file's error.
   */
  private async policyDeny(ls: LiveSession): Promise<string[]> {
    const settings = this.o.settings;
    if (!settings) return [];
    const list = (data: Record<string, unknown> | undefined): string[] | undefined => {
      const deny = (data?.tools as { deny?: unknown } | undefined)?.deny;
      return Array.isArray(deny) ? deny.filter((x): x is string => typeof x === 'string') : undefined;
    };
    const [global, local] = await Promise.all([
      settings.global().catch(() => undefined), settings.workspace(String(ls.meta.workspace_path)).catch(() => undefined),
    ]);
    return list(local?.data) ?? list(global?.data) ?? [];
  }

  /**
   * autoDecision is what the agent's definition decides for a permission request before a person is asked: its
   * `deny_tools` reject the agent's tool by name, `deny-all` rejects, `approve-all` approves, `approve-reads`
   * approves the read kinds; undefined leaves the request to a person.
   */
  private autoDecision(ls: LiveSession, toolName: string, kind: string | undefined, policyDeny: string[]): { allow: boolean; by: string; reason: string } | undefined {
    if (toolName && policyDeny.some((p) => matchesPattern(agentToolId(toolName), p) || matchesPattern(toolName, p))) {
      return { allow: false, by: 'tool_policy', reason: 'policy_denied' };
    }
    if (toolName && ls.denyTools.some((p) => matchesPattern(agentToolId(toolName), p) || matchesPattern(toolName, p))) {
      return { allow: false, by: 'agent_deny_tools', reason: 'policy_denied' };
    }
    if (ls.permissions === 'deny-all') return { allow: false, by: 'permission_mode', reason: 'permission_mode_deny_all' };
    if (ls.permissions === 'approve-all') return { allow: true, by: 'permission_mode', reason: 'permission_mode_approve_all' };
    if (kind && READ_KINDS.has(kind)) return { allow: true, by: 'permission_mode', reason: 'permission_mode_approve_reads' };
    return undefined;
  }

  /** resolvePermission answers a pending request once and records the decision (or its lapse). */
  private async resolvePermission(ls: LiveSession, requestId: string, response: RequestPermissionResponse, decision: string): Promise<void> {
    const p = ls.pending.get(requestId);
    if (!p) return;
    ls.pending.delete(requestId);
    await this.o.redis.hdel(this.k.permissions(ls.id), requestId);
    const lapsed = decision === 'canceled';
    await this.append(ls, 'permission', {
      request_id: requestId, action: 'resolved', decision, decided_by: lapsed ? 'lapsed' : 'operator', title: p.params.toolCall.title ?? '',
      tool_name: p.toolName, kind: p.params.toolCall.kind ?? undefined, tool_call_id: p.params.toolCall.toolCallId,
      ...(lapsed ? { reason_codes: ['approval_canceled'] } : {}), raw: response,
    }, p.turnId);
    p.resolve(response);
  }

  private async cancelTurn(ls: LiveSession): Promise<void> {
    for (const id of [...ls.pending.keys()]) await this.resolvePermission(ls, id, { outcome: { outcome: 'cancelled' } }, 'canceled');
    if (ls.busy && ls.agent) await ls.agent.conn.agent.notify(methods.agent.session.cancel, { sessionId: ls.acpSessionId }).catch(() => undefined);
  }

  private async runPrompt(ls: LiveSession, cmd: Extract<SessionCommand, { type: 'prompt' }>): Promise<void> {
    ls.busy = true;
    ls.turnId = cmd.turn_id;
    ls.lastActivity = ls.promptStartedAt = Date.now();
    ls.warned = ls.heard = ls.firstWarned = false;
    ls.cancelSentAt = 0;
    ls.usage = {};
    const preamble = ls.preamblePending ? await this.takePreamble(ls) : undefined;
    // NOTE: the turn's start joins the activity every append of the turn writes, so a later append keeps it
    // (elapsed_ms in the session view reads it).
    ls.meta.activity = { ...((ls.meta.activity as object) ?? {}), turn_id: cmd.turn_id, turn_source: 'user', turn_started_at: new Date().toISOString() };
    // NOTE: the agent is prompted without waiting for these writes: they are issued first on one connection,
    // so the agent's events still land after the user_message. A failed write fails the turn below.
    const recorded = Promise.all([
      preamble && this.append(ls, 'transcript_marker.created', { kind: 'transcript_marker.memory_injected', summary: preamble.summary, ...preamble.details }),
      this.append(ls, 'user_message', { text: cmd.text }, undefined, false, { prompt_active: true }),
    ]);
    recorded.catch(() => undefined);
    // NOTE: the preamble is its own content block before the user's, so the recorded user_message stays what the user sent.
    const prompt: PromptRequest['prompt'] = [...(preamble?.text ? [{ type: 'text' as const, text: preamble.text }] : []), { type: 'text' as const, text: cmd.text }];
    try {
      const res = await ls.agent!.conn.agent.request(methods.agent.session.prompt, { sessionId: ls.acpSessionId, prompt });
      await recorded;
      await updatesBefore();
      const meta = (res._meta ?? {}) as { usage?: Record<string, number> };
      const usage = { ...ls.usage, ...(meta.usage ?? {}) };
      if (Object.keys(usage).length) await this.append(ls, 'usage', { usage: { turn_id: cmd.turn_id, ...usage, timestamp: new Date().toISOString() } });
      await this.endTurn(ls, cmd.turn_id, 'done', { stop_reason: res.stopReason });
    } catch (err) {
      await updatesBefore();
      if (!ls.stopping) await this.endTurn(ls, cmd.turn_id, 'error', { error: redactText((err as Error).message, ls.secrets) });
    }
  }

  /** takePreamble asks for a fresh session's preamble once; a failure is logged and the prompt goes without one. */
  private async takePreamble(ls: LiveSession): Promise<SessionPreamble | undefined> {
    ls.preamblePending = false;
    if (!this.o.preamble) return undefined;
    try {
      return await this.o.preamble({ workspace_id: String(ls.meta.workspace_id), agent_name: String(ls.meta.agent_name), origin: String(ls.meta.origin ?? '') });
    } catch (err) {
      this.o.logger.warn({ session: ls.id, err: (err as Error).message }, 'session preamble (memory injection) failed; prompting without it');
      return undefined;
    }
  }

  /**
   * endTurn marks the session idle and then records the turn's terminal event, in that order: a client that
   * sees `done` may prompt at once and must find the session idle. Then the next queued prompt runs.
   */
  private async endTurn(ls: LiveSession, turnId: string, type: 'done' | 'error', content: Record<string, unknown>): Promise<void> {
    ls.busy = false;
    // NOTE: one script sets the session idle with the terminal event, so the session is idle once `done` is visible.
    await this.append(ls, type, content, turnId, false, { prompt_active: false });
    const next = ls.queue.shift();
    if (next && !ls.stopping) {
      await this.unqueue(ls, next);
      void this.runPrompt(ls, next);
    }
  }

  /** unqueue takes a prompt that leaves the queue (to run) off the input queue's accounting (queue-prompt-2.lua). */
  private async unqueue(ls: LiveSession, cmd: Extract<SessionCommand, { type: 'prompt' }>): Promise<void> {
    if (!cmd.queued_bytes) return;
    await this.o.redis.multi().hincrby(this.k.queue(ls.id), 'n', -1).hincrby(this.k.queue(ls.id), 'bytes', -cmd.queued_bytes).exec();
  }

  /** clearQueue drops every queued prompt (cancel, interrupt) and their accounting. */
  private async clearQueue(ls: LiveSession): Promise<void> {
    const dropped = ls.queue;
    ls.queue = [];
    await this.o.redis.del(this.k.queue(ls.id));
    // NOTE: one marker per dropped prompt, in its own turn: a client streaming that turn learns it will not run.
    for (const cmd of dropped) {
      await this.append(ls, 'transcript_marker.created', { kind: 'transcript_marker.prompt_dropped', summary: 'queued prompt dropped (cancelled or interrupted)' }, cmd.turn_id);
    }
  }

  /**
   * supervise enforces inactivity supervision on a running prompt: warn, cooperative cancel, then stop. Apart from
   * that, a prompt the agent has not answered at all within SESSION_FIRST_ACTIVITY_WARNING gets one early warning.
   */
  private async supervise(ls: LiveSession): Promise<void> {
    if (!ls.busy || ls.stopping) return;
    const { warnAfterMs, timeoutMs, cancelGraceMs, firstActivityMs } = this.o.supervision;
    const idle = Date.now() - ls.lastActivity;
    const silent = Date.now() - ls.promptStartedAt;
    // NOTE: an agent that never answers (e.g. waiting on a network it cannot reach) is otherwise only noticed at
    // the inactivity warning, many minutes later.
    if (firstActivityMs > 0 && !ls.heard && !ls.firstWarned && silent >= firstActivityMs) {
      ls.firstWarned = true;
      await this.append(ls, 'runtime_warning', {
        kind: 'first_activity', text: `the agent has not answered since the prompt began ${Math.round(silent / 1000)}s ago`, runtime: this.runtime(ls),
      }, undefined, true);
    }
    if (ls.cancelSentAt) {
      if (Date.now() - ls.cancelSentAt >= cancelGraceMs) {
        await this.append(ls, 'transcript_marker.created', { kind: 'transcript_marker.prompt_timeout', summary: 'prompt did not finish within the cancel grace; session stopped' });
        await this.stopSession(ls, 'timeout', 'activity_timeout', { kind: 'timeout', summary: `no activity for ${Math.round(idle / 1000)}s; the cancelled prompt did not finish within ${cancelGraceMs}ms` });
      }
      return;
    }
    if (idle >= timeoutMs) {
      ls.cancelSentAt = Date.now();
      await this.append(ls, 'runtime_warning', { kind: 'inactivity_timeout', text: `inactivity timeout after ${Math.round(idle / 1000)}s; cancelling the prompt`, runtime: this.runtime(ls) }, undefined, true);
      await this.cancelTurn(ls);
    } else if (idle >= warnAfterMs && !ls.warned) {
      ls.warned = true;
      await this.append(ls, 'runtime_warning', { kind: 'inactivity', text: `no activity for ${Math.round(idle / 1000)}s`, runtime: this.runtime(ls) }, undefined, true);
    }
  }

  private runtime(ls: LiveSession) {
    const now = Date.now();
    return {
      turn_id: ls.turnId, turn_source: 'user', last_activity_at: new Date(ls.lastActivity).toISOString(),
      idle_seconds: Math.floor((now - ls.lastActivity) / 1000),
    };
  }

  /**
   * append records one event for a live session, in arrival order, and keeps the session's activity
   * current, with `fields` of the session set in the same write. Supervision's own events do not count as activity.
   */
  private append(ls: LiveSession, type: string, content: Record<string, unknown>, turnId?: string, supervision = false, fields: Record<string, unknown> = {}): Promise<SessionEvent | undefined> {
    const run = async () => {
      const now = new Date();
      const turn = turnId ?? (ls.busy ? ls.turnId : '');
      if (type === 'usage' && content.usage && !supervision) Object.assign(ls.usage, Object.fromEntries(Object.entries(content.usage as object).filter(([, v]) => typeof v === 'number')));
      const patch = { ...fields };
      if (!supervision) {
        ls.lastActivity = now.getTime();
        ls.warned = false;
        const activity = {
          turn_id: turn, last_activity_at: now.toISOString(), last_activity_kind: type,
          current_tool: type === 'tool_call' ? String(content.tool_name ?? '') : '', tool_call_id: type === 'tool_call' ? String(content.tool_call_id ?? '') : '',
          last_progress_at: now.toISOString(),
        };
        ls.meta.activity = { ...((ls.meta.activity as object) ?? {}), ...activity };
        Object.assign(patch, { activity: ls.meta.activity, updated_at: now.toISOString() });
      }
      const event = await this.o.sessions.append({
        session_id: ls.id, turn_id: turn, type, agent_name: String(ls.meta.agent_name), workspace_id: String(ls.meta.workspace_id),
        workspace_path: String(ls.meta.workspace_path),
        // NOTE: the session's own values, then every value this process knows as secret (another agent's, the vault's).
        content: { schema: 'svc.session.event.v1', type, session_id: ls.acpSessionId, turn_id: turn, timestamp: now.toISOString(), ...(this.o.security.secrets.known.current().value(redactValue(content, ls.secrets)) as object) },
        timestamp: now.toISOString(), ...lineageOf(ls.meta),
      }, patch);
      if (event) await this.publish(busEventsOf(event, String(ls.meta.origin ?? '')));
      return event;
    };
    // NOTE: no await before the commands are issued, and one connection executes them in issue order, so
    // events keep their arrival order without waiting for each other; `chain` (the last append) settles
    // only after every earlier one.
    const next = run();
    ls.chain = next.catch((err) => this.o.logger.error({ err, session: ls.id }, 'event append failed'));
    return next;
  }

  /** publish puts events on the bus; a bus outage is logged, never fails the session. */
  private async publish(events: BusEventInput[]): Promise<void> {
    if (events.length) await this.o.bus.publishMany(events).catch((err) => this.o.logger.warn({ err }, 'event bus publish failed'));
  }

  private async onExit(ls: LiveSession, code: number | null, signal: NodeJS.Signals | null): Promise<void> {
    if (ls.stopping) return;
    const exit = code !== null ? `exit code ${code}` : `signal ${signal}`;
    if (!ls.busy && code === 0) return this.stopSession(ls, 'completed', 'agent process exited');
    const bundle = await this.crashBundle(ls, code, signal);
    if (ls.busy) await this.append(ls, 'error', { error: `agent process exited (${exit})` });
    await this.stopSession(ls, 'agent_crashed', exit, {
      kind: 'process_exit', summary: redactText(`agent process exited (${exit}); stderr: ${stderrOf(ls).trim().slice(-1000)}`, ls.secrets), crash_bundle_path: bundle,
    });
  }

  /** crashBundle writes the stderr tail and the last events of a crashed session to a file; returns its path. */
  private async crashBundle(ls: LiveSession, code: number | null, signal: string | null): Promise<string> {
    const dir = path.join(this.o.dataDir, 'crash-bundles');
    await mkdir(dir, { recursive: true });
    const file = path.join(dir, `${ls.id}-${Date.now()}.json`);
    await ls.chain;
    const events = await this.o.sessions.events(ls.id, { limit: 50 });
    await writeFile(file, JSON.stringify(redactValue({
      session_id: ls.id, agent_name: ls.meta.agent_name, exit_code: code, signal, at: new Date().toISOString(),
      stderr_tail: stderrOf(ls), last_events: events,
    }, ls.secrets), null, 2));
    return file;
  }

  /** stopSession ends a live session once: kill the agent, record `session_stopped`, release the lease. */
  private async stopSession(ls: LiveSession, reason: string, detail: string, failure?: SessionFailure): Promise<void> {
    if (ls.stopping) return;
    ls.stopping = true;
    const wasStarting = ls.meta.state === 'starting';
    for (const id of [...ls.pending.keys()]) await this.resolvePermission(ls, id, { outcome: { outcome: 'cancelled' } }, 'canceled');
    if (ls.agent) this.agents.release(ls.agent);
    await ls.chain;
    const now = new Date().toISOString();
    await this.o.sessions.patch(ls.id, { state: 'stopped', stop_reason: reason, stop_detail: detail, failure: failure ?? null, prompt_active: false, updated_at: now, owner: '', token_hash: '' });
    await this.append(ls, 'session_stopped', { stop_reason: reason, text: detail, ...(failure ? { failure } : {}) }, '', true).then(async (e) => {
      if (e && failure) await this.o.sessions.patch(ls.id, { failure });
    });
    await this.stopped(ls.id);
    // NOTE: the token and live mark (`{sessions}`) first, then the session's own keys with its lease in one step
    // (`{s:<id>}`): a resume's start waits for the lease (takeLease), so nothing of this run is undone after that
    // start began. A token left by a crash here is refused already (the stop cleared token_hash above).
    await this.o.redis.multi().del(this.k.token(ls.tokenHash)).srem(this.k.live, ls.id).exec();
    this.live.delete(ls.id);
    await this.o.redis.del(this.k.lease(ls.id), this.k.permissions(ls.id), this.k.queue(ls.id));
    // NOTE: a session that could not start: the API's create waiting on it answers now.
    if (wasStarting) await signalStarted(this.o.redis, this.o.sessions.keys, ls.id);
  }

  /** stopped runs the stop hook (onStopped) of a session now stopped; its failure does not fail the stop. */
  private async stopped(id: string): Promise<void> {
    await this.o.onStopped?.(id).catch((err) => this.o.logger.warn({ err, session: id }, 'session stop hook failed'));
  }

  private async renewLeases(): Promise<void> {
    if (!this.live.size) return;
    // NOTE: concurrent commands, not one pipeline: each lease has its session's tag, and on a Redis Cluster an
    // ioredis pipeline must stay on one node (one connection still carries them all at once).
    await Promise.all([...this.live.keys()].map((id) => this.o.redis.set(this.k.lease(id), this.owner, 'PX', LEASE_MS, 'XX')))
      .catch((err) => this.o.logger.warn({ err }, 'lease renewal failed'));
  }

  /**
   * reap marks sessions stopped whose owner stopped renewing their lease (a killed runtime), and stops
   * spawned children past their ttl or whose parent stopped with `auto_stop_on_parent`.
   */
  async reap(): Promise<void> {
    const { redis, sessions } = this.o;
    try {
      for (const id of await redis.smembers(this.k.live)) {
        if (this.live.has(id) || (await redis.exists(this.k.lease(id)))) continue;
        if ((await redis.set(this.k.reap(id), this.owner, 'PX', 10_000, 'NX')) !== 'OK') continue;
        const meta = await sessions.get(id);
        await redis.srem(this.k.live, id);
        if (!meta || meta.state === 'stopped') continue;
        const failure = { kind: 'transport_failure', summary: 'the runtime that owned this session stopped renewing its lease' };
        const now = new Date().toISOString();
        await sessions.patch(id, { state: 'stopped', stop_reason: 'error', stop_detail: 'owning runtime lost', failure, prompt_active: false, updated_at: now, owner: '', token_hash: '' });
        // NOTE: the lost runtime's token key (its agent may still run and hold the token); refused already above.
        if (typeof meta.token_hash === 'string' && meta.token_hash) await redis.del(this.k.token(meta.token_hash));
        const row = await sessions.append({
          session_id: id, turn_id: '', type: 'session_stopped', agent_name: String(meta.agent_name), workspace_id: String(meta.workspace_id),
          workspace_path: String(meta.workspace_path), content: { schema: 'svc.session.event.v1', type: 'session_stopped', session_id: meta.acp_session_id, stop_reason: 'error', failure, timestamp: now },
          failure, stop_reason: 'error', stop_detail: 'owning runtime lost', timestamp: now, ...lineageOf(meta),
        });
        await this.publish(busEventsOf(row, String(meta.origin ?? '')));
        await this.stopped(id);
      }
      for (const ls of this.live.values()) {
        const lineage = ls.meta.lineage as { ttl_expires_at?: string; parent_session_id?: string; auto_stop_on_parent?: boolean } | undefined;
        if (!lineage?.parent_session_id) continue;
        if (lineage.ttl_expires_at && Date.parse(lineage.ttl_expires_at) < Date.now()) {
          await this.stopSession(ls, 'completed', 'spawn ttl expired');
        } else if (lineage.auto_stop_on_parent) {
          const parent = await sessions.get(lineage.parent_session_id);
          if (!parent || parent.state === 'stopped') await this.stopSession(ls, 'completed', 'parent session stopped');
        }
      }
    } catch (err) {
      this.o.logger.warn({ err }, 'session reaper failed');
    }
  }
}

/**
 * stderrOf is the stderr tail of a session's agent process. NOTE: a shared process's tail is that of every session
 * it hosts; all of them run the same definition with the same environment and secrets, so no session learns
 * anything from it that another could not.
 */
function stderrOf(ls: LiveSession): string {
  return ls.agent?.proc.stderrTail ?? '';
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    p.then((v) => { clearTimeout(t); resolve(v); }, (e) => { clearTimeout(t); reject(e); });
  });
}
