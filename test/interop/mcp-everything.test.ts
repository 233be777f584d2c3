import { expect } from 'chai';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';
import { EverythingHttp, everythingStdio } from './everything.ts';

describe('MCP tools of @modelcontextprotocol/server-everything (stdio, streamable HTTP and SSE, real Redis)', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  const http = new EverythingHttp();
  const sse = new EverythingHttp('sse');
  let service: Service;
  let api: Client;

  before(async () => {
    await redis.start();
    await http.start();
    await sse.start();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-everything-'));
    writeFileSync(path.join(dataDir, 'config.yaml'), 'tools:\n  trusted_sources: [everything, remote, legacy]\n  permission_mode: approve-all\n');
    service = await startService(redis.url, { DATA_DIR: dataDir });
    api = new Client(service.url);
    for (const [id, spec] of [['everything', everythingStdio('everything')], ['remote', { name: 'remote', transport: 'http', url: http.url }], ['legacy', { name: 'legacy', transport: 'sse', url: sse.url }]] as const) {
      const res = await api.put(`/api/resources/mcp_server/${id}?wait=true`, { scope: { kind: 'global' }, spec, expected_version: 0 });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
    }
  });
  after(async () => {
    await service?.stop();
    await http.stop();
    await sse.stop();
    await redis.stop();
  });

  const view = (id: string) => eventually(async () => {
    const res = await api.get(`/api/tools/${id}`);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body.tool;
  });
  const invoke = (id: string, input: unknown) => api.post(`/api/tools/${id}/invoke`, { input });

  it('calls echo over stdio and over streamable HTTP', async () => {
    for (const server of ['everything', 'remote']) {
      expect((await view(`mcp__${server}__echo`)).decision.callable).to.equal(true);
      const res = await invoke(`mcp__${server}__echo`, { message: `hi ${server}` });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.result.content).to.deep.equal([{ type: 'text', text: `Echo: hi ${server}` }]);
    }
  });

  it('lists the SSE server\'s tools and calls echo over the SSE transport', async () => {
    const echo = await view('mcp__legacy__echo');
    expect(echo.decision.callable).to.equal(true);
    const listed = await api.get('/api/tools');
    expect(listed.status, JSON.stringify(listed.body)).to.equal(200);
    const legacy = (listed.body.tools as any[]).filter((t) => t.descriptor.tool_id.startsWith('mcp__legacy__')).map((t) => t.descriptor.tool_id);
    expect(legacy).to.include.members(['mcp__legacy__echo', 'mcp__legacy__get_sum']);
    const res = await invoke('mcp__legacy__echo', { message: 'hi over sse' });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.result.content).to.deep.equal([{ type: 'text', text: 'Echo: hi over sse' }]);
    expect(res.body.status).to.equal('completed');
  });

  it('lists a tool that requires task-based execution with an availability reason, not as callable', async () => {
    const tool = await view('mcp__everything__simulate_research_query');
    expect(tool.decision.callable).to.equal(false);
    expect(tool.availability.reason_codes).to.deep.equal(['backend_not_executable']);
    const res = await invoke('mcp__everything__simulate_research_query', { topic: 'x' });
    expect(res.status).to.equal(422);
    expect(res.body.error.code).to.equal('tool_unavailable');
  });

  it('a streamable HTTP server killed and restarted in the middle: the next call re-initializes and succeeds', async () => {
    expect((await invoke('mcp__remote__echo', { message: 'before' })).status).to.equal(200);
    await http.stop();
    await http.start();
    const res = await invoke('mcp__remote__echo', { message: 'after restart' });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.result.content[0].text).to.equal('Echo: after restart');
  });

  it('while the HTTP server is down its tools are unavailable (mcp_unreachable); they come back when it does', async () => {
    await http.stop();
    const failed = await invoke('mcp__remote__echo', { message: 'down' });
    expect(failed.status).to.equal(502);
    const down = await view('mcp__remote__echo');
    expect(down.decision.callable).to.equal(false);
    expect(down.availability.reason_codes).to.deep.equal(['mcp_unreachable']);
    await http.start();
    await eventually(async () => expect((await view('mcp__remote__echo')).decision.callable).to.equal(true), 30_000, 200);
    expect((await invoke('mcp__remote__echo', { message: 'back' })).status).to.equal(200);
  });
});
