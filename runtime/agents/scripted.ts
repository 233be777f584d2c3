/**
 * scripted: the deterministic ACP agent that ships with the service (the default agent, and the demo).
 * It needs no model credentials: it reads each prompt line by line and acts it out.
 *
 *   plain text         an agent message echoing the line
 *   /think T           a thought (reasoning) with T
 *   /tool NAME JSON    a tool call NAME with input JSON, then its result
 *   /permission TITLE  a permission request; then "permission granted" or "permission denied"
 *   /ask KIND NAME TITLE  a tool call of ACP kind KIND named NAME (in `_meta.claudeCode.toolName`, as Claude Code's
 *                      adapter sends it) titled TITLE, its permission request offering allow_once, allow_always,
 *                      reject_once and reject_always, "<NAME> allowed (<kind>)" or "<NAME> rejected (<kind>)"
 *                      naming the option chosen, then its result (an update with no name or title)
 *   /read PATH         reads PATH through the client (fs/read_text_file): "read: <content>" or "read error <code>"
 *   /plan A;B          a plan update with entries A and B
 *   /usage IN OUT      a usage update (IN input and OUT output tokens)
 *   /progress N MS     N messages "progress i/N", MS apart (honours cancel)
 *   /sleep MS          wait MS, stopping at once on cancel
 *   /hang MS           wait MS, ignoring cancel
 *   /await PATH        wait until the file PATH exists, stopping at once on cancel (a test's signal to go on)
 *   /history           an agent message listing this session's earlier user lines, joined by " | "
 *   /model             an agent message naming the session's current model
 *   /auth              an agent message saying how this process authenticated ("authenticated with M (N authenticate calls)")
 *   /crash CODE        exit the process with CODE
 *   /error MSG         fail the prompt with MSG
 *   /spawn AGENT       POST <api>/api/agent/spawn with the session's token; says the child's session id
 *   /call TOOL JSON    calls TOOL of the service's tool registry through the MCP server the session was given
 *                      (the session's own tools and policy), reporting it as a tool call and its result
 *
 * Sessions persist to $SCRIPTED_STATE_DIR (when set) so `session/load` works across restarts;
 * SCRIPTED_NO_LOAD=1 turns loading off. SCRIPTED_AUTH_METHODS=a,b makes it advertise those ACP auth methods and refuse
 * session/new and session/load until `authenticate` succeeded, which it does only when SCRIPTED_API_KEY is set (a key
 * starting with `rejected-` is refused, its value quoted in the error, as careless agents do).
 *
 * Models: session/new and session/load answer the models it offers, SCRIPTED_MODELS (`id` or `id=Label`, comma
 * separated; default `scripted-default=Scripted default,scripted-fast=Scripted fast`), as a `select` config option of
 * category `model` (ACP's stable shape) or, with SCRIPTED_MODEL_STATE=models, as the earlier unstable `models`
 * field ({currentModelId, availableModels}) that agents in use still send; `none` reports no model state.
 * `session/set_config_option` picks one; `/model` says the current one.
 *
 * stdout carries the protocol; logs go to stderr only. It speaks ACP through
 * a small JSON-RPC peer (json-rpc-peer.ts), not the SDK's runtime: a lean process, since many may run.
 *
 * One process hosts many sessions (the service pools it): every session's state, MCP servers and token are its
 * own, keyed by its ACP sessionId; `session/close` forgets a session (its state file stays, for `session/load`).
 * The session's identity (its token) comes with its MCP server in session/new or session/load; the process
 * environment's SVC_SESSION_TOKEN is only a fallback for an agent run one per session.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import type {
  AuthenticateRequest, CancelNotification, CloseSessionRequest, InitializeResponse, LoadSessionRequest, McpServer, NewSessionRequest, PromptRequest,
  PromptResponse, RequestPermissionRequest, RequestPermissionResponse, ToolKind, SessionConfigOption, SessionNotification, SessionUpdate, SetSessionConfigOptionRequest,
} from '@agentclientprotocol/sdk';
import { JsonRpcPeer, RpcError } from './json-rpc-peer.ts';

interface Turn { role: 'user' | 'agent'; text: string }
interface SessionState { id: string; cwd: string; history: Turn[]; model?: string; cancel?: () => void; cancelled: boolean }

const stateDir = process.env.SCRIPTED_STATE_DIR;
const canLoad = process.env.SCRIPTED_NO_LOAD !== '1';
const authMethods = (process.env.SCRIPTED_AUTH_METHODS ?? '').split(',').map((m) => m.trim()).filter(Boolean);
/** The models this agent offers (SCRIPTED_MODELS) and how it reports them (SCRIPTED_MODEL_STATE). */
const models = (process.env.SCRIPTED_MODELS ?? 'scripted-default=Scripted default,scripted-fast=Scripted fast').split(',').map((m) => m.trim()).filter(Boolean)
  .map((m) => { const [id, ...label] = m.split('='); return { id: id.trim(), name: label.join('=').trim() || id.trim() }; });
