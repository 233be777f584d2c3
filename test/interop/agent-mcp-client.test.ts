import { expect } from 'chai';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';
import { everythingStdio } from './everything.ts';
import { SCRIPTED_COMMAND, sessionToken } from '../helpers/agents.ts';

const FIXTURE = path.resolve('test/helpers/mcp-server.ts');

describe('The MCP SDK client against /api/agent/mcp (real Redis, server-everything and the fixture behind it)', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  let service: Service;
  let api: Client;
  let mcp: McpClient;
  let token: string;

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
    // NOTE: an agent of its own process (not the pooled built-in one) holds its session token in its environment.
    await api.post('/api/agents', { scope: 'global', agent: { name: 'solo', prompt: 'p', provider: 'local', command: SCRIPTED_COMMAND } });
    const session = (await api.post('/api/sessions', { workspace: ws.id, agent_name: 'solo' })).body.session;
    token = await eventually(async () => sessionToken(session.id));
    mcp = new McpClient({ name: 'interop-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${service.url}/api/agent/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    await eventually(async () => {
      const names = (await mcp.listTools()).tools.map((t) => t.name);
      expect(names).to.include.members(['mcp__everything__get_tiny_image', 'mcp__everything__trigger_long_running_operation', 'mcp__fixture__fail']);
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

  it('a client that passes onprogress receives the backend\'s progress notifications before the result', async () => {
    const seen: { progress: number; total?: number }[] = [];
    const res = await mcp.callTool({ name: 'mcp__everything__trigger_long_running_operation', arguments: { duration: 0.6, steps: 3 } }, undefined, {
      onprogress: (p) => { seen.push({ progress: p.progress, total: p.total }); },
    });
    expect(res.isError ?? false).to.equal(false);
    expect((res.content as any[])[0].text).to.match(/Long running operation completed/);
    expect(seen).to.deep.equal([{ progress: 1, total: 3 }, { progress: 2, total: 3 }, { progress: 3, total: 3 }]);
  });

  it('a call is answered as an SSE stream only when it carries a progressToken, otherwise as plain JSON', async () => {
    const call = (meta: object) => fetch(`${service.url}/api/agent/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'mcp__everything__trigger_long_running_operation', arguments: { duration: 0.2, steps: 2 }, _meta: meta } }),
    });
    const plain = await call({});
    expect(plain.headers.get('content-type')).to.match(/^application\/json/);
    expect(JSON.stringify(await plain.json())).to.include('Long running operation completed').and.not.include('notifications/progress');
    const streamed = await call({ progressToken: 'p-1' });
    expect(streamed.headers.get('content-type')).to.match(/^text\/event-stream/);
    const body = await streamed.text();
    expect(body.match(/"method":"notifications\/progress"/g)).to.have.length(2);
    expect(body).to.include('"progressToken":"p-1"').and.include('Long running operation completed');
    expect(body.lastIndexOf('notifications/progress')).to.be.below(body.indexOf('Long running operation completed'));
  });

  it('an invocation records each progress notification as a tool.call_progress event between started and completed', async () => {
    const ws = (await api.post('/api/workspaces', { root_dir: mkdtempSync(path.join(os.tmpdir(), 'svc-agent-mcp-progress-')) })).body.workspace;
    const res = await api.post('/api/tools/mcp__everything__trigger_long_running_operation/invoke', { workspace_id: ws.id, input: { duration: 0.4, steps: 2 } });
    expect(res.status, JSON.stringify(res.body).slice(0, 300)).to.equal(200);
    expect(res.body.events.map((e: any) => e.kind)).to.deep.equal(['tool.call_started', 'tool.call_progress', 'tool.call_progress', 'tool.call_completed']);
    expect(res.body.events.filter((e: any) => e.kind === 'tool.call_progress').map((e: any) => [e.progress, e.progress_total])).to.deep.equal([[1, 2], [2, 2]]);
    expect(res.body.events[0]).to.not.have.property('progress');
  });

  it('a failing tool\'s own error message reaches the agent', async () => {
    const res = await mcp.callTool({ name: 'mcp__fixture__fail', arguments: {} });
    expect(res.isError).to.equal(true);
    const texts = (res.content as any[]).map((c) => c.text);
    expect(texts[0]).to.match(/^tool_backend_failed/);
    expect(texts).to.include('the fixture failed on purpose');
  });
});
