import { expect } from 'chai';
import { existsSync, readdirSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { eventually } from '../helpers/service.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import type { RedisServer } from '../helpers/redis-server.ts';

/** raw sends one request with exactly the given headers (fetch may not set Host). */
function raw(url: string, method: string, p: string, headers: Record<string, string>, body?: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url + p, { method, headers: { ...headers, ...(body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) }) } }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => {
        let parsed: unknown = text;
        try { parsed = text ? JSON.parse(text) : undefined; } catch { /* not JSON */ }
        resolve({ status: res.statusCode!, headers: res.headers, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('Security: a web page cannot drive the API (content type, Origin, Host), and bad input never 500s', function () {
  this.timeout(60_000);
  const f = new ServiceFixture({ env: { ALLOWED_ORIGINS: 'https://console.example' }, workspace: false }).install();

  it('refuses the cross-site attack of text/plain and form bodies with 415 and runs nothing, writes nothing', async () => {
    const marker = path.join(f.root, 'pwned');
    const steps: [string, unknown][] = [
      ['/api/workspaces', { root_dir: f.root }],
      ['/api/agents', { scope: 'global', agent: { name: 'evil', prompt: 'p', command: `touch ${marker}` } }],
      ['/api/sessions', { workspace: f.root, agent_name: 'evil' }],
    ];
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      for (const [p, body] of steps) {
        const res = await raw(f.service.url, 'POST', p, { 'content-type': type, origin: f.service.url }, JSON.stringify(body));
        expect(res.status, `${type} ${p}`).to.equal(415);
        expect(res.body.diagnostic.code).to.equal('unsupported_media_type');
      }
    }
    const noType = await raw(f.service.url, 'POST', '/api/workspaces', {}, JSON.stringify({ root_dir: f.root }));
    expect(noType.status).to.equal(415);
    expect((await f.api.get('/api/workspaces')).body.workspaces).to.deep.equal([]);
    expect((await f.api.get('/api/resources')).body.records).to.deep.equal([]);
    expect(existsSync(marker)).to.equal(false);
    expect(readdirSync(f.root)).to.deep.equal([]);
  });

  it('refuses a foreign Origin with 403 before any handler, on every family and on /api/agent/mcp', async () => {
    const evil = { origin: 'https://evil.example', 'content-type': 'application/json' };
    const cases: [string, string, unknown?][] = [
      ['POST', '/api/workspaces', { root_dir: f.root }],
      ['PUT', '/api/resources/agent/a1', { scope: { kind: 'global' }, spec: { name: 'a', prompt: 'p' } }],
      ['GET', '/api/resources'],
      ['POST', '/api/agent/mcp', { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }],
      ['OPTIONS', '/api/workspaces'],
    ];
    for (const [method, p, body] of cases) {
      const res = await raw(f.service.url, method, p, { ...evil, 'access-control-request-method': 'POST' }, body === undefined ? undefined : JSON.stringify(body));
      expect(res.status, `${method} ${p}`).to.equal(403);
      expect(res.body.diagnostic.code).to.equal('origin_not_allowed');
      expect(res.headers['access-control-allow-origin']).to.equal(undefined);
    }
    expect((await raw(f.service.url, 'GET', '/api/resources', { origin: 'null' })).status).to.equal(403);
    expect((await f.api.get('/api/workspaces')).body.workspaces).to.deep.equal([]);
    expect((await f.api.get('/api/resources')).body.records).to.deep.equal([]);
  });

  it('serves an allowed origin and the service\'s own, and answers their preflights', async () => {
    const pre = await raw(f.service.url, 'OPTIONS', '/api/workspaces', { origin: 'https://console.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' });
    expect(pre.status).to.equal(204);
    expect(pre.headers['access-control-allow-origin']).to.equal('https://console.example');
    expect(pre.headers['access-control-allow-headers']).to.match(/Content-Type/);
    const made = await raw(f.service.url, 'POST', '/api/workspaces', { origin: 'https://console.example', 'content-type': 'application/json' }, JSON.stringify({ root_dir: f.root }));
    expect(made.status).to.equal(201);
    expect(made.headers['access-control-allow-origin']).to.equal('https://console.example');
    const own = await raw(f.service.url, 'GET', '/api/workspaces', { origin: f.service.url });
    expect(own.status).to.equal(200);
    expect(own.body.workspaces).to.have.length(1);
  });

  it('with AUTH_MODE=none refuses a foreign Host (DNS rebinding) and serves loopback names', async () => {
    const port = new URL(f.service.url).port;
    for (const host of ['evil.example', `evil.example:${port}`, `192.168.1.5:${port}`]) {
      const res = await raw(f.service.url, 'POST', '/api/workspaces', { host, 'content-type': 'application/json' }, JSON.stringify({ root_dir: f.root }));
      expect(res.status, host).to.equal(403);
      expect(res.body.diagnostic.code).to.equal('host_not_allowed');
    }
    expect((await raw(f.service.url, 'GET', '/api/agent/mcp', { host: 'evil.example' })).status).to.equal(403);
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, 'localhost']) {
      expect((await raw(f.service.url, 'GET', '/api/workspaces', { host })).status, host).to.equal(200);
    }
    expect((await f.api.get('/api/workspaces')).body.workspaces).to.deep.equal([]);
  });

  it('answers 401 with WWW-Authenticate: Bearer on /api/agent/mcp without a session token', async () => {
    const res = await raw(f.service.url, 'POST', '/api/agent/mcp', { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
    expect(res.status).to.equal(401);
    expect(res.headers['www-authenticate']).to.equal('Bearer');
  });

  it('refuses 10,000-deep JSON with 422 on every route that takes a body, never 500, and stores nothing', async () => {
    const deep = '['.repeat(10_000) + ']'.repeat(10_000);
    const ws = (await f.api.post('/api/workspaces', { root_dir: f.root })).body.workspace;
    const bodies: [string, string, string][] = [
      ['PUT', '/api/resources/agent/deep', `{"scope":{"kind":"global"},"expected_version":0,"spec":{"name":"d","prompt":"p","tools":${deep}}}`],
      ['POST', '/api/tools/svc__workspace_list_files/invoke', `{"workspace_id":"${ws.id}","input":{"path":${deep}}}`],
      ['POST', '/api/agents', `{"scope":"global","agent":{"name":"d","prompt":"p","x":${deep}}}`],
      ['PATCH', `/api/workspaces/${ws.id}`, `{"name":${deep}}`],
      ['POST', '/api/sessions', `{"workspace":"${ws.id}","x":${deep}}`],
      ['POST', '/api/agent/mcp', `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":${deep}}`],
    ];
    for (const [method, p, body] of bodies) {
      const res = await f.api.call(method, p, body);
      expect(res.status, `${method} ${p}`).to.equal(422);
      expect(res.body.diagnostic.code).to.equal('body_too_deep');
    }
    // 64 levels are fine.
    const ok = await f.api.put('/api/resources/agent/shallow', { scope: { kind: 'global' }, expected_version: 0, spec: { name: 's', prompt: 'p', metadata: JSON.parse('['.repeat(50) + ']'.repeat(50)) } });
    expect(ok.status).to.not.equal(500);
    expect((await f.api.get('/api/resources/agent/deep')).status).to.equal(404);
    expect((await f.api.get('/api/agents')).body.agents.map((a: any) => a.name)).to.not.include('d');
  });

  it('answers 503 with Retry-After while Redis is down, never 500, and recovers without a restart', async () => {
    const put = (id: string) => f.api.put(`/api/resources/agent/${id}`, { scope: { kind: 'global' }, expected_version: 0, spec: { name: id, prompt: 'p' } });
    expect((await put('before')).status).to.equal(201);
    await (f.redis as RedisServer).stop('SIGKILL');
    const down = await Promise.all([put('during'), f.api.get('/api/resources'), f.api.post('/api/workspaces', { root_dir: f.root })]);
    for (const res of down) {
      expect(res.status).to.equal(503);
      expect(res.headers.get('retry-after')).to.equal('1');
      expect(res.body.diagnostic).to.include({ code: 'dependency_unavailable', category: 'dependency' });
      expect(res.body.diagnostic.evidence.dependency).to.equal('redis');
    }
    expect((await f.api.get('/readyz')).status).to.equal(503);
    await (f.redis as RedisServer).start();
    await eventually(async () => expect((await f.api.get('/readyz')).status).to.equal(200));
    expect((await put('after')).status).to.equal(201);
    const ids = (await f.api.get('/api/resources/agent')).body.records.map((r: any) => r.id);
    expect(ids).to.include.members(['before', 'after']);
    expect(ids).to.not.include('during');
  });
});
