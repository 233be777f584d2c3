import { expect } from 'chai';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';
import { everythingStdio } from './everything.ts';

const FIXTURE = path.resolve('test/helpers/mcp-server.ts');

/** sessionToken reads a live session's token from its agent process's environment (the agent's own credential). */
function sessionToken(sessionId: string): string {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const env = readFileSync(`/proc/${pid}/environ`, 'utf8');
      if (env.includes(`SVC_SESSION_ID=${sessionId}\0`)) return /SVC_SESSION_TOKEN=([^\0]+)/.exec(env)![1];
    } catch { /* gone or not ours */ }
  }
  throw new Error(`no agent process for session ${sessionId}`);
}

describe('The MCP SDK client against /api/agent/mcp (real Redis, server-everything and the fixture behind it)', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  let service: Service;
  let api: Client;
  let mcp: McpClient;

  before(async () => {
    await redis.start();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-agent-mcp-'));
    writeFileSync(path.join(dataDir, 'config.yaml'), 'tools:\n  trusted_sources: [everything, fixture]\n  permission_mode: approve-all\n');
    service = await startService(redis.url, { DATA_DIR: dataDir });
    api = new Client(service.url);
    for (const [id, spec] of [['everything', everythingStdio('everything')], ['fixture', { name: 'fixture', command: process.execPath, args: ['--import', 'tsx', FIXTURE] }]] as const) {
      expect((await api.put(`/api/resources/mcp_server/${id}?wait=true`, { scope: { kind: 'global' }, spec, expected_version: 0 })).status).to.equal(201);
    }
    const ws = (await api.post('/api/workspaces', { root_dir: mkdtempSync(path.join(os.tmpdir(), 'svc-agent-mcp-ws-')) })).body.workspace;
    const session = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
    const token = await eventually(async () => sessionToken(session.id));
    mcp = new McpClient({ name: 'interop-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${service.url}/api/agent/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    await eventually(async () => {
      const names = (await mcp.listTools()).tools.map((t) => t.name);
      expect(names).to.include.members(['mcp__everything__get_tiny_image', 'mcp__fixture__fail']);
    });
  });
  after(async () => {
    await mcp?.close();
    await service?.stop();
    await redis.stop();
  });

  it('an image block arrives as an image (base64 data and mime type), not as JSON-quoted text', async () => {
    const res = await mcp.callTool({ name: 'mcp__everything__get_tiny_image', arguments: {} });
    const image = (res.content as any[]).find((c) => c.type === 'image');
    expect(image, JSON.stringify(res.content).slice(0, 300)).to.include({ mimeType: 'image/png' });
    expect(Buffer.from(image.data, 'base64').subarray(1, 4).toString()).to.equal('PNG');
    expect((res.content as any[]).every((c) => c.type !== 'text' || !c.text.startsWith('"'))).to.equal(true);
  });

  it('resource links keep their name and description', async () => {
    const res = await mcp.callTool({ name: 'mcp__everything__get_resource_links', arguments: { count: 2 } });
    const links = (res.content as any[]).filter((c) => c.type === 'resource_link');
    expect(links).to.have.length(2);
    for (const l of links) expect(l).to.include.keys('uri', 'name', 'description');
  });

  it('a failing tool\'s own error message reaches the agent', async () => {
    const res = await mcp.callTool({ name: 'mcp__fixture__fail', arguments: {} });
    expect(res.isError).to.equal(true);
    const texts = (res.content as any[]).map((c) => c.text);
    expect(texts[0]).to.match(/^tool_backend_failed/);
    expect(texts).to.include('the fixture failed on purpose');
  });
});