const modelState = process.env.SCRIPTED_MODEL_STATE ?? 'config_option';
/** How this process authenticated: the method, and how many `authenticate` calls it answered. */
const auth = { method: '', calls: 0 };
const sessions = new Map<string, SessionState>();
let calls = 0;
const log = (msg: string) => process.stderr.write(`scripted: ${msg}\n`);

function save(s: SessionState): void {
  if (!stateDir) return;
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(path.join(stateDir, `${s.id}.json`), JSON.stringify({ id: s.id, cwd: s.cwd, history: s.history, model: s.model }));
}

/** configOptions are a session's ACP configuration options: its model selector, when models are reported that way. */
function configOptions(s: SessionState): SessionConfigOption[] {
  if (modelState !== 'config_option' || !models.length) return [];
  return [{ type: 'select', id: 'model', name: 'Model', category: 'model', currentValue: s.model ?? models[0].id, options: models.map((m) => ({ value: m.id, name: m.name })) }];
}

/** modelStateOf is the model state a session/new or session/load answer carries (see the header). */
function modelStateOf(s: SessionState): Record<string, unknown> {
  if (modelState === 'models' && models.length) return { models: { currentModelId: s.model ?? models[0].id, availableModels: models.map((m) => ({ modelId: m.id, name: m.name })) } };
  const options = configOptions(s);
  return options.length ? { configOptions: options } : {};
}

function load(id: string): SessionState | undefined {
  if (!stateDir || !/^scripted-[0-9a-f]+$/.test(id)) return undefined;
  try {
    const s = JSON.parse(readFileSync(path.join(stateDir, `${id}.json`), 'utf8')) as SessionState;
    return { ...s, cancelled: false };
  } catch {
    return undefined;
  }
}

/** wait sleeps `ms`; when `s` is given, a cancel ends the wait early and returns false. */
function wait(ms: number, s?: SessionState): Promise<boolean> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(true), ms);
    if (s) s.cancel = () => { clearTimeout(t); resolve(false); };
  });
}

