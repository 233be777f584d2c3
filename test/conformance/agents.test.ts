import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, startService } from '../helpers/service.ts';

describe('Conformance #21.2 and #21.7: POST /api/agents answers with the definition that takes effect', function () {
  this.timeout(60_000);
  const redis = new RedisServer();
  let service: Service;
  let api: Client;
  let root: string;
  let dataDir: string;

  before(async () => { await redis.start(); });
  after(async () => { await redis.destroy(); });
  beforeEach(async () => {
    await redis.flush();
    root = mkdtempSync(path.join(os.tmpdir(), 'svc-agents-'));
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-agents-data-'));
    service = await startService(redis.url, { DATA_DIR: dataDir });
    api = new Client(service.url);
  });
  afterEach(async () => {
    await service.stop();
    rmSync(root, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('updates the record that already defines the name (with its version) instead of adding a second one', async () => {
    const put = await api.put('/api/resources/agent/reviewer?wait=true', { scope: { kind: 'global' }, expected_version: 0, spec: { name: 'reviewer', prompt: 'old', provider: 'p' } });
    expect(put.status).to.equal(201);
    const res = await api.post('/api/agents', { scope: 'global', agent: { name: 'reviewer', prompt: 'new', provider: 'p' } });
    expect(res.status).to.equal(200);
    expect(res.body.agent).to.include({ name: 'reviewer', prompt: 'new' });
    const records = (await api.get('/api/resources/agent')).body.records;
    expect(records.map((r: any) => [r.id, r.version, r.spec.prompt])).to.deep.equal([['reviewer', 2, 'new']]);
    expect((await api.get('/api/agents')).body.agents.find((a: any) => a.name === 'reviewer').prompt).to.equal('new');
  });

  it('accepts the spec\'s minimal workspace-scoped body in the forms of gaps §1.2, and says which field carries the workspace', async () => {
    const ws = (await api.post('/api/workspaces', { root_dir: root, name: 'desk' })).body.workspace;
    for (const [i, form] of [{ workspace: ws.id }, { workspace: 'desk' }, { workspace: root }, { workspace_path: root }].entries()) {
      const res = await api.post('/api/agents', { scope: 'workspace', ...form, agent: { name: `a${i}`, prompt: 'p', provider: 'p' } });
      expect(res.status, JSON.stringify(form)).to.equal(201);
    }
    const missing = await api.post('/api/agents', { scope: 'workspace', agent: { name: 'x', prompt: 'p', provider: 'p' } });
    expect(missing.status).to.equal(422);
    expect(missing.body.diagnostic.evidence.workspace).to.match(/workspace_path/);
    const noProvider = await api.post('/api/agents', { scope: 'global', agent: { name: 'x', prompt: 'p' } });
    expect(noProvider.status).to.equal(422);
    expect(noProvider.body.diagnostic.evidence).to.deep.equal({ 'agent.provider': 'is required' });
    expect((await api.get(`/api/agents?workspace=${ws.id}`)).body.agents.map((a: any) => a.name)).to.not.include('x');
  });

  it('lists the built-in scripted agent that sessions use by default, until a definition takes the name', async () => {
    expect((await api.get('/api/agents')).body.agents.map((a: any) => [a.name, a.provider])).to.deep.equal([['scripted', 'builtin']]);
    await api.post('/api/agents', { scope: 'global', agent: { name: 'scripted', prompt: 'mine', provider: 'p' } });
    expect((await api.get('/api/agents')).body.agents.map((a: any) => [a.name, a.prompt])).to.deep.equal([['scripted', 'mine']]);
  });
});

describe('Conformance #21.7: the workspace snapshot lists the providers its agents reference', function () {
  this.timeout(60_000);
  const redis = new RedisServer();
  let service: Service;
  let root: string;
  before(async () => {
    await redis.start();
    root = mkdtempSync(path.join(os.tmpdir(), 'svc-prov-'));
    service = await startService(redis.url, { DATA_DIR: path.join(root, '.data') });
  });
  after(async () => { await service.stop(); await redis.destroy(); rmSync(root, { recursive: true, force: true }); });

  it('names each provider once, from global and workspace agents', async () => {
    const api = new Client(service.url);
    const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
    await api.post('/api/agents', { scope: 'global', agent: { name: 'a', prompt: 'p', provider: 'anthropic' } });
    await api.post('/api/agents', { scope: 'workspace', workspace: ws.id, agent: { name: 'b', prompt: 'p', provider: 'openai' } });
    await api.post('/api/agents', { scope: 'workspace', workspace: ws.id, agent: { name: 'c', prompt: 'p', provider: 'openai' } });
    const snap = (await api.get(`/api/workspaces/${ws.id}`)).body;
    expect(snap.providers.map((p: any) => p.name)).to.deep.equal(['anthropic', 'builtin', 'openai']);
    expect(snap.providers[0]).to.have.keys('auth_mode', 'display_name', 'env_policy', 'harness', 'home_policy', 'name', 'runtime_provider');
  });
});
