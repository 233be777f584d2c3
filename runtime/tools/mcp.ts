import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import type { RegistryEntry } from '../../controllers/registry-controller.ts';
import { canonicalJson } from '../../store/canonical.ts';
import type { SecurityPolicy } from '../security/policy.ts';

/**
 * mcpClientSdk loads the MCP client on first use. NOTE: with its schema library it adds about 30 MiB to a
 * process, and a service without mcp_server records never needs it.
 */
let clientSdk: ReturnType<typeof loadClientSdk> | undefined;
const mcpClientSdk = () => (clientSdk ??= loadClientSdk());
async function loadClientSdk() {
  const [{ Client }, { SSEClientTransport }, { getDefaultEnvironment, StdioClientTransport }, { StreamableHTTPClientTransport }, { ToolListChangedNotificationSchema }] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'), import('@modelcontextprotocol/sdk/client/sse.js'), import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'), import('@modelcontextprotocol/sdk/types.js'),
  ]);
  return { Client, SSEClientTransport, getDefaultEnvironment, StdioClientTransport, StreamableHTTPClientTransport, ToolListChangedNotificationSchema };
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
  /** Reason codes when not ready (`mcp_unreachable`, `mcp_auth_unconfigured`). */
  reason_codes: string[];
  /** Resolved secret values, kept only to redact them from results; never logged or returned. */
  secrets: string[];
}

const CONNECT_TIMEOUT_MS = 10_000;
const RETRY_AFTER_MS = 5_000;

/** resolveSecrets resolves `secret_env` refs: `env:NAME` from this process's environment; vault refs need a vault. */
function resolveSecrets(refs: Record<string, string> = {}): { env: Record<string, string>; missing: string[] } {
  const env: Record<string, string> = {};
  const missing: string[] = [];
  for (const [name, ref] of Object.entries(refs)) {
    const value = ref.startsWith('env:') ? process.env[ref.slice(4)] : undefined;
    if (value === undefined) missing.push(name);
    else env[name] = value;
  }
  return { env, missing };
}

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
 */
export class McpPool {
  private readonly conns = new Map<string, Connection>();
  /** version moves whenever any server's state or tool list changes, so catalogs built from it can be cached. */
  version = 0;

  constructor(private readonly logger: Logger, private readonly security: SecurityPolicy) {}

  /**
   * state connects (or reuses the connection to) a server and returns its tools or its failure. A call waits for
   * a connection in progress; a list waits only within the connect timeout of the server's first sighting.
   */
  async state(entry: RegistryEntry<McpServerSpec>, forCall = false): Promise<McpServerState> {
    const digest = canonicalJson(entry.spec);
    let conn = this.conns.get(entry.id);
    if (conn && conn.digest !== digest) {
      await this.drop(entry.id);
      conn = undefined;
    }
    if (!conn) {
      conn = { digest, state: { ready: false, tools: [], reason_codes: ['mcp_unreachable'], secrets: [] }, failedAt: 0, createdAt: Date.now() };
      this.conns.set(entry.id, conn);
    }
    if (!conn.state.ready && !conn.connecting && Date.now() - conn.failedAt >= RETRY_AFTER_MS) {
      conn.connecting = this.connect(entry, conn).finally(() => { conn!.connecting = undefined; });
    }
    // NOTE: so a new server's tools list at once, while a server that hangs on start holds lists up only during
    // its first connect timeout; later (re)connects run in the background and lists answer from the state at hand.
    const budget = forCall ? CONNECT_TIMEOUT_MS : conn.createdAt + CONNECT_TIMEOUT_MS - Date.now();
    if (conn.connecting && budget > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([conn.connecting, new Promise((r) => { timer = setTimeout(r, budget); })]);
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

  async close(): Promise<void> {
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
    const { env: secretEnv, missing } = resolveSecrets(spec.secret_env);
    if (missing.length) {
      conn.state = { ready: false, tools: [], reason_codes: ['mcp_auth_unconfigured'], secrets: [] };
      conn.failedAt = Date.now();
      this.version++;
      this.logger.warn({ server: spec.name, unresolved: missing }, 'MCP server secret_env refs do not resolve; not starting it');
      return;
    }
    const { Client, SSEClientTransport, getDefaultEnvironment, StdioClientTransport, StreamableHTTPClientTransport, ToolListChangedNotificationSchema } = await mcpClientSdk();
    const remote = spec.transport === 'http' || spec.transport === 'sse' || (!spec.transport && Boolean(spec.url));
    const transport: Transport = !remote
      // NOTE: the server's stderr is discarded, not logged: it may echo the secrets it was given.
      ? new StdioClientTransport({ command: spec.command!, args: spec.args, env: { ...getDefaultEnvironment(), ...spec.env, ...secretEnv }, stderr: 'ignore' })
      : spec.transport === 'sse' ? new SSEClientTransport(new URL(spec.url!)) : new StreamableHTTPClientTransport(new URL(spec.url!));
    const client = new Client({ name: 'agent-runtime-control-service', version: '1.0.0' });
    try {
      await client.connect(transport, { timeout: CONNECT_TIMEOUT_MS });
      const tools = await listAll(client);
      conn.client = client;
      conn.state = { ready: true, tools, reason_codes: [], secrets: Object.values(secretEnv).filter((v) => v.length >= 4) };
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
