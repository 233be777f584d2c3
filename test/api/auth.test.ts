import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { sha256 } from '../../runtime/process/auth.ts';
import { ConfigError, loadConfig } from '../../runtime/process/config.ts';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, startService } from '../helpers/service.ts';

const agent = { scope: { kind: 'global' }, spec: { name: 'a', prompt: 'p' }, expected_version: 0 };

describe('Authentication and authorization', () => {
  const redis = new RedisServer();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-auth-'));
  let service: Service | undefined;
  const as = (token?: string) => (method: string, p: string, body?: unknown) =>
    new Client(service!.url).call(method, p, body, token ? { authorization: `Bearer ${token}` } : {});

  before(async () => { await redis.start(); });
  after(async () => { await redis.destroy(); rmSync(dir, { recursive: true, force: true }); });
  afterEach(async () => { await service?.stop(); service = undefined; await redis.flush(); });

  it('refuses AUTH_MODE=none on a non-loopback HOST, saying why', () => {
    expect(() => loadConfig({ HOST: '0.0.0.0' })).to.throw(ConfigError, /AUTH_MODE=none is allowed only on a loopback HOST/);
    expect(() => loadConfig({ HOST: '0.0.0.0', AUTH_MODE: 'token' })).to.throw(ConfigError, /AUTH_TOKENS_FILE/);
    expect(loadConfig({ HOST: '127.0.0.1' }).auth.mode).to.equal('none');
  });

  it('token mode: 401 without or with a bad token, reader may only read, operator may write', async () => {
    const file = path.join(dir, 'tokens.yaml');
    writeFileSync(file, `tokens:\n  - {name: dashboards, role: reader, sha256: ${sha256('r-secret')}}\n  - {name: gitops, role: operator, sha256: ${sha256('o-secret')}}\n`);
    service = await startService(redis.url, { AUTH_MODE: 'token', AUTH_TOKENS_FILE: file });
    const anon = await as()('GET', '/api/resources');
    expect(anon.status).to.equal(401);
    expect(anon.body.diagnostic.code).to.equal('unauthenticated');
    expect(anon.headers.get('www-authenticate')).to.equal('Bearer');
    expect((await as('nope')('GET', '/api/resources')).status).to.equal(401);
    expect((await as('r-secret')('GET', '/api/resources')).status).to.equal(200);
    const denied = await as('r-secret')('PUT', '/api/resources/agent/a1', agent);
    expect(denied.status).to.equal(403);
    expect(denied.body.diagnostic.evidence.required_role).to.equal('operator');
    expect(JSON.stringify(denied.body)).to.not.include('r-secret');
    expect((await as('r-secret')('GET', '/api/resources/agent/a1')).status).to.equal(404);
    expect((await as('o-secret')('PUT', '/api/resources/agent/a1', agent)).status).to.equal(201);
    expect((await as()('GET', '/healthz')).status).to.equal(200);
    const metrics = (await as()('GET', '/metrics')).body as string;
    expect(metrics).to.not.include('secret');
    // Agent-facing routes take the per-session token, not an operator token.
    expect((await as('o-secret')('POST', '/api/agent/spawn', {})).status).to.equal(401);
  });

  it('kubernetes mode: TokenReview decides, groups map to roles, results are cached', async () => {
    let reviews = 0;
    const apiServer = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => {
        reviews++;
        const token = JSON.parse(body).spec.token as string;
        const users: Record<string, { username: string; groups: string[] }> = {
          'k-admin': { username: 'alice', groups: ['platform-admins', 'system:authenticated'] },
          'k-dev': { username: 'bob', groups: ['devs'] },
          'k-nobody': { username: 'carol', groups: ['system:authenticated'] },
        };
        const user = users[token];
        res.writeHead(201, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', status: user ? { authenticated: true, user } : { authenticated: false } }));
      });
    });
    await new Promise<void>((r) => apiServer.listen(0, '127.0.0.1', () => r()));
    try {
      const url = `http://127.0.0.1:${(apiServer.address() as AddressInfo).port}`;
      service = await startService(redis.url, { AUTH_MODE: 'kubernetes', AUTH_K8S_API_URL: url, AUTH_K8S_GROUP_ROLES: 'platform-admins=admin,devs=reader' });
      expect((await as('k-admin')('PUT', '/api/resources/agent/a1', agent)).status).to.equal(201);
      expect((await as('k-dev')('GET', '/api/resources/agent/a1')).status).to.equal(200);
      expect((await as('k-dev')('DELETE', '/api/resources/agent/a1', { expected_version: 1 })).status).to.equal(403);
      expect((await as('k-nobody')('GET', '/api/resources')).status).to.equal(403);
      expect((await as('k-stranger')('GET', '/api/resources')).status).to.equal(401);
      const before = reviews;
      await as('k-dev')('GET', '/api/resources');
      expect(reviews).to.equal(before);
      expect((await as('k-dev')('GET', '/api/resources/agent/a1')).status).to.equal(200);
    } finally {
      apiServer.close();
    }
  });
});
