import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import type { RegistryEntry } from '../../controllers/registry-controller.ts';
import { canonicalJson } from '../../store/canonical.ts';
import { childEnv } from '../security/child-env.ts';
import type { SecurityPolicy } from '../security/policy.ts';

/**
 * mcpClientSdk loads the MCP client on first use. NOTE: with its schema library it adds about 30 MiB to a
 * process, and a service without mcp_server records never needs it.
 */
let clientSdk: ReturnType<typeof loadClientSdk> | undefined;
const mcpClientSdk = () => (clientSdk ??= loadClientSdk());
async function loadClientSdk() {
  const [{ Client }, { SSEClientTransport }, { StdioClientTransport }, { StreamableHTTPClientTransport }, { ToolListChangedNotificationSchema }] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'), import('@modelcontextprotocol/sdk/client/sse.js'), import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'), import('@modelcontextprotocol/sdk/types.js'),
  ]);
  return { Client, SSEClientTransport, StdioClientTransport, StreamableHTTPClientTransport, ToolListChangedNotificationSchema };
}

/** McpServerSpec is a projected `mcp_server` spec (spec/kinds.md §1.3). */
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
      conn = { digest, state: CONNECTING, failedAt: 0, createdAt: Date.now() };
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

  /** call invokes one tool on a ready server. */
  async call(entry: RegistryEntry<McpServerSpec>, tool: string, args: unknown, timeoutMs: number, signal?: AbortSignal) {
    const state = await this.state(entry, true);
    const client = this.conns.get(entry.id)?.client;
    if (!state.ready || !client) throw new Error(`MCP server ${entry.spec.name} is unreachable`);
    return client.callTool({ name: tool, arguments: (args ?? {}) as Record<string, unknown> }, undefined, { timeout: timeoutMs, signal });
  }

  /** retain closes the connections of servers no longer registered. */
  async retain(ids: Set<string>): Promise<void> {
    for (const id of [...this.conns.keys()]) if (!ids.has(id)) await this.drop(id);
  }

  /**
   * pinnedPath keeps the service's PATH under a restricted policy: the command's bare name is looked up on the
   * child's PATH, and a record's own PATH would otherwise pick a program EXEC_ALLOWLIST never checked.
   */
  private pinnedPath(): Record<string, string> {
    return this.security.exec.unrestricted ? {} : { PATH: process.env.PATH ?? '' };
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
    const refuse = (reason: string, log: Record<string, unknown>, msg: string) => {
      conn.state = { ready: false, tools: [], reason_codes: [reason], secrets: [] };
      conn.failedAt = Date.now();
      this.version++;
      this.logger.warn({ server: spec.name, ...log }, msg);
    };
    const secrets = this.security.secrets.resolve(spec.secret_env);
    if (secrets.refused.length || secrets.missing.length) {
      return refuse('mcp_auth_unconfigured', { refused: secrets.refused, unresolved: secrets.missing }, 'MCP server secret_env refs do not resolve; not starting it');
    }
    const remote = spec.transport === 'http' || spec.transport === 'sse' || (!spec.transport && Boolean(spec.url));
    // NOTE: checked at each start, not only at write time: EXEC_ALLOWLIST may have tightened since.
    const allowed = remote ? { ok: true as const } : this.security.exec.check({ command: spec.command ?? '', shell: false });
    if (!allowed.ok) return refuse('backend_not_executable', { reason: allowed.reason }, 'MCP server command is not allowed (CommandNotAllowed); not starting it');
    const { Client, SSEClientTransport, StdioClientTransport, StreamableHTTPClientTransport, ToolListChangedNotificationSchema } = await mcpClientSdk();
    const transport: Transport = !remote
      // NOTE: the server's stderr is discarded, not logged: it may echo the secrets it was given. Its environment is
      // scrubbed (the SDK adds only its own short list: HOME, LOGNAME, PATH, SHELL, TERM, USER).
      ? new StdioClientTransport({ command: spec.command!, args: spec.args, env: childEnv({ ...spec.env, ...secrets.env }, this.pinnedPath()), stderr: 'ignore' })
      : spec.transport === 'sse' ? new SSEClientTransport(new URL(spec.url!)) : new StreamableHTTPClientTransport(new URL(spec.url!));
    const client = new Client({ name: 'agent-runtime-control-service', version: '1.0.0' });
    try {
      await client.connect(transport, { timeout: CONNECT_TIMEOUT_MS });
      const tools = await listAll(client);
      // NOTE: the record changed or was removed (or the pool closed) while this connect ran: nobody will close it later.
      if (this.conns.get(entry.id) !== conn) {
        await client.close().catch(() => undefined);
        return;
      }
      conn.client = client;
      conn.state = { ready: true, tools, reason_codes: [], secrets: secrets.values };
      this.version++;
      client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
        conn.state = { ...conn.state, tools: await listAll(client).catch(() => conn.state.tools) };
        this.version++;
      });
      client.onclose = () => {
        if (conn.client !== client) return;
        conn.client = undefined;
        conn.state = { ...conn.state, ready: false, reason_codes: ['mcp_unreachable'] };
        conn.failedAt = Date.now();
        this.version++;
      };
    } catch (err) {
      await client.close().catch(() => undefined);
      conn.state = { ready: false, tools: conn.state.tools, reason_codes: ['mcp_unreachable'], secrets: [] };
      conn.failedAt = Date.now();
      this.version++;
      this.logger.warn({ server: spec.name, err: (err as Error).message }, 'MCP server unreachable');
    }
  }
}

async function listAll(client: Client): Promise<McpTool[]> {
  const tools: McpTool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined, { timeout: CONNECT_TIMEOUT_MS });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}
