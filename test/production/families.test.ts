import { expect } from 'chai';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { compiledArgv, ServiceProcess } from '../helpers/process.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually } from '../helpers/service.ts';

/**
 * A tour of the families the README's examples do not walk, on what production runs (node dist/runtime/main.js as
 * make run starts it): one real call per route group, so a file the build does not copy (the console, the bundled
 * skills, the Lua scripts, the built-in agent), a path computed from the source tree, or a loader only the sources
 * had fails here.
 */
describe('Production build: a tour of every family the README does not walk (compiled service)', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  const root = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'svc-prod-')));
  let svc: ServiceProcess;
  let api: Client;
  before(async () => {
    await redis.start();
    svc = await new ServiceProcess({ ...redis.env, DATA_DIR: path.join(root, 'data') }, compiledArgv()).start();
    api = new Client(svc.url);
  });
  after(async () => {
    await svc?.kill('SIGKILL');
    await redis.destroy();
    rmSync(root, { recursive: true, force: true });
  });

  it('serves the console, its assets, the OpenAPI document and the metrics', async () => {
    const page = await fetch(`${svc.url}/workspaces`);
    expect(page.status).to.equal(200);
    const html = await page.text();
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script, html.slice(0, 300)).to.be.a('string');
    expect((await fetch(svc.url + script)).status).to.equal(200);
    expect(Object.keys((await api.get('/api/openapi.json')).body.paths).length).to.be.greaterThan(150);
    expect((await api.get('/metrics')).body).to.include('svc_http_requests_total');
    expect((await api.get('/.well-known/oauth-protected-resource')).body.diagnostic.code).to.equal('route_not_found');
  });

  it('workspaces: create, read, update, delete', async () => {
    const dir = path.join(root, 'ws');
    const made = await api.post('/api/workspaces', { root_dir: root });
    expect(made.status, JSON.stringify(made.body)).to.equal(201);
    const id = made.body.workspace.id;
    expect((await api.get(`/api/workspaces/${id}`)).status).to.equal(200);
    expect((await api.post('/api/workspaces/resolve', { path: dir })).body.workspace.id).to.equal(id);
    expect((await api.patch(`/api/workspaces/${id}`, { name: 'tour' })).body.workspace.name).to.equal('tour');
    expect((await api.delete(`/api/workspaces/${id}`)).status).to.be.oneOf([200, 204]);
    expect((await api.get(`/api/workspaces/${id}`)).status).to.equal(404);
  });

  it('agents, roles, tools and toolsets: the built-in agent and the native tools are there, a tool search ranks', async () => {
    expect((await api.get('/api/agents')).body.agents.map((a: { name: string }) => a.name)).to.include('scripted');
    expect((await api.get('/api/roles')).status).to.equal(200);
    const tools = (await api.get('/api/tools')).body.tools as { descriptor: { tool_id: string } }[];
    expect(tools.map((t) => t.descriptor.tool_id)).to.include('svc__workspace_read_file');
    expect((await api.post('/api/tools/search', { query: 'read a file' })).body.tools.length).to.be.greaterThan(0);
    expect((await api.get('/api/toolsets')).status).to.equal(200);
  });

  it('skills: the bundled skills are listed and their SKILL.md served; bundles: the catalog answers', async () => {
    const skills = (await api.get('/api/skills')).body.skills as { name: string }[];
    expect(skills.map((s) => s.name)).to.include('svc-resources');
    const content = await api.get('/api/skills/svc-resources/content');
    expect(content.status).to.equal(200);
    expect(JSON.stringify(content.body)).to.include('svc-resources');
    expect((await api.get('/api/bundles/catalog')).status).to.equal(200);
  });

  it('a resource is reconciled by the compiled controllers (a Lua script and a queue) and deleted', async () => {
    const put = await api.put('/api/resources/agent/tour?wait=true', { scope: { kind: 'global' }, spec: { name: 'tour', prompt: 'p' }, expected_version: 0 });
    expect(put.status).to.equal(201);
    expect(put.headers.get('x-svc-reconcile')).to.equal('done');
    await eventually(async () => expect((await api.get('/api/agents')).body.agents.map((a: { name: string }) => a.name)).to.include('tour'));
    expect((await api.delete('/api/resources/agent/tour', { expected_version: 1 })).status).to.equal(204);
  });

  it('a webhook delivery without its signature is refused, never a 500', async () => {
    const res = await api.post('/api/webhooks/global/nothing', { a: 1 });
    expect(res.status).to.be.oneOf([401, 404]);
  });
});
