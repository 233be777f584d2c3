import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import type { RegistryEntry } from '../../controllers/registry-controller.ts';
import { canonicalJson } from '../../store/canonical.ts';
import { childEnv } from '../security/child-env.ts';
import { failureOf } from '../security/egress.ts';
import type { SecurityPolicy } from '../security/policy.ts';

/**
 * mcpClientSdk loads the MCP client on first use. NOTE: with its schema library it adds about 30 MiB to a
 * process, and a service without mcp_server records never needs it.
 */
let clientSdk: ReturnType<typeof loadClientSdk> | undefined;
type McpClientSdk = Awaited<ReturnType<typeof loadClientSdk>>;
const mcpClientSdk = () => (clientSdk ??= loadClientSdk());
async function loadClientSdk() {
  const [{ Client }, { SSEClientTransport }, { StdioClientTransport }, { StreamableHTTPClientTransport }, { ToolListChangedNotificationSchema, ProgressNotificationSchema }] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'), import('@modelcontextprotocol/sdk/client/sse.js'), import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'), import('@modelcontextprotocol/sdk/types.js'),
  ]);
  return { Client, SSEClientTransport, StdioClientTransport, StreamableHTTPClientTransport, ToolListChangedNotificationSchema, ProgressNotificationSchema };
}

/** McpServerSpec is a projected `mcp_server` spec. */
export interface McpServerSpec {
  name: string;
  transport: string;
  command?: string;
  args: string[];
  env?: Record<string, string>;
  secret_env?: Record<string, string>;
  url?: string;
}

/** McpServerState is what the pool knows about one server: its tools, or why it cannot be reached. */
export interface McpServerState {
  ready: boolean;
  tools: McpTool[];
  /**
   * Reason codes when not ready: `mcp_connecting` (not connected yet), `mcp_unreachable`, `mcp_auth_unconfigured`
   * (a secret ref is refused or unset), `backend_not_executable` (EXEC_ALLOWLIST refuses its command).
   */
  reason_codes: string[];
  /** Resolved secret values, kept only to redact them from results; never logged or returned. */
  secrets: string[];
}

const CONNECT_TIMEOUT_MS = 10_000;
const PROBE_TIMEOUT_MS = 5_000;
const RETRY_AFTER_MS = 5_000;
/** How often the pool compares its connections with the mcp_server registry (one MGET when nothing changed). */
const SYNC_MS = 1_000;
const CONNECTING: McpServerState = { ready: false, tools: [], reason_codes: ['mcp_connecting'], secrets: [] };

interface Connection {
  digest: string;
  state: McpServerState;
  client?: Client;
  connecting?: Promise<void>;
  failedAt: number;
  createdAt: number;
  /** progress maps the progressToken of each call in flight that asked for progress to its callback. */
  progress: Map<string, (p: McpProgress) => void>;
}

/**
 * McpPool keeps one MCP client per `mcp_server` record (stdio, streamable HTTP or SSE through
 * @modelcontextprotocol/sdk), lists each server's tools once and again on `tools/list_changed`, and
 * reconnects when the record changes. A server that cannot be reached is retried after RETRY_AFTER_MS, so a
 * dead server costs one connect attempt, not one per request.
 * NOTE: only the registry sync (`start`) and calls start servers; reads (lists, views) report the state at hand,
 * so a reader cannot make the service spawn processes.
 */
export class McpPool {
  private readonly conns = new Map<string, Connection>();
  /** version moves whenever any server's state or tool list changes, so catalogs built from it can be cached. */
  version = 0;
  private timer?: NodeJS.Timeout;
  private syncing?: Promise<void>;
  private progressTokens = 0;

  /** `security` decides which commands may start and which secret refs resolve. */
  constructor(private readonly logger: Logger, private readonly security: SecurityPolicy) {}

  /**
   * start keeps the connections in step with the mcp_server registry: every SYNC_MS it reads the registry
   * (`read`, e.g. through a RegistryCache), closes the connections of removed or changed records and starts
   * (or retries, after RETRY_AFTER_MS) the others. Idempotent; close() stops it.
   */
  start(read: () => Promise<RegistryEntry<McpServerSpec>[]>, intervalMs = SYNC_MS): void {
    if (this.timer) return;
    const tick = () => {
      this.syncing ??= this.sync(read).finally(() => { this.syncing = undefined; });
    };
    this.timer = setInterval(tick, intervalMs);
    tick();
  }

