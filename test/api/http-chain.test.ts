import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { bodyParser } from '@koa/bodyparser';
import Router from '@koa/router';
import { expect } from 'chai';
import fc from 'fast-check';
import Koa from 'koa';
import pino from 'pino';
import { agentMcpRoutes } from '../../api/agent-mcp.ts';
import { agentRoutes } from '../../api/agents.ts';
import { checkDepth } from '../../api/browser-safety.ts';
import { bundleRoutes } from '../../api/bundles.ts';
import { errorMiddleware } from '../../api/errors.ts';
import { heartbeatRoutes } from '../../api/heartbeat.ts';
import { jsonBody } from '../../api/json-body.ts';
import { mountRouters } from '../../api/mount.ts';
import { resourceRoutes } from '../../api/resources.ts';
import { roleRoutes } from '../../api/roles.ts';
import { sessionRoutes } from '../../api/sessions.ts';
import { skillRoutes } from '../../api/skills.ts';
import { systemRoutes } from '../../api/system.ts';
import { toolRoutes } from '../../api/tools.ts';
import { workspaceRoutes } from '../../api/workspaces.ts';
import { hookRoutes } from '../../api/hooks.ts';
import { notificationRoutes } from '../../api/notifications.ts';
import { automationRoutes } from '../../api/automation.ts';
import { webhookRoutes } from '../../api/webhooks.ts';
import { taskRoutes } from '../../api/tasks.ts';

// The request chain's two shortcuts (api/json-body.ts, api/mount.ts) against what they replace, side by side on
// the same requests: status, headers that matter and body must be the same bytes.

/** fake is a dependency whose every call fails the same way, so a handler that reached it answers alike in both apps. */
const fake: any = new Proxy(function () { /* callable */ }, {
  get: (_t, p) => (p === 'then' ? undefined : fake),
  apply: () => { throw new Error('fake dependency called'); },
});

/** realRouters are the service's routers (api/app.ts), built over fake services: their routes are real. */
function realRouters(): Router[] {
  const routers: Router[] = [];
  routers.push(
    systemRoutes({ metrics: fake, readiness: fake, openapi: () => ({}), queueDepth: fake }),
    resourceRoutes({ service: fake, store: fake, logger: fake, streams: fake }),
    workspaceRoutes({ workspaces: fake, agents: fake, sessions: fake, skills: fake }),
    agentRoutes({ agents: fake, workspaces: fake, service: fake }),
    bundleRoutes({ service: fake, store: fake, workspaces: fake }),
    sessionRoutes({ service: fake, sessions: fake, hub: fake, streams: fake }),
    toolRoutes(fake), agentMcpRoutes(fake), skillRoutes(fake), roleRoutes(fake), heartbeatRoutes(fake),
    hookRoutes({ runs: fake }), notificationRoutes({ presets: fake, notifications: fake }), automationRoutes(fake), webhookRoutes(fake),
    taskRoutes({ tasks: fake, sessionService: fake, sessions: fake, authMode: 'none' }),
  );
  return routers;
}

/** synthetic routers: overlapping prefixes, one path with different methods in two routers, params, regexps. */
function syntheticRouters(): Router[] {
  const a = new Router();
  a.get('a', '/healthz', (ctx) => { ctx.body = 'a'; });
  const b = new Router({ prefix: '/api/things' });
  b.get('b1', '/', (ctx) => { ctx.body = 'b1'; });
  b.put('b2', '/:kind/:id', (ctx) => { ctx.body = `b2 ${ctx.params.kind} ${ctx.params.id}`; });
  const c = new Router({ prefix: '/api/things' });
  c.post('c', '/:kind/:id', (ctx) => { ctx.body = 'c'; });
  // A route that passes the request on, and router middleware: later routers are walked after a match.
  c.get('c-next', '/:kind/:id', async (_ctx, next) => { await next(); });
  c.use(async (ctx, next) => { ctx.set('x-c', 'seen'); await next(); });
  const d = new Router();
  d.get('d', '/api/things/:kind/:id/extra', (ctx) => { ctx.body = 'd'; });
  d.delete('d2', '/api/other/{:opt}', (ctx) => { ctx.body = 'd2'; });
  const e = new Router({ prefix: '/api/thingsmore' });
  e.patch('e', '/x', (ctx) => { ctx.body = 'e'; });
  return [a, b, c, d, e];
}

function app(routers: Router[], mode: 'old' | 'new'): Koa {
  const k = new Koa();
  k.silent = true;
  k.use(async (ctx, next) => {
    await next();
    ctx.set('x-matched', String((ctx as { _matchedRoute?: string })._matchedRoute ?? ''));
  });
  k.use(errorMiddleware(pino({ level: 'silent' })));
  const methods = ['POST', 'PUT', 'PATCH', 'DELETE'];
  const parser = bodyParser({ enableTypes: ['json'], extendTypes: { json: ['application/json', 'application/merge-patch+json'] }, jsonLimit: '1mb', parsedMethods: methods });
  if (mode === 'old') {
    k.use(parser);
    k.use(async (ctx, next) => {
      checkDepth(ctx.request.body);
      return next();
    });
  } else k.use(jsonBody(parser, { methods, limitBytes: 1024 * 1024 }));
  k.use(async (ctx, next) => {
    if (ctx.path === '/echo') {
      ctx.body = { body: ctx.request.body ?? null, raw: (ctx.request as { rawBody?: string }).rawBody ?? null };
      return;
    }
    return next();
  });
  if (mode === 'old') for (const r of routers) k.use(r.routes()).use(r.allowedMethods());
  else k.use(mountRouters(routers));
  return k;
}

