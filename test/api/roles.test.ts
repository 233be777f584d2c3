import { expect } from 'chai';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ServiceFixture } from '../helpers/fixture.ts';

describe('Roles: built-in defaults, global and workspace configuration (HTTP)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture({ env: { SESSION_INACTIVITY_TIMEOUT: '45m' } }).install();
  const globalConfig = (yaml: string) => writeFileSync(path.join(f.dataDir, 'config.yaml'), yaml);
  const workspaceConfig = (yaml: string) => {
    mkdirSync(path.join(f.root, '.svc'), { recursive: true });
    writeFileSync(path.join(f.root, '.svc', 'config.yaml'), yaml);
  };

  it('lists the built-in roles with resolution_mode builtin and full provenance', async () => {
    const roles = (await f.api.get('/api/roles')).body.roles as any[];
    expect(roles.map((r) => r.role)).to.deep.equal(['session', 'spawn']);
    const session = roles[0];
    expect(session).to.deep.include({ role: 'session', agent: 'scripted', enabled: true, resolution_mode: 'builtin', timeout: '45m', fallback_chain: [], diagnostics: [] });
    expect(Object.values(session.provenance)).to.satisfy((v: string[]) => v.every((x) => x === 'builtin'));
    expect(roles[1]).to.include({ role: 'spawn', agent: '' });
    const nope = await f.api.get('/api/roles/nope');
    expect(nope.status).to.equal(404);
    expect(nope.body.diagnostic.code).to.equal('role_not_found');
    expect((await f.api.get(`/api/roles/session?workspace=${f.ws.id}`)).body.role).to.deep.equal(session);
    expect((await f.api.get('/api/roles?workspace=ghost')).status).to.equal(404);
  });

  it('global configuration overrides the default and the workspace overrides both, field by field', async () => {
    await f.api.put('/api/resources/agent/a1?wait=true', { scope: { kind: 'global' }, spec: { name: 'reviewer', prompt: 'p', provider: 'acme', model: 'big-1' }, expected_version: 0 });
    globalConfig('roles:\n  session:\n    agent: reviewer\n    provider: acme\n    model: big-1\n');
    workspaceConfig('roles:\n  session:\n    reasoning_effort: high\n');
    const global = (await f.api.get('/api/roles/session')).body.role;
    expect(global).to.include({ agent: 'reviewer', provider: 'acme', model: 'big-1', reasoning_effort: '', resolution_mode: 'global' });
    expect(global.provenance).to.include({ agent: 'global', model: 'global', reasoning_effort: 'builtin' });
    expect(global.diagnostics).to.deep.equal([]);
    const local = (await f.api.get(`/api/roles/session?workspace=${f.ws.id}`)).body.role;
    expect(local).to.include({ agent: 'reviewer', reasoning_effort: 'high', resolution_mode: 'workspace' });
    expect(local.provenance).to.include({ agent: 'global', reasoning_effort: 'workspace' });
  });

  it('diagnoses unknown agents and models, bad efforts and bad configuration', async () => {
    globalConfig('models:\n  - {provider: acme, model: small-1}\nroles:\n  spawn:\n    agent: ghost\n    provider: acme\n    model: huge-9\n    reasoning_effort: extreme\n    fallback_chain:\n      - {provider: acme, model: small-1}\n    colour: blue\n');
    const spawn = (await f.api.get('/api/roles/spawn')).body.role;
    expect(spawn.diagnostics.map((d: any) => d.code)).to.have.members(['role_agent_unknown', 'role_model_unknown', 'role_reasoning_effort_invalid', 'role_field_unknown', 'role_field_not_applied', 'role_field_not_applied']);
    expect(spawn.diagnostics.find((d: any) => d.code === 'role_agent_unknown').agent).to.equal('ghost');
    expect(spawn.fallback_chain).to.deep.equal([{ provider: 'acme', model: 'small-1', reasoning_effort: '' }]);
    expect(spawn).to.include({ agent: 'ghost', reasoning_effort: 'extreme', resolution_mode: 'global' });
    expect(spawn.provenance).to.include({ agent: 'global', fallback_chain: 'global', enabled: 'builtin' });
    const session = (await f.api.get('/api/roles/session')).body.role;
    expect(session.diagnostics).to.deep.equal([]);
    expect(session.resolution_mode).to.equal('builtin');
    workspaceConfig('roles:\n  spawn:\n    enabled: "no"\n    timeout: 5m\n    fallback_chain: [acme]\n');
    const typed = (await f.api.get(`/api/roles/spawn?workspace=${f.ws.id}`)).body.role;
    expect(typed.diagnostics.map((d: any) => d.code)).to.include.members(['role_config_invalid', 'role_timeout_not_configurable']);
    expect(typed.diagnostics.filter((d: any) => d.code === 'role_config_invalid')).to.have.length(2);
    expect(typed).to.include({ enabled: true, timeout: '45m', resolution_mode: 'global' });
    expect(typed.provenance).to.include({ enabled: 'builtin', timeout: 'builtin', fallback_chain: 'global' });
    workspaceConfig('roles: [session, spawn]\n');
    expect((await f.api.get(`/api/roles/spawn?workspace=${f.ws.id}`)).body.role.diagnostics.map((d: any) => d.code)).to.include('role_config_invalid');
    workspaceConfig('roles: [not, a, mapping\n');
    const broken = (await f.api.get(`/api/roles/spawn?workspace=${f.ws.id}`)).body.role;
    const invalid = broken.diagnostics.find((d: any) => d.code === 'config_invalid');
    expect(invalid.message).to.match(/config\.yaml:\d+:\d+: /);
    expect(broken.resolution_mode).to.equal('global');
  });

  it('an agent defined only in a workspace is known to roles resolved for that workspace, and unknown elsewhere', async () => {
    const put = await f.api.put('/api/resources/agent/a-local?wait=true', { scope: { kind: 'workspace', id: f.ws.id }, spec: { name: 'local-helper', prompt: 'p' }, expected_version: 0 });
    expect(put.status).to.equal(201);
    globalConfig('roles:\n  spawn:\n    agent: local-helper\n');
    const global = (await f.api.get('/api/roles/spawn')).body.role;
    expect(global.diagnostics).to.deep.equal([{ agent: 'local-helper', code: 'role_agent_unknown', message: 'agent "local-helper" is not defined (globally or in this workspace)' }]);
    const local = (await f.api.get(`/api/roles?workspace=${f.ws.id}`)).body.roles.find((r: any) => r.role === 'spawn');
    expect(local).to.include({ agent: 'local-helper', resolution_mode: 'global' });
    expect(local.diagnostics).to.deep.equal([]);
  });

  it('the session role picks the agent of a session nobody named one for', async () => {
    await f.api.put('/api/resources/agent/a1?wait=true', { scope: { kind: 'global' }, spec: { name: 'helper', prompt: 'p' }, expected_version: 0 });
    globalConfig('roles:\n  session:\n    agent: helper\n');
    const s = (await f.api.post('/api/sessions', { workspace: f.ws.id })).body.session;
    expect(s.agent_name).to.equal('helper');
    const named = (await f.api.post('/api/sessions', { workspace: f.ws.id, agent_name: 'scripted' })).body.session;
    expect(named.agent_name).to.equal('scripted');
  });
});
