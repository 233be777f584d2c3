import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { sha256 } from '../../runtime/process/auth.ts';
import { compiledArgv, ServiceProcess } from '../helpers/process.ts';
import { RedisServer } from '../helpers/redis-server.ts';

const ROLES = ['reader', 'operator', 'admin'] as const;
const TOKENS = { reader: 'reader-token-0001', operator: 'operator-token-0001', admin: 'admin-token-0001' };

/** raw sends the path exactly as given (fetch would resolve dot segments), with an optional bearer token and `{}`. */
function raw(base: string, method: string, p: string, token?: string): Promise<{ status: number; code?: string }> {
  const url = new URL(base);
  const body = method === 'GET' || method === 'HEAD' ? undefined : '{}';
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: url.hostname, port: url.port, method, path: p,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json', 'content-length': '2' } : {}) },
    }, (res) => {
      // NOTE: a stream (watch, events) answers its status at once and stays open: its status is enough.
      if (String(res.headers['content-type']).startsWith('text/event-stream')) {
        req.destroy();
        return resolve({ status: res.statusCode! });
      }
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => {
        let code: string | undefined;
        try { code = JSON.parse(text)?.diagnostic?.code; } catch { /* not JSON */ }
        resolve({ status: res.statusCode!, code });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** spellings are the ways one path may be written that a router still matches, or that a path rule might miss. */
function spellings(p: string): string[] {
  const [, first, ...rest] = p.split('/');
  const encodeOne = (s: string) => s.replace(/[a-z]/, (c) => `%${c.charCodeAt(0).toString(16)}`);
  const out = new Set([
    p,
    p.toUpperCase(),
    `/${first.toUpperCase()}/${rest.join('/')}`,
    `/${first}/${rest.map((s, i) => (i === 0 ? s.charAt(0).toUpperCase() + s.slice(1) : s)).join('/')}`,
    `/${first}/${rest.map((s, i) => (i === 0 ? encodeOne(s) : s)).join('/')}`,
    `${p}/`,
    p.replace(/^\/([^/]+)\//, '//$1//'),
    `/${first}/./${rest.join('/')}`,
    `/${first}/x/../${rest.join('/')}`,
  ]);
  return [...out].filter((s) => s !== '/');
}

describe('Route roles: each route is guarded by its own role, whatever the spelling of its path (compiled service)', function () {
  this.timeout(300_000);
  const redis = new RedisServer();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-route-roles-'));
  let svc: ServiceProcess;
  let routes: { method: string; path: string; access: string }[] = [];

  before(async () => {
    await redis.start();
    const file = path.join(dir, 'tokens.yaml');
    writeFileSync(file, `tokens:\n${ROLES.map((r) => `  - {name: ${r}-caller, role: ${r}, sha256: ${sha256(TOKENS[r])}}`).join('\n')}\n`);
    svc = await new ServiceProcess({ ...redis.env, AUTH_MODE: 'token', AUTH_TOKENS_FILE: file, DATA_DIR: path.join(dir, 'data'), WORKSPACE_ROOTS: dir }, compiledArgv()).start();
    const doc = await (await fetch(`${svc.url}/api/openapi.json`, { headers: { authorization: `Bearer ${TOKENS.reader}` } })).json() as { paths: Record<string, Record<string, { 'x-required-role': string }>> };
    for (const [p, methods] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(methods)) routes.push({ method: method.toUpperCase(), path: p.replace(/\{[^}]+\}/g, 'probe-x'), access: op['x-required-role'] });
    }
  });
  after(async () => {
    await svc?.kill('SIGKILL');
    await redis.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it('documents a role for every route, and the routes that need more than their method\'s default', () => {
    expect(routes.length).to.be.greaterThan(150);
    for (const r of routes) expect(['public', 'session', 'signature', ...ROLES], `${r.method} ${r.path}`).to.include(r.access);
    const admin = routes.filter((r) => r.access === 'admin').map((r) => `${r.method} ${r.path}`);
    expect(admin).to.include.members(['PUT /api/vault/secrets', 'DELETE /api/vault/secrets', 'POST /api/vault/rotate', 'GET /api/support/bundles/probe-x/download', 'POST /api/skills/marketplace/install', 'POST /api/extensions']);
    expect(routes.find((r) => r.method === 'GET' && r.path === '/api/vault/secrets')?.access).to.equal('operator');
    expect(routes.filter((r) => r.access === 'public').map((r) => r.path).sort()).to.deep.equal(['/healthz', '/metrics', '/readyz']);
  });

  it('refuses every caller below a route\'s role on every spelling, and changes nothing', async () => {
    const before = await state(svc.url);
    const leaks: string[] = [];
    for (const r of routes.filter((x) => (ROLES as readonly string[]).includes(x.access))) {
      const need = ROLES.indexOf(r.access as typeof ROLES[number]);
      const callers: (string | undefined)[] = [undefined, ...ROLES.slice(0, need).map((x) => TOKENS[x])];
      for (const spelling of spellings(r.path)) {
        for (const token of callers) {
          const res = await raw(svc.url, r.method, spelling, token);
          // NOTE: a spelling no route matches is 404 route_not_found (or 405): the request reached no handler.
          const refused = res.status === 401 || res.status === 403 || res.code === 'route_not_found' || res.status === 405;
          if (!refused) leaks.push(`${r.method} ${spelling} as ${token ?? 'nobody'}: ${res.status} ${res.code ?? ''}`);
          if (token === undefined) expect(res.status, `${r.method} ${spelling}`).to.not.equal(403);
        }
      }
    }
    expect(leaks, leaks.slice(0, 40).join('\n')).to.deep.equal([]);
    expect(await state(svc.url)).to.deep.equal(before);
  });

  it('lets a caller with the route\'s role reach the route (no 401, no 403)', async () => {
    for (const r of routes.filter((x) => (ROLES as readonly string[]).includes(x.access) && (x.method === 'GET' || x.access === 'admin'))) {
      const res = await raw(svc.url, r.method, r.path, TOKENS[r.access as typeof ROLES[number]]);
      expect([401, 403], `${r.method} ${r.path}: ${res.code}`).to.not.include(res.status);
      expect(res.code, `${r.method} ${r.path}`).to.not.equal('route_not_found');
    }
  });

  it('agent and webhook routes take no user token as their credential', async () => {
    for (const r of routes.filter((x) => x.access === 'session' || x.access === 'signature')) {
      for (const token of Object.values(TOKENS)) {
        const res = await raw(svc.url, r.method, r.path, token);
        expect(res.status, `${r.method} ${r.path}`).to.be.oneOf([400, 401, 403, 404]);
      }
    }
  });
});

/** state is what a refused write could have changed: the records' revision, the vault's secrets, the workspaces. */
async function state(base: string) {
  const get = async (p: string) => (await fetch(base + p, { headers: { authorization: `Bearer ${TOKENS.admin}` } })).json();
  const resources = await get('/api/resources') as { revision?: unknown; items?: unknown[] };
  return {
    resources: resources.items?.length ?? resources,
    vault: await get('/api/vault/secrets'),
    workspaces: await get('/api/workspaces'),
    scheduler: await get('/api/scheduler'),
  };
}