  private async sync(read: () => Promise<RegistryEntry<McpServerSpec>[]>): Promise<void> {
    try {
      const entries = await read();
      await this.retain(new Set(entries.map((e) => e.id)));
      for (const e of entries) if (this.timer) await this.ensure(e);
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'MCP registry sync failed');
    }
  }

  /** ensure replaces a connection whose record changed and starts a connect when none is up, running or recent. */
  private async ensure(entry: RegistryEntry<McpServerSpec>): Promise<Connection> {
    const digest = canonicalJson(entry.spec);
    let conn = this.conns.get(entry.id);
    if (conn && conn.digest !== digest) {
      await this.drop(entry.id);
      conn = undefined;
    }
    if (!conn) {
      conn = { digest, state: CONNECTING, failedAt: 0, createdAt: Date.now(), progress: new Map() };
      this.conns.set(entry.id, conn);
    }
    if (!conn.state.ready && !conn.connecting && Date.now() - conn.failedAt >= RETRY_AFTER_MS) {
      const c = conn;
      c.connecting = this.connect(entry, c).finally(() => { c.connecting = undefined; });
    }
    return conn;
  }

  /**
   * state returns a server's tools or why it is not ready. A read (`forCall` false) never starts a server: before
   * the sync has connected it, it is `mcp_connecting`. A call is an action: it starts (or restarts) the server
   * when needed and waits for a connect in progress, up to CONNECT_TIMEOUT_MS.
   */
  async state(entry: RegistryEntry<McpServerSpec>, forCall = false): Promise<McpServerState> {
    if (!forCall) {
      const conn = this.conns.get(entry.id);
      return conn && conn.digest === canonicalJson(entry.spec) ? conn.state : CONNECTING;
    }
    const conn = await this.ensure(entry);
    if (conn.connecting) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([conn.connecting, new Promise((r) => { timer = setTimeout(r, CONNECT_TIMEOUT_MS); })]);
      clearTimeout(timer);
    }
    return conn.state;
  }

  /**
   * call invokes one tool on a ready server. A streamable HTTP server that restarted has forgotten the client's
   * session and answers 404 or 400 "No valid session ID": the connection is dropped, made again and the call
   * retried once. A server that cannot be reached at all marks its tools unavailable (`mcp_unreachable`) until
   * the sync reconnects it. `onprogress` receives the server's progress notifications for this call.
   */
  async call(entry: RegistryEntry<McpServerSpec>, tool: string, args: unknown, timeoutMs: number, signal?: AbortSignal, onprogress?: (p: McpProgress) => void) {
    for (let attempt = 0; ; attempt++) {
      const state = await this.state(entry, true);
      const conn = this.conns.get(entry.id);
      const client = conn?.client;
      if (!state.ready || !conn || !client) throw new Error(`MCP server ${entry.spec.name} is unreachable`);
      // NOTE: the SDK's own `onprogress` loses the last notification when it arrives with the result (it handles
      // notifications a microtask later, after the result has removed the call's handler), so the pool routes
      // progress itself and keeps the callback until the call has returned. Progress does not extend the
      // timeout: `tools.call_timeout` stays the bound of a whole call.
      const token = onprogress ? `svc-${++this.progressTokens}` : undefined;
      if (token) conn.progress.set(token, onprogress!);
      try {
        return await client.callTool({ name: tool, arguments: (args ?? {}) as Record<string, unknown>, ...(token ? { _meta: { progressToken: token } } : {}) }, undefined, { timeout: timeoutMs, signal });
      } catch (err) {
        const lost = connectionLost(err);
        if (!lost) throw err;
        // NOTE: a lost session reconnects at once; a dead server waits RETRY_AFTER_MS, as any failed connect does.
        this.disconnect(conn, client, lost === 'session' ? 0 : Date.now());
        if (lost !== 'session' || attempt > 0) throw err;
      } finally {
        if (token) conn.progress.delete(token);
      }
    }
  }

  /** disconnect marks a connection lost (its tools unavailable) and closes its client. */
  private disconnect(conn: Connection, client: Client, failedAt: number): void {
    if (conn.client !== client) return;
    conn.client = undefined;
    conn.state = { ...conn.state, ready: false, reason_codes: ['mcp_unreachable'] };
    conn.failedAt = failedAt;
    this.version++;
    void client.close().catch(() => undefined);
  }

  /** retain closes the connections of servers no longer registered. */
  async retain(ids: Set<string>): Promise<void> {
    for (const id of [...this.conns.keys()]) if (!ids.has(id)) await this.drop(id);
  }

  /** close stops the registry sync and closes every connection (their servers exit). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.syncing;
    await Promise.all([...this.conns.keys()].map((id) => this.drop(id)));
  }

  private async drop(id: string): Promise<void> {
    const conn = this.conns.get(id);
    this.conns.delete(id);
    this.version++;
    await conn?.client?.close().catch(() => undefined);
  }

  private async connect(entry: RegistryEntry<McpServerSpec>, conn: Connection): Promise<void> {
    const spec = entry.spec;
    const opened = await openMcpClient(spec, this.security, (client, sdk) => {
      client.setNotificationHandler(sdk.ProgressNotificationSchema, (n) => {
        const { progressToken, progress, total, message } = n.params;
        conn.progress.get(String(progressToken))?.({ progress, ...(total !== undefined ? { total } : {}), ...(message !== undefined ? { message } : {}) });
      });
      client.setNotificationHandler(sdk.ToolListChangedNotificationSchema, async () => {
        // NOTE: the state is read after the list arrives: a server may announce a change during the connect, and
        // a state read before the await would put back `mcp_connecting` over the connected state.
        const tools = await listAll(client).catch(() => undefined);
        if (!tools) return;
        conn.state = { ...conn.state, tools };
        this.version++;
      });
    });
    if (!opened.ok) {
      conn.state = { ready: false, tools: opened.reason === 'mcp_unreachable' ? conn.state.tools : [], reason_codes: [opened.reason], secrets: [] };
      conn.failedAt = Date.now();
      this.version++;
      this.logger.warn({ server: spec.name, reason: opened.reason, err: opened.message }, 'MCP server not connected');
      return;
    }
    const { client, tools, secrets } = opened;
    // NOTE: the record changed or was removed (or the pool closed) while this connect ran: nobody will close it later.
    if (this.conns.get(entry.id) !== conn) {
      await client.close().catch(() => undefined);
      return;
    }
    conn.client = client;
    conn.state = { ready: true, tools, reason_codes: [], secrets };
    this.version++;
    client.onclose = () => {
      if (conn.client !== client) return;
      conn.client = undefined;
      conn.state = { ...conn.state, ready: false, reason_codes: ['mcp_unreachable'] };
      conn.failedAt = Date.now();
      this.version++;
    };
  }
}

/** McpServerInfo is what a server says about itself at initialize. */
export interface McpServerInfo {
  name: string;
  version: string;
  protocol_version: string;
}

