import Router from '@koa/router';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { SessionFields } from '../store/session-store.ts';
import type { McpProgress } from '../runtime/tools/mcp.ts';
import { ToolError, type ContentBlock } from '../runtime/tools/types.ts';
import type { FeatureDeps } from './types.ts';
import { takesBody } from './body-rule.ts';
import { requires } from './auth.ts';

type McpServerSdk = Awaited<ReturnType<typeof loadServerSdk>>;
/** mcpServerSdk loads the MCP server on first use (it is large; see mcpClientSdk in runtime/tools/mcp.ts). */
let serverSdk: Promise<McpServerSdk> | undefined;
const mcpServerSdk = () => (serverSdk ??= loadServerSdk());
async function loadServerSdk() {
  const [{ Server }, { StreamableHTTPServerTransport }, { CallToolRequestSchema, ListToolsRequestSchema }] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/index.js'), import('@modelcontextprotocol/sdk/server/streamableHttp.js'), import('@modelcontextprotocol/sdk/types.js'),
  ]);
  return { Server, StreamableHTTPServerTransport, CallToolRequestSchema, ListToolsRequestSchema };
}

/**
 * mcpServerFor is the MCP view of the tool registry for one session: the tools that session may see and call,
 * each call going through the same invoke pipeline (schema, hooks, approval, limits, redaction) as
 * `POST /api/tools/{id}/invoke` with the session as context, and as an agent caller: its tools reach only
 * its own workspace and the sessions of its lineage (ToolRuntime.invoke).
 */
function mcpServerFor(sdk: McpServerSdk, deps: FeatureDeps, session: SessionFields): Server {
  const { tools } = deps;
  const { Server, CallToolRequestSchema, ListToolsRequestSchema } = sdk;
  const server = new Server({ name: 'agent-runtime-control-service', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const views = tools.list(await tools.resolve({ session_id: session.id }), true);
    return {
      tools: views.map(({ descriptor: d }) => ({
        name: d.tool_id, title: d.display_title, description: d.description, inputSchema: d.input_schema as { type: 'object' },
        annotations: { readOnlyHint: d.read_only, destructiveHint: d.destructive, openWorldHint: d.open_world },
      })),
    };
  });
  server.setRequestHandler(CallToolRequestSchema, async (req, extra): Promise<CallToolResult> => {
    const meta = (req.params._meta ?? {}) as { approval_token?: unknown; tool_call_id?: unknown; progressToken?: unknown };
    const token = meta.progressToken;
    // NOTE: the agent asked for progress (a progressToken): the backend's notifications go back on this request's
    // stream. A notification that cannot be sent (the agent went away) must not fail the call.
    const onprogress = typeof token === 'string' || typeof token === 'number'
      ? (p: McpProgress) => { void extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, ...p } }).catch(() => undefined); }
      : undefined;
    try {
      const out = await tools.invoke(req.params.name, {
        session_id: session.id, input: req.params.arguments ?? {},
        approval_token: typeof meta.approval_token === 'string' ? meta.approval_token : undefined,
        tool_call_id: typeof meta.tool_call_id === 'string' ? meta.tool_call_id : undefined,
      }, { kind: 'agent', session }, onprogress);
      const content = out.result.content.map(toMcpBlock);
      const structured = out.result.structured;
      return { content, ...(structured && typeof structured === 'object' && !Array.isArray(structured) ? { structuredContent: structured as Record<string, unknown> } : {}), _meta: { truncated: out.truncated, redactions: out.result.redactions } };
    } catch (err) {
      // NOTE: a refused or failed call is a tool error the agent can read and act on, not a protocol error.
      if (!(err instanceof ToolError)) throw err;
      const text = `${err.code}: ${err.message}${err.reasonCodes.length ? ` (${err.reasonCodes.join(', ')})` : ''}`;
      // NOTE: the agent gets the tool's own words: its error result (already redacted and cut to the result budget)
      // or the backend's error message, after the fixed summary line.
      const result = err.details.result as { content?: ContentBlock[] } | undefined;
      const own = result?.content?.map(toMcpBlock) ?? (typeof err.details.message === 'string' ? [{ type: 'text' as const, text: err.details.message }] : []);
      return { content: [{ type: 'text', text }, ...own], isError: true, _meta: { error: { code: err.code, layer: err.layer, reason_codes: err.reasonCodes } } };
    }
  });
  return server;
}

type McpBlock = CallToolResult['content'][number];

/**
 * toMcpBlock gives a result block back its MCP shape (see fromMcpBlock in runtime/tools/runtime.ts): images and
 * audio stay binary, embedded resources and resource links keep their fields, annotations are kept. A block
 * without a payload of the right shape (e.g. a native tool's data) is sent as JSON text.
 */
function toMcpBlock(c: ContentBlock): McpBlock {
  const m = (c.metadata ?? {}) as Record<string, any>;
  if (c.type === 'text' || c.text !== undefined) return { ...m, type: 'text', text: c.text ?? '' } as McpBlock;
  if ((c.type === 'image' || c.type === 'audio') && typeof c.data === 'string') return { ...m, type: c.type, data: c.data, mimeType: c.mime_type || 'application/octet-stream' } as McpBlock;
  if (c.type === 'resource' && c.data && typeof c.data === 'object') return { ...m, type: 'resource', resource: c.data } as McpBlock;
  if (c.type === 'resource_link' && typeof c.data === 'string') return { ...m, type: 'resource_link', uri: c.data, name: typeof m.name === 'string' ? m.name : c.data, ...(c.mime_type ? { mimeType: c.mime_type } : {}) } as McpBlock;
  return { type: 'text', text: JSON.stringify(c.data ?? null) };
}

/** wantsProgress says whether a JSON-RPC body (one message or a batch) holds a request with `_meta.progressToken`. */
function wantsProgress(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some((m) => {
    const token = (m as { params?: { _meta?: { progressToken?: unknown } } } | null)?.params?._meta?.progressToken;
    return typeof token === 'string' || typeof token === 'number';
  });
}

/** agentMcpRoutes serves `/api/agent/mcp`: streamable HTTP (stateless), authenticated by the session token. */
export function agentMcpRoutes(deps: FeatureDeps): Router {
  const router = new Router();
  router.post('MCP endpoint of the calling session\'s tools (session token; streamable HTTP)', '/api/agent/mcp', requires('session'), takesBody, async (ctx) => {
    const session = await deps.sessions.sessionForToken(ctx.get('Authorization'));
    const sdk = await mcpServerSdk();
    const server = mcpServerFor(sdk, deps, session);
    // NOTE: a plain JSON answer cannot carry notifications; a tools/call that asks for progress is answered as an
    // SSE stream (its progress, then the result), which every streamable HTTP client accepts.
    const transport = new sdk.StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: !wantsProgress(ctx.request.body) });
    ctx.respond = false;
    ctx.res.on('close', () => { void transport.close(); void server.close(); });
    await server.connect(transport);
    await transport.handleRequest(ctx.req, ctx.res, ctx.request.body);
  });
  return router;
}
