import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, startService } from '../helpers/service.ts';

describe('Workspaces and agents API (HTTP, real Redis)', () => {
  const redis = new RedisServer();
  let service: Service;
  let api: Client;
  let root: string;

  before(async () => { await redis.start(); });
  after(async () => { await redis.destroy(); });
  beforeEach(async () => {
    await redis.flush();
    root = mkdtempSync(path.join(os.tmpdir(), 'svc-ws-'));
    mkdirSync(path.join(root, 'src', 'deep'), { recursive: true });
    service = await startService(redis.url);
    api = new Client(service.url);
  });
  afterEach(async () => {
    await service.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it('creates a workspace on an existing directory and addresses it by id, name or path', async () => {
    await api.post('/api/agents', { scope: 'global', agent: { name: 'helper', prompt: 'p', provider: 'local' } });
    const res = await api.post('/api/workspaces', { root_dir: root, default_agent: 'helper' });
    expect(res.status).to.equal(201);
    const ws = res.body.workspace;
    expect(ws).to.include({ root_dir: root, name: path.basename(root), default_agent: 'helper', sandbox_ref: '' });
    expect(ws.id).to.match(/^ws-[0-9a-f]{16}$/);
    for (const ref of [ws.id, ws.name, encodeURIComponent(root)]) {
      const snap = await api.get(`/api/workspaces/${ref}`);
      expect(snap.status, ref).to.equal(200);
      expect(snap.body).to.deep.include({ workspace: ws, sessions: [] });
      expect(snap.body.agents.map((a: any) => a.name)).to.deep.equal(['helper', 'scripted']);
      expect(snap.body.providers.map((p: any) => p.name)).to.deep.equal(['builtin', 'local']);
      expect(snap.body.skills.map((s: { name: string; source: string }) => [s.name, s.source])).to.deep.equal([['svc-resources', 'bundled'], ['svc-sessions', 'bundled']]);
    }
    expect((await api.get('/api/workspaces')).body.workspaces).to.deep.equal([ws]);
  });

  it('rejects a root_dir that is not an existing directory (422) and a duplicate root (409)', async () => {
    const missing = await api.post('/api/workspaces', { root_dir: path.join(root, 'nope') });
    expect(missing.status).to.equal(422);
    expect(missing.body.diagnostic.evidence).to.have.property('root_dir');
    expect((await api.post('/api/workspaces', {})).status).to.equal(422);
    expect((await api.post('/api/workspaces', { root_dir: root })).status).to.equal(201);
    expect((await api.post('/api/workspaces', { root_dir: root, name: 'other' })).status).to.equal(409);
    expect((await api.get('/api/workspaces')).body.workspaces).to.have.length(1);
  });

  it('resolves the deepest workspace containing a path, 404 when none', async () => {
    const outer = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
    const inner = (await api.post('/api/workspaces', { root_dir: path.join(root, 'src') })).body.workspace;
    expect((await api.post('/api/workspaces/resolve', { path: path.join(root, 'src', 'deep', 'f.ts') })).body.workspace.id).to.equal(inner.id);
    expect((await api.post('/api/workspaces/resolve', { path: root })).body.workspace.id).to.equal(outer.id);
    expect((await api.post('/api/workspaces/resolve', { path: '/definitely/elsewhere' })).status).to.equal(404);
    expect((await api.post('/api/workspaces/resolve', { path: 'relative' })).status).to.equal(422);
  });

  it('patches name, default_agent and add_dirs; rejects a missing add_dir and changes nothing', async () => {
    const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
    await api.post('/api/agents', { scope: 'workspace', workspace: ws.id, agent: { name: 'coder', prompt: 'p', provider: 'local' } });
    const res = await api.patch(`/api/workspaces/${ws.id}`, { name: 'proj', default_agent: 'coder', add_dirs: [path.join(root, 'src')] });
    expect(res.status).to.equal(200);
    expect(res.body.workspace).to.include({ name: 'proj', default_agent: 'coder' });
    expect(res.body.workspace.add_dirs).to.deep.equal([path.join(root, 'src')]);
    const bad = await api.patch(`/api/workspaces/${ws.id}`, { name: 'x', add_dirs: ['/no/such/dir'] });
    expect(bad.status).to.equal(422);
    expect((await api.get(`/api/workspaces/${ws.id}`)).body.workspace.name).to.equal('proj');
    expect((await api.patch('/api/workspaces/ws-missing', { name: 'x' })).status).to.equal(404);
  });

  it('deletes a workspace with its workspace-scoped records, keeping global ones', async () => {
    const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
    const scoped = { scope: { kind: 'workspace', id: ws.id }, spec: { name: 'local', prompt: 'p' }, expected_version: 0 };
    expect((await api.put('/api/resources/agent/local', scoped)).status).to.equal(201);
    await api.put('/api/resources/agent/global', { scope: { kind: 'global' }, spec: { name: 'g', prompt: 'p' }, expected_version: 0 });
    expect((await api.delete(`/api/workspaces/${ws.id}`)).status).to.equal(204);
    expect((await api.get(`/api/workspaces/${ws.id}`)).status).to.equal(404);
    expect((await api.get('/api/resources/agent/local')).status).to.equal(404);
    expect((await api.get('/api/resources/agent/global')).status).to.equal(200);
    expect((await api.put('/api/resources/agent/local', scoped)).status).to.equal(422);
  });

  it('lists global agents, and a workspace\'s merged in winning a name clash', async () => {
    const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
    const g = await api.post('/api/agents', { scope: 'global', agent: { name: 'coder', prompt: 'global', provider: 'p1' } });
    expect(g.status).to.equal(201);
    expect(g.body.agent).to.include({ name: 'coder', prompt: 'global', provider: 'p1' });
    await api.post('/api/agents', { scope: 'global', agent: { name: 'writer', prompt: 'w', provider: 'p1' } });
    const w = await api.post('/api/agents', { scope: 'workspace', workspace: ws.id, agent: { name: 'coder', prompt: 'local', provider: 'p2' } });
    expect(w.status).to.equal(201);
    const global = (await api.get('/api/agents')).body.agents;
    expect(global.filter((a: any) => a.name !== 'scripted').map((a: any) => [a.name, a.prompt])).to.deep.equal([['coder', 'global'], ['writer', 'w']]);
    const merged = (await api.get(`/api/agents?workspace=${ws.name}`)).body.agents;
    expect(merged.filter((a: any) => a.name !== 'scripted').map((a: any) => [a.name, a.prompt])).to.deep.equal([['coder', 'local'], ['writer', 'w']]);
    expect((await api.get(`/api/workspaces/${ws.id}`)).body.agents.filter((a: any) => a.name !== 'scripted').map((a: any) => a.prompt)).to.deep.equal(['local', 'w']);
    const again = await api.post('/api/agents', { scope: 'global', agent: { name: 'coder', prompt: 'global v2', provider: 'p1' } });
    expect(again.status).to.equal(200);
    expect((await api.get('/api/agents')).body.agents[0].prompt).to.equal('global v2');
    expect((await api.get('/api/agents?workspace=nope')).status).to.equal(404);
    const bad = await api.post('/api/agents', { scope: 'global', agent: { name: 'x' } });
    expect(bad.status).to.equal(422);
    expect(bad.body.diagnostic.evidence).to.have.keys('agent.prompt', 'agent.provider');
  });
});
