import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';

describe('Conformance: POST /api/agents answers with the definition that takes effect; the snapshot names its providers', function () {
  this.timeout(60_000);
  const f = new ServiceFixture({ workspace: false }).install();

  it('updates the record that already defines the name (with its version) instead of adding a second one', async () => {
    const put = await f.api.put('/api/resources/agent/reviewer?wait=true', { scope: { kind: 'global' }, expected_version: 0, spec: { name: 'reviewer', prompt: 'old', provider: 'p' } });
    expect(put.status).to.equal(201);
    const res = await f.api.post('/api/agents', { scope: 'global', agent: { name: 'reviewer', prompt: 'new', provider: 'p' } });
    expect(res.status).to.equal(200);
    expect(res.body.agent).to.include({ name: 'reviewer', prompt: 'new' });
    const records = (await f.api.get('/api/resources/agent')).body.records;
    expect(records.map((r: any) => [r.id, r.version, r.spec.prompt])).to.deep.equal([['reviewer', 2, 'new']]);
    expect((await f.api.get('/api/agents')).body.agents.find((a: any) => a.name === 'reviewer').prompt).to.equal('new');
  });

  it('accepts the spec\'s minimal workspace-scoped body in its accepted forms, and says which field carries the workspace', async () => {
    const ws = (await f.api.post('/api/workspaces', { root_dir: f.root, name: 'desk' })).body.workspace;
    for (const [i, form] of [{ workspace: ws.id }, { workspace: 'desk' }, { workspace: f.root }, { workspace_path: f.root }].entries()) {
      const res = await f.api.post('/api/agents', { scope: 'workspace', ...form, agent: { name: `a${i}`, prompt: 'p', provider: 'p' } });
      expect(res.status, JSON.stringify(form)).to.equal(201);
    }
    const missing = await f.api.post('/api/agents', { scope: 'workspace', agent: { name: 'x', prompt: 'p', provider: 'p' } });
    expect(missing.status).to.equal(422);
    expect(missing.body.diagnostic.evidence.workspace).to.match(/workspace_path/);
    const noProvider = await f.api.post('/api/agents', { scope: 'global', agent: { name: 'x', prompt: 'p' } });
    expect(noProvider.status).to.equal(422);
    expect(noProvider.body.diagnostic.evidence).to.deep.equal({ 'agent.provider': 'is required' });
    expect((await f.api.get(`/api/agents?workspace=${ws.id}`)).body.agents.map((a: any) => a.name)).to.not.include('x');
  });

  it('lists the built-in scripted agent that sessions use by default, until a definition takes the name', async () => {
    expect((await f.api.get('/api/agents')).body.agents.map((a: any) => [a.name, a.provider])).to.deep.equal([['scripted', 'builtin']]);
    await f.api.post('/api/agents', { scope: 'global', agent: { name: 'scripted', prompt: 'mine', provider: 'p' } });
    expect((await f.api.get('/api/agents')).body.agents.map((a: any) => [a.name, a.prompt])).to.deep.equal([['scripted', 'mine']]);
  });

  it('names each provider once, from global and workspace agents', async () => {
    const ws = (await f.api.post('/api/workspaces', { root_dir: f.root })).body.workspace;
    await f.api.post('/api/agents', { scope: 'global', agent: { name: 'a', prompt: 'p', provider: 'anthropic' } });
    await f.api.post('/api/agents', { scope: 'workspace', workspace: ws.id, agent: { name: 'b', prompt: 'p', provider: 'openai' } });
    await f.api.post('/api/agents', { scope: 'workspace', workspace: ws.id, agent: { name: 'c', prompt: 'p', provider: 'openai' } });
    const snap = (await f.api.get(`/api/workspaces/${ws.id}`)).body;
    expect(snap.providers.map((p: any) => p.name)).to.deep.equal(['anthropic', 'builtin', 'openai']);
    expect(snap.providers[0]).to.have.keys('auth_mode', 'display_name', 'env_policy', 'harness', 'home_policy', 'name', 'runtime_provider', 'status');
  });
});