async function runLine(line: string, s: SessionState, client: JsonRpcPeer, update: (u: SessionUpdate) => Promise<void>): Promise<Record<string, unknown> | void> {
  const say = async (text: string) => {
    s.history.push({ role: 'agent', text });
    await update({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text } });
  };
  const [cmd, ...rest] = line.split(' ');
  const arg = rest.join(' ');
  switch (cmd) {
    case '/think':
      return update({ sessionUpdate: 'agent_thought_chunk', content: { type: 'text', text: arg } });
    case '/tool': {
      const [name, ...json] = rest;
      let input: unknown = json.join(' ');
      try { input = JSON.parse(json.join(' ')); } catch { /* keep the raw string */ }
      const toolCallId = `call-${++calls}`;
      await update({ sessionUpdate: 'tool_call', toolCallId, title: name, kind: 'other', status: 'in_progress', rawInput: input });
      return update({
        sessionUpdate: 'tool_call_update', toolCallId, title: name, status: 'completed', rawOutput: { ok: true, tool: name, input },
        content: [{ type: 'content', content: { type: 'text', text: `${name} ran` } }],
      });
    }
    case '/permission': {
      const res = await client.request<RequestPermissionResponse>('session/request_permission', {
        sessionId: s.id,
        toolCall: { toolCallId: `call-${++calls}`, title: arg, kind: 'other', status: 'pending' },
        options: [{ optionId: 'allow', name: 'Allow', kind: 'allow_once' }, { optionId: 'reject', name: 'Reject', kind: 'reject_once' }],
      } satisfies RequestPermissionRequest);
      return say(res.outcome.outcome === 'selected' && res.outcome.optionId === 'allow' ? 'permission granted' : 'permission denied');
    }
    case '/ask': {
      const [kind, name, ...title] = rest;
      const toolCallId = `call-${++calls}`;
      const _meta = { claudeCode: { toolName: name } };
      await update({ sessionUpdate: 'tool_call', toolCallId, title: title.join(' '), kind: kind as ToolKind, status: 'pending', _meta });
      const options: RequestPermissionRequest['options'] = [
        { optionId: 'yes', name: 'Allow', kind: 'allow_once' }, { optionId: 'always', name: 'Always allow', kind: 'allow_always' },
        { optionId: 'no', name: 'Reject', kind: 'reject_once' }, { optionId: 'never', name: 'Never', kind: 'reject_always' },
      ];
      const res = await client.request<RequestPermissionResponse>('session/request_permission', {
        sessionId: s.id, toolCall: { toolCallId, title: title.join(' '), kind: kind as ToolKind, status: 'pending', _meta }, options,
      } satisfies RequestPermissionRequest);
      const chosen = res.outcome.outcome === 'selected' ? options.find((o) => o.optionId === (res.outcome as { optionId: string }).optionId) : undefined;
      const allowed = Boolean(chosen?.kind.startsWith('allow'));
      await say(`${name} ${allowed ? 'allowed' : 'rejected'} (${chosen?.kind ?? 'cancelled'})`);
      return update({ sessionUpdate: 'tool_call_update', toolCallId, status: allowed ? 'completed' : 'failed', content: [{ type: 'content', content: { type: 'text', text: allowed ? 'done' : 'rejected' } }] });
    }
    case '/read': {
      try {
        const res = await client.request<{ content: string }>('fs/read_text_file', { sessionId: s.id, path: arg });
        return say(`read: ${res.content}`);
      } catch (err) {
        return say(`read error ${(err as { code?: number }).code ?? 'unknown'}`);
      }
    }
    case '/plan':
      return update({ sessionUpdate: 'plan', entries: arg.split(';').filter(Boolean).map((content) => ({ content, priority: 'medium', status: 'pending' })) });
    case '/usage': {
      // NOTE: stable ACP v1 has no token-count update; counts travel in the prompt response's _meta.usage.
      const [input, output] = rest.map(Number);
      await update({ sessionUpdate: 'usage_update', used: input + output, size: 200_000 });
      return { input_tokens: input, output_tokens: output, total_tokens: input + output };
    }
    case '/progress': {
      const [n, ms] = rest.map(Number);
      for (let i = 1; i <= n && !s.cancelled; i++) {
        await say(`progress ${i}/${n}`);
        if (i < n && ms > 0 && !(await wait(ms, s))) return;
      }
      return;
    }
    case '/sleep':
      await wait(Number(arg), s);
      return;
    case '/hang':
      await wait(Number(arg));
      return;
    case '/await':
      while (!s.cancelled && !existsSync(arg) && await wait(50, s));
      return;
    case '/model':
      return say(`model ${s.model ?? models[0]?.id ?? 'none'}`);
    case '/auth':
      return say(auth.method ? `authenticated with ${auth.method} (${auth.calls} authenticate calls)` : `not authenticated (${auth.calls} authenticate calls)`);
    case '/history':
      return say(s.history.filter((t) => t.role === 'user').slice(0, -1).map((t) => t.text).join(' | '));
    case '/crash':
      log(`crashing with exit code ${arg} as asked`);
      process.exit(Number(arg));
    // falls through (never reached)
    case '/error':
      throw new RpcError(-32603, arg || 'scripted error');
    case '/call': {
      const [name, ...json] = rest;
      let input: Record<string, unknown> = {};
      try { input = json.length ? JSON.parse(json.join(' ')) : {}; } catch { return say(`/call: the input is not JSON: ${json.join(' ')}`); }
      const toolCallId = `call-${++calls}`;
      await update({ sessionUpdate: 'tool_call', toolCallId, title: name, kind: 'other', status: 'in_progress', rawInput: input });
      let text: string;
      let failed = true;
      let raw: unknown;
      try {
        const res = await (await toolClient(s.id)).callTool({ name, arguments: input });
        text = (res.content as { type: string; text?: string }[]).map((c) => c.text ?? '').join('\n');
        failed = Boolean(res.isError);
        raw = res.structuredContent ?? { text };
      } catch (err) {
        text = `/call ${name} failed: ${(err as Error).message}`;
      }
      return update({ sessionUpdate: 'tool_call_update', toolCallId, title: name, status: failed ? 'failed' : 'completed', rawOutput: raw ?? { error: text }, content: [{ type: 'content', content: { type: 'text', text } }] });
    }
    case '/spawn': {
      const { url, token } = identityOf(s.id);
      if (!url || !token) return say('spawn failed: not running under the service');
      const res = await fetch(`${url}/api/agent/spawn`, {
        method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ agent_name: arg }),
      });
      const body = (await res.json().catch(() => ({}))) as { spawn?: { session?: { id?: string } }; error?: string; diagnostic?: { code?: string } };
      return say(res.ok ? `spawned child session ${body.spawn?.session?.id}` : `spawn failed: ${res.status} ${body.diagnostic?.code ?? ''}: ${body.error ?? ''}`.trim());
    }
    default:
      return say(line);
  }
}

