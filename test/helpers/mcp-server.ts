/**
 * A real MCP server written for the tests (and the invoke benchmark), on stdio or streamable HTTP:
 *   node --import tsx test/helpers/mcp-server.ts            stdio (logs nothing to stdout)
 *   node --import tsx test/helpers/mcp-server.ts http       HTTP on a free port; prints "PORT <n>" once listening
 * Tools: echo (read-only), big (a result of N bytes), whoami (returns FIXTURE_TOKEN from its env, to test
 * redaction), write_note (mutating), fail (an isError result), slow (sleeps).
 */
import http from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const READ = { readOnlyHint: true, openWorldHint: false };
const TOOLS = [
  { name: 'echo', title: 'Echo', description: 'Echo the text back.', annotations: READ, inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false } },
  { name: 'big', description: 'Return a text of N bytes.', annotations: READ, inputSchema: { type: 'object', properties: { bytes: { type: 'integer', minimum: 0 } }, required: ['bytes'] } },
  { name: 'whoami', description: 'Say which token this server was started with.', annotations: READ, inputSchema: { type: 'object', properties: {} } },
  { name: 'write_note', description: 'Pretend to store a note.', annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: false }, inputSchema: { type: 'object', properties: { note: { type: 'string' } }, required: ['note'] } },
  { name: 'fail', description: 'Always report an error.', annotations: READ, inputSchema: { type: 'object', properties: {} } },
  { name: 'slow', description: 'Sleep for ms milliseconds.', annotations: READ, inputSchema: { type: 'object', properties: { ms: { type: 'integer' } } } },
];

function makeServer(): Server {
  const server = new Server({ name: 'fixture', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    const a = (req.params.arguments ?? {}) as Record<string, any>;
    const text = (t: string) => ({ content: [{ type: 'text' as const, text: t }] });
    switch (req.params.name) {
      case 'echo': return { ...text(a.text), structuredContent: { echoed: a.text } };
      case 'big': return text('x'.repeat(a.bytes));
      case 'whoami': {
        const token = process.env.FIXTURE_TOKEN ?? '';
        return { ...text(`started with token ${token}`), structuredContent: { user: 'fixture', api_token: token } };
      }
      case 'write_note': return text(`stored: ${a.note}`);
      case 'fail': return { ...text('the fixture failed on purpose'), isError: true };
      case 'slow': await new Promise((r) => setTimeout(r, a.ms ?? 0)); return text('slept');
      default: return { ...text(`unknown tool ${req.params.name}`), isError: true };
    }
  });
  return server;
}

if (process.argv[2] === 'http') {
  // NOTE: stateless streamable HTTP: one server and transport per request, as the SDK documents.
  const httpServer = http.createServer(async (req, res) => {
    const server = makeServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => { void transport.close(); void server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  httpServer.listen(0, '127.0.0.1', () => {
    process.stdout.write(`PORT ${(httpServer.address() as { port: number }).port}\n`);
  });
} else {
  await makeServer().connect(new StdioServerTransport());
}
