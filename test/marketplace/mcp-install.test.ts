import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { ServiceFixture } from '../helpers/fixture.ts';
import { Client, eventually } from '../helpers/service.ts';
import { EverythingHttp } from '../interop/everything.ts';
import { registryEntry, RegistryFixture } from './fixtures.ts';

/** The installed @modelcontextprotocol/server-everything, published as the registry's npm package (npx finds it offline). */
const EVERYTHING_VERSION = (createRequire(import.meta.url)('@modelcontextprotocol/server-everything/package.json') as { version: string }).version;
const CANARY = 'sk-canary-5b1f0c2e9d';

describe('MCP installs from the marketplace become mcp_server records (real Redis, server-everything)', function () {
  this.timeout(120_000);
  const f = new ServiceFixture({ autoStart: false, workspace: false }).install();
  const registry = new RegistryFixture();
  const remote = new EverythingHttp();
  before(async () => { await registry.start(); await remote.start(); });
  after(async () => { await registry.stop(); await remote.stop(); });
  beforeEach(() => {
    registry.servers = [
      registryEntry('io.github.modelcontextprotocol/everything', {
        version: EVERYTHING_VERSION, title: 'Everything',
        packages: [{
          registryType: 'npm', identifier: '@modelcontextprotocol/server-everything', version: EVERYTHING_VERSION, transport: { type: 'stdio' },
          packageArguments: [{ type: 'positional', value: 'stdio' }],
          environmentVariables: [{ name: 'API_KEY', description: 'Your key', isRequired: true, isSecret: true }, { name: 'LOG_LEVEL', default: 'info' }],
        }],
      }),
      registryEntry('io.github.modelcontextprotocol/everything-remote', { remotes: [{ type: 'streamable-http', url: remote.url }] }),
      registryEntry('io.github.acme/needs-region', {
        packages: [{ registryType: 'npm', identifier: '@acme/region', version: '1.0.0', transport: { type: 'stdio' }, environmentVariables: [{ name: 'REGION', isRequired: true }] }],
      }),
      registryEntry('io.github.acme/optional-secret', {
        packages: [{ registryType: 'npm', identifier: '@acme/optional', version: '1.0.0', transport: { type: 'stdio' }, environmentVariables: [{ name: 'OPT_TOKEN', isSecret: true }, { name: 'MODE', default: 'fast' }] }],
      }),
      registryEntry('io.github.acme/headers', { remotes: [{ type: 'streamable-http', url: 'https://x.example/mcp', headers: [{ name: 'Authorization', isRequired: true, isSecret: true }] }] }),
    ];
  });

  const start = async (env: Record<string, string> = {}) => {
    writeFileSync(path.join(f.dataDir, 'config.yaml'), stringify({ marketplace: { refresh_interval: '0s', sources: [{ id: 'official', type: 'mcp-registry', url: registry.url }] } }));
    await f.start({ SVC_VAULT_KEYS: `k1=${randomBytes(32).toString('base64')}`, ...env });
    expect((await f.api.post('/api/marketplace/refresh', {})).status).to.equal(200);
  };
  const status = async (id: string) => (await f.api.get(`/api/resources/mcp_server/${id}/status`)).body.status;
  const cond = (s: any, type: string) => s?.conditions?.find((c: any) => c.type === type);
  const ENTRY = 'io.github.modelcontextprotocol_everything';

  it('an npm entry becomes an mcp_server record that connects (Ready); its secret goes to the vault, the record holds the ref', async () => {
    await start();
    const res = await f.api.post(`/api/marketplace/mcp/${ENTRY}/install`, { name: 'everything', env: { API_KEY: CANARY } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(JSON.stringify(res.body)).to.not.include(CANARY);
    expect(res.body.server).to.deep.include({ kind: 'mcp_server', id: 'everything', scope: { kind: 'global' }, source: { kind: 'marketplace', id: ENTRY } });
    expect(res.body.server.spec).to.deep.include({
      command: 'npx', args: ['-y', `@modelcontextprotocol/server-everything@${EVERYTHING_VERSION}`, 'stdio'],
      env: { LOG_LEVEL: 'info' }, secret_env: { API_KEY: 'vault:mcp/everything/API_KEY' },
    });
    expect(res.body.secrets).to.deep.equal([{ name: 'API_KEY', ref: 'vault:mcp/everything/API_KEY', stored: true }]);
    expect((await f.api.get('/api/vault/secrets/metadata?ref=vault:mcp/everything/API_KEY')).status).to.equal(200);
    const ready = await eventually(async () => {
      const s = await status('everything');
      expect(cond(s, 'Ready'), JSON.stringify(s)).to.include({ status: 'True' });
      return s;
    }, 60_000, 250);
    expect(ready.tools_discovered).to.be.greaterThan(5);
    const record = (await f.api.get('/api/resources/mcp_server/everything')).body;
    expect(JSON.stringify(record)).to.not.include(CANARY);
    const entry = (await f.api.get('/api/marketplace/mcp')).body.items.find((e: any) => e.entry_id === ENTRY);
    expect(entry).to.include({ installed: true, installed_name: 'everything', installed_version: EVERYTHING_VERSION, update_available: false, manage_path: '/api/resources/mcp_server/everything' });
    // A workspace's view does not see a global install.
    const ws = (await f.api.post('/api/workspaces', { root_dir: f.root })).body.workspace;
    expect((await f.api.get(`/api/marketplace/mcp?scope=workspace&workspace_id=${ws.id}`)).body.items.find((e: any) => e.entry_id === ENTRY).installed).to.equal(false);
    // The same name again is a conflict naming the holder, and writes nothing (neither the record nor the secret).
    const again = await f.api.post(`/api/marketplace/mcp/${ENTRY}/install`, { name: 'everything', env: { API_KEY: 'other-value-123' } });
    expect(again.status).to.equal(409);
    expect(again.body.diagnostic.code).to.equal('mcp_server_name_taken');
    expect(again.body.diagnostic.evidence).to.deep.include({ name: 'everything', id: 'everything', holder: 'mcp_server/everything', holder_source: { kind: 'marketplace', id: ENTRY } });
    expect(again.body.diagnostic.message).to.include('mcp_server "everything"');
    expect((await f.api.get('/api/resources/mcp_server/everything')).body.version).to.equal(record.version);
    expect((await f.service.vault!.resolveRefs(['vault:mcp/everything/API_KEY'])).get('vault:mcp/everything/API_KEY')).to.deep.include({ value: CANARY });
    // A newer version published: the entry says an update is available.
    registry.servers[0].server.version = '9999.0.0';
    registry.servers[0].updatedAt = new Date(Date.now() + 1000).toISOString();
    await f.api.post('/api/marketplace/refresh', {});
    const newer = (await f.api.get(`/api/marketplace/mcp/${ENTRY}`)).body.entry;
    expect(newer).to.include({ installed: true, update_available: true, version: '9999.0.0' });
  });

  it('a secret not given is referenced anyway: the record shows SecretNotFound until the vault holds it', async () => {
    await start();
    const res = await f.api.post(`/api/marketplace/mcp/${ENTRY}/install`, { name: 'later' });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.secrets).to.deep.equal([{ name: 'API_KEY', ref: 'vault:mcp/later/API_KEY', stored: false }]);
    const missing = await eventually(async () => {
      const s = await status('later');
      expect(cond(s, 'Ready')?.status, JSON.stringify(s)).to.equal('False');
      return s;
    });
    expect(cond(missing, 'Degraded').reason).to.equal('SecretNotFound');
    expect((await f.api.put('/api/vault/secrets', { ref: 'vault:mcp/later/API_KEY', secret_value: CANARY })).status).to.be.lessThan(300);
    await eventually(async () => expect(cond(await status('later'), 'Ready')?.status).to.equal('True'), 60_000, 250);
  });

  it('an optional secret variable not given is referenced too (the vault path to write later); given, it is stored', async () => {
    await start();
    const OPT = 'io.github.acme_optional-secret';
    const res = await f.api.post(`/api/marketplace/mcp/${OPT}/install`, { name: 'opt' });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.server.spec).to.deep.include({ env: { MODE: 'fast' }, secret_env: { OPT_TOKEN: 'vault:mcp/opt/OPT_TOKEN' } });
    expect(res.body.secrets).to.deep.equal([{ name: 'OPT_TOKEN', ref: 'vault:mcp/opt/OPT_TOKEN', stored: false }]);
    expect((await f.api.get('/api/vault/secrets/metadata?ref=vault:mcp/opt/OPT_TOKEN')).status, 'nothing written to the vault').to.equal(404);
    const given = await f.api.post(`/api/marketplace/mcp/${OPT}/install`, { name: 'opt-2', env: { OPT_TOKEN: CANARY } });
    expect(given.status, JSON.stringify(given.body)).to.equal(201);
    expect(given.body.secrets).to.deep.equal([{ name: 'OPT_TOKEN', ref: 'vault:mcp/opt-2/OPT_TOKEN', stored: true }]);
    expect(JSON.stringify(given.body)).to.not.include(CANARY);
  });

  it('concurrent installs of one name: one wins, and the losers\' 409s leave the winner\'s secret in the vault', async () => {
    await start();
    const values = ['a', 'b', 'c', 'd', 'e'].map((v) => `race-value-${v}-123`);
    const answers = await Promise.all(values.map((v) => f.api.post(`/api/marketplace/mcp/${ENTRY}/install`, { name: 'race', env: { API_KEY: v } })));
    expect(answers.map((r) => r.status).sort()).to.deep.equal([201, 409, 409, 409, 409]);
    for (const lost of answers.filter((r) => r.status === 409)) expect(lost.body.diagnostic).to.deep.include({ code: 'mcp_server_name_taken' });
    const winner = values[answers.findIndex((r) => r.status === 201)];
    const ref = 'vault:mcp/race/API_KEY';
    expect((await f.service.vault!.resolveRefs([ref])).get(ref)).to.deep.include({ value: winner });
    const writes = (await f.service.bus!.redis.xrange(f.service.bus!.key, '-', '+'))
      .map(([, fields]) => JSON.parse(fields[1])).filter((e) => e.type === 'vault.secret.written' && e.data.ref === ref);
    expect(writes).to.have.length(1);
  });

  it('a workspace install shows as installed in that workspace whether it is named by id or name; an unknown workspace is 404', async () => {
    await start();
    const ws = (await f.api.post('/api/workspaces', { root_dir: f.root })).body.workspace;
    const REMOTE = 'io.github.modelcontextprotocol_everything-remote';
    const res = await f.api.post(`/api/marketplace/mcp/${REMOTE}/install`, { name: 'in-ws', scope: 'workspace', workspace_id: ws.name });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.server.scope).to.deep.equal({ kind: 'workspace', id: ws.id });
    for (const ref of [ws.id, ws.name]) {
      const detail = await f.api.get(`/api/marketplace/mcp/${REMOTE}?scope=workspace&workspace_id=${ref}`);
      expect(detail.body.entry, ref).to.include({ installed: true, installed_name: 'in-ws' });
      const page = await f.api.get(`/api/marketplace/mcp?scope=workspace&workspace_id=${ref}`);
      expect(page.body.items.find((e: any) => e.entry_id === REMOTE), ref).to.include({ installed: true });
      const search = await f.api.get(`/api/marketplace/search?q=everything&scope=workspace&workspace_id=${ref}`);
      expect(search.body.kinds[0].items.find((e: any) => e.entry_id === REMOTE), ref).to.include({ installed: true });
    }
    for (const p of [`/api/marketplace/mcp/${REMOTE}`, '/api/marketplace/mcp', '/api/marketplace/search']) {
      const gone = await f.api.get(`${p}?scope=workspace&workspace_id=ws-nope`);
      expect(gone.status, p).to.equal(404);
      expect(gone.body.diagnostic.code, p).to.equal('workspace_not_found');
    }
  });

  it('refuses a server name another mcp_server record already uses (409), which would silently take over its tools', async () => {
    await start();
    const REMOTE = 'io.github.modelcontextprotocol_everything-remote';
    const hand = await f.api.put('/api/resources/mcp_server/handmade', { scope: { kind: 'global' }, spec: { name: 'everything-remote', transport: 'http', url: remote.url }, expected_version: 0 });
    expect(hand.status, JSON.stringify(hand.body)).to.equal(201);
    const res = await f.api.post(`/api/marketplace/mcp/${REMOTE}/install`, {});
    expect(res.status, JSON.stringify(res.body)).to.equal(409);
    expect(res.body.diagnostic).to.deep.include({ code: 'mcp_server_name_taken' });
    expect(res.body.diagnostic.evidence).to.include({ name: 'everything-remote', id: 'handmade' });
    expect((await f.api.get('/api/resources/mcp_server')).body.records.map((r: any) => r.id)).to.deep.equal(['handmade']);
    // Another name installs.
    expect((await f.api.post(`/api/marketplace/mcp/${REMOTE}/install`, { name: 'everything-2' })).status).to.equal(201);
  });

  it('a remote entry becomes an http mcp_server record that connects', async () => {
    await start();
    const res = await f.api.post('/api/marketplace/mcp/io.github.modelcontextprotocol_everything-remote/install', {});
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.server.id).to.equal('everything-remote');
    expect(res.body.server.spec).to.deep.include({ transport: 'http', url: remote.url });
    await eventually(async () => expect(cond(await status('everything-remote'), 'Ready')?.status).to.equal('True'), 30_000, 250);
  });

  it('refuses bad installs with 4xx and writes nothing', async () => {
    await start();
    const cases: { reason: string; path: string; body: unknown; status: number; field?: string }[] = [
      { reason: 'unknown entry', path: '/api/marketplace/mcp/io.github.acme_nope/install', body: {}, status: 404 },
      { reason: 'a variable the entry does not have', path: `/api/marketplace/mcp/${ENTRY}/install`, body: { env: { NOPE: 'x' } }, status: 422, field: 'env.NOPE' },
      { reason: 'a required value missing', path: '/api/marketplace/mcp/io.github.acme_needs-region/install', body: {}, status: 422, field: 'env.REGION' },
      { reason: 'a name outside the grammar', path: `/api/marketplace/mcp/${ENTRY}/install`, body: { name: 'Bad Name' }, status: 422, field: 'name' },
      { reason: 'workspace scope without workspace_id', path: `/api/marketplace/mcp/${ENTRY}/install`, body: { scope: 'workspace' }, status: 422, field: 'workspace_id' },
      { reason: 'a package the entry does not have', path: `/api/marketplace/mcp/${ENTRY}/install`, body: { package: 'oci' }, status: 422, field: 'package' },
      { reason: 'a remote that needs headers', path: '/api/marketplace/mcp/io.github.acme_headers/install', body: {}, status: 422, field: 'package' },
      { reason: 'an unknown field', path: `/api/marketplace/mcp/${ENTRY}/install`, body: { nmae: 'x' }, status: 422, field: 'nmae' },
      // The record's codec refuses these; the answer names the body's field, not the record's spec.secret_env.
      { reason: 'a ref outside the mcp namespace', path: `/api/marketplace/mcp/${ENTRY}/install`, body: { env: { API_KEY: 'vault:providers/x' } }, status: 422, field: 'env.API_KEY' },
      { reason: 'an empty vault ref', path: `/api/marketplace/mcp/${ENTRY}/install`, body: { env: { API_KEY: 'vault:' } }, status: 422, field: 'env.API_KEY' },
    ];
    for (const c of cases) {
      const res = await f.api.post(c.path, c.body);
      expect(res.status, `${c.reason}: ${JSON.stringify(res.body)}`).to.equal(c.status);
      if (c.field) expect(res.body.diagnostic.evidence, c.reason).to.have.property(c.field);
      if (c.field) expect(res.body.error, c.reason).to.include(c.field).and.not.include('spec.');
    }
    expect((await f.api.get('/api/resources/mcp_server')).body.records).to.deep.equal([]);
    expect((await f.api.get('/api/vault/secrets')).body.secrets).to.deep.equal([]);
  });

  it('with authentication: an operator may not install; an admin\'s install obeys the exec policy and writes nothing when refused', async () => {
    const tokens = path.join(f.dataDir, 'tokens.yaml');
    const hash = (t: string) => createHash('sha256').update(t).digest('hex');
    writeFileSync(tokens, stringify({ tokens: [{ name: 'op', role: 'operator', sha256: hash('op-token') }, { name: 'boss', role: 'admin', sha256: hash('admin-token') }] }));
    writeFileSync(path.join(f.dataDir, 'config.yaml'), stringify({ marketplace: { refresh_interval: '0s', sources: [{ id: 'official', type: 'mcp-registry', url: registry.url }] } }));
    await f.start({ AUTH_MODE: 'token', AUTH_TOKENS_FILE: tokens, EGRESS_ALLOWLIST: '127.0.0.1', SVC_VAULT_KEYS: `k1=${randomBytes(32).toString('base64')}` });
    const call = (token: string, m: string, p: string, b?: unknown) => new Client(f.service.url).call(m, p, b, { authorization: `Bearer ${token}` });
    expect((await call('op-token', 'POST', '/api/marketplace/refresh', {})).status).to.equal(200);
    expect((await call('op-token', 'POST', `/api/marketplace/mcp/${ENTRY}/install`, { env: { API_KEY: CANARY } })).status).to.equal(403);
    const refused = await call('admin-token', 'POST', `/api/marketplace/mcp/${ENTRY}/install`, { env: { API_KEY: CANARY } });
    expect(refused.status, JSON.stringify(refused.body)).to.equal(422);
    expect(refused.body.diagnostic.code).to.equal('command_not_allowed');
    expect((await call('admin-token', 'GET', '/api/resources/mcp_server')).body.records).to.deep.equal([]);
    expect((await call('admin-token', 'GET', '/api/vault/secrets')).body.secrets).to.deep.equal([]);
  });
});