/** The MCP servers each session was given, and one client per session to the service's (the `http` one). */
const mcpServers = new Map<string, McpServer[]>();
const toolClients = new Map<string, Promise<McpClient>>();

function toolClient(sessionId: string): Promise<McpClient> {
  let c = toolClients.get(sessionId);
  if (!c) {
    const server = mcpServers.get(sessionId)?.find((m) => 'type' in m && m.type === 'http');
    if (!server || !('url' in server)) return Promise.reject(new Error('this session was given no MCP server over HTTP'));
    const headers = Object.fromEntries(server.headers.map((h) => [h.name, h.value]));
    // NOTE: the MCP SDK is loaded on first use so sessions that never call a tool start as fast as before.
    c = Promise.all([import('@modelcontextprotocol/sdk/client/index.js'), import('@modelcontextprotocol/sdk/client/streamableHttp.js')]).then(async ([{ Client }, { StreamableHTTPClientTransport }]) => {
      const client = new Client({ name: 'scripted', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers } }));
      return client;
    });
    c.catch(() => toolClients.delete(sessionId));
    toolClients.set(sessionId, c);
  }
  return c;
}

/**
 * identityOf is how a session reaches the service as itself: the API base and bearer token of the MCP server it
 * was given (a shared process holds no session's identity in its environment), else the process environment.
 */
function identityOf(sessionId: string): { url?: string; token?: string } {
  const server = mcpServers.get(sessionId)?.find((m) => 'type' in m && m.type === 'http');
  const bearer = server && 'headers' in server ? server.headers.find((h) => h.name.toLowerCase() === 'authorization')?.value : undefined;
  if (server && 'url' in server && bearer?.startsWith('Bearer ')) return { url: server.url.replace(/\/api\/agent\/mcp$/, ''), token: bearer.slice(7) };
  return { url: process.env.SVC_API_URL, token: process.env.SVC_SESSION_TOKEN };
}

/** forget drops a session from this process: its state, MCP servers and MCP client (a running turn is cancelled). */
function forget(sessionId: string): void {
  const s = sessions.get(sessionId);
  if (s) {
    s.cancelled = true;
    s.cancel?.();
  }
  sessions.delete(sessionId);
  mcpServers.delete(sessionId);
  const c = toolClients.get(sessionId);
  toolClients.delete(sessionId);
  void c?.then((x) => x.close()).catch(() => undefined);
}

/** authenticated refuses a session request, as ACP agents do (-32000), while this agent requires auth and has none. */
function authenticated(): void {
  if (authMethods.length && !auth.method) throw new RpcError(-32000, 'Authentication required');
}