/** McpConnectFailure is why a server could not be connected, as a connection reason code. */
export type McpConnectFailure = { ok: false; reason: 'mcp_auth_unconfigured' | 'backend_not_executable' | 'mcp_unreachable'; message: string };

/** McpOpenResult is a connected client with the server's tools, or why there is none. */
export type McpOpenResult = { ok: true; client: Client; tools: McpTool[]; secrets: string[]; serverInfo: McpServerInfo } | McpConnectFailure;

/** McpProbeResult is what one connect-and-list observed; the client is closed again. */
export type McpProbeResult = { ok: true; tools: McpTool[]; serverInfo: McpServerInfo } | McpConnectFailure;

/** isRemote says whether a spec names a URL (streamable HTTP or SSE) rather than a command. */
const isRemote = (spec: McpServerSpec) => spec.transport === 'http' || spec.transport === 'sse' || (!spec.transport && Boolean(spec.url));

/**
 * openMcpClient connects to one server and lists its tools: the one connect path of the pool and of the
 * mcp_server controller's probe. Secret refs must resolve and the command must pass EXEC_ALLOWLIST first;
 * `beforeConnect` installs handlers (e.g. tools/list_changed) before the first message can arrive.
 */
export async function openMcpClient(spec: McpServerSpec, security: SecurityPolicy, beforeConnect?: (client: Client, sdk: McpClientSdk) => void, timeoutMs = CONNECT_TIMEOUT_MS): Promise<McpOpenResult> {
  const secrets = await security.secrets.resolve(spec.secret_env);
  if (secrets.refused.length || secrets.missing.length) {
    return { ok: false, reason: 'mcp_auth_unconfigured', message: `secret_env refs do not resolve: ${[...secrets.refused, ...secrets.missing].join(', ')}` };
  }
  const remote = isRemote(spec);
  // NOTE: checked at each start, not only at write time: EXEC_ALLOWLIST may have tightened since.
  const allowed = remote ? { ok: true as const } : security.exec.check({ command: spec.command ?? '', shell: false });
  if (!allowed.ok) return { ok: false, reason: 'backend_not_executable', message: `the command is not allowed (CommandNotAllowed): ${allowed.reason}` };
  const sdk = await mcpClientSdk();
  const { Client, SSEClientTransport, StdioClientTransport, StreamableHTTPClientTransport } = sdk;
  // NOTE: a restricted policy pins the service's PATH: the command's bare name is looked up on the child's PATH,
  // and a record's own PATH would otherwise pick a program EXEC_ALLOWLIST never checked.
  const pinned: Record<string, string> = security.exec.unrestricted ? {} : { PATH: process.env.PATH ?? '' };
  const transport: Transport = !remote
    // NOTE: the server's stderr is discarded, not logged: it may echo the secrets it was given. Its environment is
    // scrubbed (the SDK adds only its own short list: HOME, LOGNAME, PATH, SHELL, TERM, USER).
    ? new StdioClientTransport({ command: spec.command!, args: spec.args, env: childEnv({ ...spec.env, ...secrets.env }, pinned), stderr: 'ignore' })
    // NOTE: a remote server is reached through the egress rule's fetch, the event stream and every redirect hop too.
    : spec.transport === 'sse' ? new SSEClientTransport(new URL(spec.url!), { fetch: security.egress.fetch }) : new StreamableHTTPClientTransport(new URL(spec.url!), { fetch: security.egress.fetch });
  let protocolVersion = '';
  const setProtocolVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v: string) => { protocolVersion = v; setProtocolVersion?.(v); };
  const client = new Client({ name: 'agent-runtime-control-service', version: '1.0.0' });
  beforeConnect?.(client, sdk);
  try {
    await client.connect(transport, { timeout: timeoutMs });
    const tools = await listAll(client, timeoutMs);
    const info = client.getServerVersion();
    return { ok: true, client, tools, secrets: secrets.values, serverInfo: { name: info?.name ?? '', version: info?.version ?? '', protocol_version: protocolVersion } };
  } catch (err) {
    await client.close().catch(() => undefined);
    const code = (err as NodeJS.ErrnoException).code;
    // NOTE: a stdio command that does not exist or may not run fails at spawn (ENOENT, EACCES): the command is
    // at fault, not the network. A shell line as `command` lands here too.
    if (!remote && (code === 'ENOENT' || code === 'EACCES')) {
      return { ok: false, reason: 'backend_not_executable', message: `cannot run ${spec.command}: ${code} (command is one executable; put its arguments in args)` };
    }
    return { ok: false, reason: 'mcp_unreachable', message: remote ? remoteFailure(err) : (err as Error).message };
  }
}