async function listen(k: Koa): Promise<{ port: number; close: () => void }> {
  const server = http.createServer(k.callback());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, close: () => server.close() };
}

interface Req { method: string; path: string; headers?: Record<string, string>; body?: Buffer | string }

function send(port: number, r: Req): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: r.method, path: r.path, headers: r.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve(JSON.stringify({
        status: res.statusCode, allow: res.headers.allow, c: res.headers['x-c'], type: res.headers['content-type'], matched: res.headers['x-matched'], body: Buffer.concat(chunks).toString(),
      })));
    });
    req.on('error', reject);
    req.end(r.body);
  });
}

describe('HTTP chain: the JSON body fast path and router mounting answer exactly as the chain they replace', function () {
  this.timeout(120_000);
  const servers: { port: number; close: () => void }[] = [];
  after(() => servers.forEach((s) => s.close()));

  const pair = async (routers: () => Router[]) => {
    const [o, n] = [await listen(app(routers(), 'old')), await listen(app(routers(), 'new'))];
    servers.push(o, n);
    return async (r: Req) => {
      const [a, b] = [await send(o.port, r), await send(n.port, r)];
      expect(b, `${r.method} ${r.path} ${JSON.stringify(r.headers)} ${String(r.body).slice(0, 80)}`).to.equal(a);
      return JSON.parse(a) as { status: number; body: string };
    };
  };

  it('parses and refuses bodies alike (valid, empty, non-object, malformed, too deep, BOM, bad UTF-8, __proto__, over the limit, gzip, chunked)', async () => {
    const same = await pair(syntheticRouters);
    const json = { 'content-type': 'application/json' };
    const bodies: (string | Buffer)[] = [
      '{"a":1,"b":[1,2,{"c":"d"}]}', '[1,2]', '  \n{"x":"y"}', '"str"', '12', 'null', '', ' ', '{"a":', '{"a":1}x', '{"__proto__":{"x":1}}',
      '{"a":{"\\u005f_proto__":{}}}', '{"__proto__x":1}', '{"tool":"svc__read"}', Buffer.from([0xef, 0xbb, 0xbf, ...Buffer.from('{"bom":true}')]),
      Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]), '{"deep":' + '['.repeat(10) + ']'.repeat(10) + '}', '{"deeper":' + '['.repeat(70) + ']'.repeat(70) + '}', `{"big":"${'x'.repeat(1024 * 1024)}"}`,
      '{"unicode":"héllo ✓ \\ud83d\\ude00"}',
    ];
    for (const method of ['PUT', 'POST', 'PATCH', 'DELETE', 'GET']) {
      for (const body of bodies) {
        await same({ method, path: '/echo', headers: json, body });
        await same({ method, path: '/echo', headers: { 'content-type': 'application/json; charset=utf-8' }, body });
      }
      await same({ method, path: '/echo', headers: { 'content-type': 'application/merge-patch+json' }, body: '{"m":1}' });
      await same({ method, path: '/echo', headers: { 'content-type': 'Application/JSON' }, body: '{"m":1}' });
      await same({ method, path: '/echo', headers: { 'content-type': 'text/plain' }, body: '{"m":1}' });
      await same({ method, path: '/echo', headers: { ...json, 'content-encoding': 'gzip' }, body: gzipSync('{"z":1}') });
      await same({ method, path: '/echo', headers: { ...json, 'transfer-encoding': 'chunked' }, body: '{"c":1}' });
      await same({ method, path: '/echo', headers: { ...json, 'content-length': '0' } });
      await same({ method, path: '/echo' });
    }
  });

  it('routes, 404s, 405s (with Allow), OPTIONS and 501s alike over the service routers and tricky synthetic ones', async () => {
    for (const routers of [realRouters, syntheticRouters]) {
      const same = await pair(routers);
      const paths = new Set<string>(['/', '/healthz', '/HEALTHZ', '/healthz/', '/api', '/api/', '/nope', '/api/openapi.json', '/metrics/x']);
      for (const r of routers()) {
        for (const layer of r.stack) {
          const p = String(layer.path);
          const filled = p.replace(/\{[^}]*\}/g, '').replace(/:(\w+)/g, 'v1').replace(/\*\w+/g, 'a/b');
          for (const x of [filled, `${filled}/`, filled.toUpperCase(), `${filled}/more`, filled.replace(/\/[^/]*$/, ''), `${filled}x`]) paths.add(x || '/');
        }
      }
      for (const path of paths) {
        for (const method of ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'PROPFIND']) {
          await same({ method, path, headers: method === 'GET' || method === 'HEAD' || method === 'OPTIONS' || method === 'PROPFIND' ? {} : { 'content-type': 'application/json' }, body: method === 'GET' || method === 'HEAD' || method === 'OPTIONS' || method === 'PROPFIND' ? undefined : '{}' });
        }
      }
    }
  });

  it('holds for random paths and methods', async () => {
    const same = await pair(syntheticRouters);
    const seg = fc.constantFrom('api', 'API', 'things', 'thingsmore', 'other', 'x', 'v', 'extra', 'healthz', '', '%41pi');
    await fc.assert(fc.asyncProperty(fc.array(seg, { minLength: 1, maxLength: 5 }), fc.constantFrom('GET', 'PUT', 'POST', 'DELETE', 'PATCH', 'OPTIONS', 'PROPFIND'), async (segs, method) => {
      await same({ method, path: `/${segs.join('/')}` });
    }), { numRuns: 300 });
  });
});