/** PROTOCOL_VERSION is the ACP version this agent speaks (the SDK's constant, without loading the SDK). */
const PROTOCOL_VERSION = 1;
const peer = new JsonRpcPeer(process.stdin, process.stdout);
const notifyUpdate = (n: SessionNotification) => peer.notify('session/update', n);

peer
  .onRequest('initialize', (): InitializeResponse => ({
    protocolVersion: PROTOCOL_VERSION,
    agentCapabilities: { loadSession: canLoad, promptCapabilities: {}, mcpCapabilities: { http: true }, sessionCapabilities: { close: {} } },
    agentInfo: { name: 'scripted', version: '1.0.0' },
    authMethods: authMethods.map((id) => ({ id, name: `scripted ${id}`, description: 'succeeds when SCRIPTED_API_KEY is set' })),
  }))
  .onRequest('authenticate', (params: AuthenticateRequest) => {
    auth.calls++;
    if (!authMethods.includes(params.methodId)) throw new RpcError(-32602, `unknown auth method ${params.methodId}`);
    const key = process.env.SCRIPTED_API_KEY;
    if (!key) throw new RpcError(-32000, 'Authentication required: SCRIPTED_API_KEY is not set');
    if (key.startsWith('rejected-')) throw new RpcError(-32000, `Authentication required: api key ${key} was rejected`);
    auth.method = params.methodId;
    return {};
  })
  .onRequest('session/new', (params: NewSessionRequest) => {
    authenticated();
    const s: SessionState = { id: `scripted-${randomBytes(8).toString('hex')}`, cwd: params.cwd, history: [], cancelled: false };
    sessions.set(s.id, s);
    mcpServers.set(s.id, params.mcpServers);
    save(s);
    return { sessionId: s.id, ...modelStateOf(s) };
  })
  .onRequest('session/load', async (params: LoadSessionRequest) => {
    authenticated();
    const s = canLoad ? (sessions.get(params.sessionId) ?? load(params.sessionId)) : undefined;
    if (!s) throw new RpcError(-32002, `session ${params.sessionId} not found`);
    sessions.set(s.id, s);
    mcpServers.set(s.id, params.mcpServers);
    for (const t of s.history) {
      await notifyUpdate({ sessionId: s.id, update: { sessionUpdate: t.role === 'user' ? 'user_message_chunk' : 'agent_message_chunk', content: { type: 'text', text: t.text } } });
    }
    return modelStateOf(s);
  })
  .onRequest('session/set_config_option', (params: SetSessionConfigOptionRequest) => {
    const s = sessions.get(params.sessionId);
    if (!s) throw new RpcError(-32002, `session ${params.sessionId} not found`);
    if (params.configId !== 'model' || !configOptions(s).length) throw new RpcError(-32602, `unknown config option ${params.configId}`);
    if (!models.some((m) => m.id === params.value)) throw new RpcError(-32602, `unknown model ${String(params.value)}`);
    s.model = String(params.value);
    save(s);
    return { configOptions: configOptions(s) };
  })
  .onRequest('session/prompt', async (params: PromptRequest): Promise<PromptResponse> => {
    const s = sessions.get(params.sessionId);
    if (!s) throw new RpcError(-32002, `session ${params.sessionId} not found`);
    s.cancelled = false;
    const update = (u: SessionUpdate) => notifyUpdate({ sessionId: s.id, update: u });
    const text = params.prompt.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
    let usage: Record<string, unknown> | undefined;
    try {
      for (const line of text.split('\n').map((l) => l.trim()).filter(Boolean)) {
        if (s.cancelled) break;
        s.history.push({ role: 'user', text: line });
        const out = await runLine(line, s, peer, update);
        if (out) usage = out;
      }
    } finally {
      s.cancel = undefined;
      save(s);
    }
    return { stopReason: s.cancelled ? 'cancelled' : 'end_turn', ...(usage ? { _meta: { usage } } : {}) };
  })
  .onRequest('session/close', (params: CloseSessionRequest) => {
    forget(params.sessionId);
    return {};
  })
  .onNotification('session/cancel', (params: CancelNotification) => {
    const s = sessions.get(params.sessionId);
    if (!s) return;
    s.cancelled = true;
    s.cancel?.();
  });

await peer.run();
