import { expect } from 'chai';
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { ServiceFixture } from '../helpers/fixture.ts';

describe('Workspaces and agents API (HTTP, real Redis)', () => {
  const f = new ServiceFixture({ workspace: false }).install();
  beforeEach(() => mkdirSync(path.join(f.root, 'src', 'deep'), { recursive: true }));

  it('creates a workspace on an existing directory and addresses it by id, name or path', async () => {
    await f.api.post('/api/agents', { scope: 'global', agent: { name: 'helper', prompt: 'p', provider: 'local' } });
    const res = await f.api.post('/api/workspaces', { root_dir: f.root, default_agent: 'helper' });
    expect(res.status).to.equal(201);
    const ws = res.body.workspace;
    expect(ws).to.include({ root_dir: f.root, name: path.basename(f.root), default_agent: 'helper', sandbox_ref: '' });
    expect(ws.id).to.match(/^ws-[0-9a-f]{16}$/);
    for (const ref of [ws.id, ws.name, encodeURIComponent(f.root)]) {
      const snap = await f.api.get(`/api/workspaces/${ref}`);
      expect(snap.status, ref).to.equal(200);
      expect(snap.body).to.deep.include({ workspace: ws, sessions: [] });
      expect(snap.body.agents.map((a: any) => a.name)).to.deep.equal(['helper', 'scripted']);
      expect(snap.body.providers.map((p: any) => p.name)).to.deep.equal(['builtin', 'local']);
      expect(snap.body.skills.map((s: { name: string; source: string }) => [s.name, s.source])).to.deep.equal([['svc-resources', 'bundled'], ['svc-sessions', 'bundled']]);
    }
    expect((await f.api.get('/api/workspaces')).body.workspaces).to.deep.equal([{ ...ws, root_exists: true }]);
  });

  it('lists a workspace whose root directory was removed with root_exists false, and keeps it addressable', async () => {
    const kept = (await f.api.post('/api/workspaces', { root_dir: f.root })).body.workspace;
    const gone = (await f.api.post('/api/workspaces', { root_dir: path.join(f.root, 'src') })).body.workspace;
    rmSync(path.join(f.root, 'src'), { recursive: true });
    const list = (await f.api.get('/api/workspaces')).body.workspaces as { id: string; root_exists: boolean }[];
    expect(Object.fromEntries(list.map((w) => [w.id, w.root_exists]))).to.deep.equal({ [kept.id]: true, [gone.id]: false });
    expect((await f.api.get(`/api/workspaces/${gone.id}`)).body.workspace).to.deep.equal(gone);
  });

  it('rejects a root_dir that is not an existing directory (422) and a duplicate root (409)', async () => {
    const missing = await f.api.post('/api/workspaces', { root_dir: path.join(f.root, 'nope') });
    expect(missing.status).to.equal(422);
    expect(missing.body.diagnostic.evidence).to.have.property('root_dir');
    expect((await f.api.post('/api/workspaces', {})).status).to.equal(422);
    expect((await f.api.post('/api/workspaces', { root_dir: f.root })).status).to.equal(201);
    expect((await f.api.post('/api/workspaces', { root_dir: f.root, name: 'other' })).status).to.equal(409);
    expect((await f.api.get('/api/workspaces')).body.workspaces).to.have.length(1);
  });

  it('resolves the deepest workspace containing a path, 404 when none', async () => {
    const outer = (await f.api.post('/api/workspaces', { root_dir: f.root })).body.workspace;
    const inner = (await f.api.post('/api/workspaces', { root_dir: path.join(f.root, 'src') })).body.workspace;
    expect((await f.api.post('/api/workspaces/resolve', { path: path.join(f.root, 'src', 'deep', 'f.ts') })).body.workspace.id).to.equal(inner.id);
    expect((await f.api.post('/api/workspaces/resolve', { path: f.root })).body.workspace.id).to.equal(outer.id);
    expect((await f.api.post('/api/workspaces/resolve', { path: '/definitely/elsewhere' })).status).to.equal(404);
    expect((await f.api.post('/api/workspaces/resolve', { path: 'relative' })).status).to.equal(422);
  });

  it('patches name, default_agent and add_dirs; rejects a missing add_dir and changes nothing', async () => {
    const ws = (await f.api.post('/api/workspaces', { root_dir: f.root })).body.workspace;
    await f.api.post('/api/agents', { scope: 'workspace', workspace: ws.id, agent: { name: 'coder', prompt: 'p', provider: 'local' } });
    const res = await f.api.patch(`/api/workspaces/${ws.id}`, { name: 'proj', default_agent: 'coder', add_dirs: [path.join(f.root, 'src')] });
    expect(res.status).to.equal(200);
    expect(res.body.workspace).to.include({ name: 'proj', default_agent: 'coder' });
    expect(res.body.workspace.add_dirs).to.deep.equal([path.join(f.root, 'src')]);
    const bad = await f.api.patch(`/api/workspaces/${ws.id}`, { name: 'x', add_dirs: ['/no/such/dir'] });
    expect(bad.status).to.equal(422);
    expect((await f.api.get(`/api/workspaces/${ws.id}`)).body.workspace.name).to.equal('proj');
    expect((await f.api.patch('/api/workspaces/ws-missing', { name: 'x' })).status).to.equal(404);
  });

  it('deletes a workspace with its workspace-scoped records, keeping global ones', async () => {
    const ws = (await f.api.post('/api/workspaces', { root_dir: f.root })).body.workspace;
    const scoped = { scope: { kind: 'workspace', id: ws.id }, spec: { name: 'local', prompt: 'p' }, expected_version: 0 };
    expect((await f.api.put('/api/resources/agent/local', scoped)).status).to.equal(201);
    await f.api.put('/api/resources/agent/global', { scope: { kind: 'global' }, spec: { name: 'g', prompt: 'p' }, expected_version: 0 });
    expect((await f.api.delete(`/api/workspaces/${ws.id}`)).status).to.equal(204);
    expect((await f.api.get(`/api/workspaces/${ws.id}`)).status).to.equal(404);
    expect((await f.api.get('/api/resources/agent/local')).status).to.equal(404);
    expect((await f.api.get('/api/resources/agent/global')).status).to.equal(200);
    expect((await f.api.put('/api/resources/agent/local', scoped)).status).to.equal(422);
  });

  it('lists global agents, and a workspace\'s merged in winning a name clash', async () => {
    const ws = (await f.api.post('/api/workspaces', { root_dir: f.root })).body.workspace;
    const g = await f.api.post('/api/agents', { scope: 'global', agent: { name: 'coder', prompt: 'global', provider: 'p1' } });
    expect(g.status).to.equal(201);
    expect(g.body.agent).to.include({ name: 'coder', prompt: 'global', provider: 'p1' });
    await f.api.post('/api/agents', { scope: 'global', agent: { name: 'writer', prompt: 'w', provider: 'p1' } });
    const w = await f.api.post('/api/agents', { scope: 'workspace', workspace: ws.id, agent: { name: 'coder', prompt: 'local', provider: 'p2' } });
    expect(w.status).to.equal(201);
    const global = (await f.api.get('/api/agents')).body.agents;
    expect(global.filter((a: any) => a.name !== 'scripted').map((a: any) => [a.name, a.prompt])).to.deep.equal([['coder', 'global'], ['writer', 'w']]);
    const merged = (await f.api.get(`/api/agents?workspace=${ws.name}`)).body.agents;
    expect(merged.filter((a: any) => a.name !== 'scripted').map((a: any) => [a.name, a.prompt])).to.deep.equal([['coder', 'local'], ['writer', 'w']]);
    expect((await f.api.get(`/api/workspaces/${ws.id}`)).body.agents.filter((a: any) => a.name !== 'scripted').map((a: any) => a.prompt)).to.deep.equal(['local', 'w']);
    const again = await f.api.post('/api/agents', { scope: 'global', agent: { name: 'coder', prompt: 'global v2', provider: 'p1' } });
    expect(again.status).to.equal(200);
    expect((await f.api.get('/api/agents')).body.agents[0].prompt).to.equal('global v2');
    expect((await f.api.get('/api/agents?workspace=nope')).status).to.equal(404);
    const bad = await f.api.post('/api/agents', { scope: 'global', agent: { name: 'x' } });
    expect(bad.status).to.equal(422);
    expect(bad.body.diagnostic.evidence).to.have.keys('agent.prompt', 'agent.provider');
  });
});