/**
 * remoteFailure words a remote server's failed connect by its class (egress.ts) and, for an HTTP answer, its status.
 * NOTE: never the SDK's message: it carries the body of a non-2xx answer, and an mcp_server's status is served to
 * every reader (the URL may name a host the writer wanted to read from the service's network).
 */
function remoteFailure(err: unknown): string {
  const code = (err as { code?: unknown })?.code;
  if (typeof code === 'number' && code >= 100 && code <= 599) return `the server answered ${code} (http_status)`;
  const failure = code === -32001 ? 'timeout' : failureOf(err);
  if (failure === 'egress_denied') return 'the server may not be reached (egress_denied: a private, loopback or link-local address EGRESS_ALLOWLIST does not list)';
  if (failure === 'timeout') return 'the server did not answer in time (timeout)';
  return 'the server could not be reached (connect_failed)';
}

/**
 * probeMcpServer connects to a server, lists its tools and closes the client again (the controller's observe).
 * NOTE: PROBE_TIMEOUT_MS stays well inside the reconcile lease (10 s), so a silent server cannot outlive it.
 */
export async function probeMcpServer(spec: McpServerSpec, security: SecurityPolicy): Promise<McpProbeResult> {
  const opened = await openMcpClient(spec, security, undefined, PROBE_TIMEOUT_MS);
  if (!opened.ok) return opened;
  await opened.client.close().catch(() => undefined);
  return { ok: true, tools: opened.tools, serverInfo: opened.serverInfo };
}

/** McpProgress is one `notifications/progress` of a call. */
export interface McpProgress {
  progress: number;
  total?: number;
  message?: string;
}

/**
 * connectionLost tells a call's failure that is the connection's from the tool's own: `session` when a streamable
 * HTTP server no longer knows the session (it restarted: 404, or 400 naming the session id), `down` when it cannot be
 * reached or the connection closed, undefined otherwise.
 */
function connectionLost(err: unknown): 'session' | 'down' | undefined {
  const e = err as { name?: string; code?: unknown; message?: string; cause?: { code?: string } };
  const message = e?.message ?? '';
  if (typeof e?.code === 'number' && (e.code === 404 || (e.code === 400 && /session/i.test(message)))) return 'session';
  if (e?.name === 'TypeError' && /fetch failed/.test(message)) return 'down';
  if (/ECONNREFUSED|ECONNRESET|Connection closed|Not connected/i.test(message) || e?.cause?.code === 'ECONNREFUSED') return 'down';
  return undefined;
}

async function listAll(client: Client, timeoutMs = CONNECT_TIMEOUT_MS): Promise<McpTool[]> {
  const tools: McpTool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined, { timeout: timeoutMs });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}
