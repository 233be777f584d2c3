import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import OpenAI from 'openai';
import { sha256 } from '../../runtime/process/auth.ts';
import { loadConfig } from '../../runtime/process/config.ts';
import { Service } from '../../runtime/process/service.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually } from '../helpers/service.ts';
import { ProviderFixture, providerYaml, TEST_KEY, writeSettings } from './fixtures.ts';

const up = new ProviderFixture();
before(async () => {
  process.env.SVC_SECRET_CATALOG_KEY = TEST_KEY;
  await up.start();
});
after(() => up.stop());

describe('Model catalog: curation as desired state, the OpenAI list, agents and the snapshot', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();
  beforeEach(async () => {
    up.models = ['gpt-4o', 'gpt-4o-mini', 'fixture-only-1'];
    writeSettings(f.dataDir, providerYaml('openai', up.url));
    expect((await f.api.post('/api/model-catalog/providers/openai/models/refresh', { force: true })).status).to.equal(200);
  });
  const model = async (p: string, m: string, q = '?view=all') => (await f.api.get(`/api/model-catalog/providers/${p}/models${q}`)).body.models.find((x: any) => x.model_id === m);

  it('the curate route writes the model.curation record, and the record applied directly reads back the same', async () => {
    const res = await f.api.post('/api/model-catalog/providers/openai/models/curate', { model_id: 'gpt-4o', featured: true, default_effort: 'low' });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.model).to.include({ provider_id: 'openai', model_id: 'gpt-4o', featured: true, hidden: false, deprecated: false, curated: true, default_reasoning_effort: 'low', reasoning_source: 'curation' });
    expect(res.body.apply).to.include({ applied: true, apply_record_id: 'openai.gpt-4o', active_generation: 1, lifecycle: 'live', next_action: 'none', scope: 'global', skipped: false, write_target: 'resource:model.curation/openai.gpt-4o' });
    const rec = (await f.api.get('/api/resources/model.curation/openai.gpt-4o')).body.record;
    expect(rec.spec).to.deep.equal({ provider_id: 'openai', model_id: 'gpt-4o', hidden: false, featured: true, deprecated: false, default_effort: 'low' });
    expect(await model('openai', 'gpt-4o')).to.deep.equal(res.body.model);
    // the same again changes nothing
    const again = await f.api.post('/api/model-catalog/providers/openai/models/curate', { model_id: 'gpt-4o', featured: true });
    expect(again.body.apply).to.include({ skipped: true, skipped_reason: 'unchanged', active_generation: 1 });
    // GitOps: the record applied with its expected_version is what the catalog shows; the route then reads it back
    const put = await f.api.put('/api/resources/model.curation/openai.gpt-4o?wait=true', { scope: { kind: 'global' }, expected_version: 1, spec: { ...rec.spec, featured: false, hidden: true } });
    expect(put.status).to.equal(200);
    const hidden = await model('openai', 'gpt-4o');
    expect(hidden).to.include({ hidden: true, featured: false, curated: false, default_reasoning_effort: 'low' });
    expect((await f.api.get('/api/model-catalog/models')).body.models.map((m: any) => m.model_id)).to.not.include('gpt-4o');
    const stale = await f.api.put('/api/resources/model.curation/openai.gpt-4o', { scope: { kind: 'global' }, expected_version: 1, spec: rec.spec });
    expect(stale.status).to.equal(409);
    expect((await f.api.get('/api/resources/model.curation/openai.gpt-4o')).body.record.spec.hidden).to.equal(true);
    // a record written by GitOps for another model, then curated through the route: one record, updated at its version
    await f.api.put('/api/resources/model.curation/gitops-mini?wait=true', { scope: { kind: 'global' }, expected_version: 0, spec: { provider_id: 'openai', model_id: 'gpt-4o-mini', deprecated: true } });
    expect(await model('openai', 'gpt-4o-mini')).to.include({ deprecated: true, curated: true });
    const viaRoute = await f.api.post('/api/model-catalog/providers/openai/models/curate', { model_id: 'gpt-4o-mini', featured: true });
    expect(viaRoute.body.apply).to.include({ apply_record_id: 'gitops-mini', active_generation: 2 });
    expect(viaRoute.body.model).to.include({ deprecated: true, featured: true });
    expect((await f.api.get('/api/resources/model.curation')).body.records.map((r: any) => r.id)).to.deep.equal(['gitops-mini', 'openai.gpt-4o']);
  });

  it('refuses bad curations with a clear status and writes nothing', async () => {
    const cases: [string, unknown, number, string][] = [
      ['openai', {}, 422, 'invalid_curation'],
      ['openai', { model_id: 'gpt-4o', hidden: 'yes' }, 422, 'invalid_curation'],
      ['openai', { model_id: 'gpt-4o', default_effort: 'max' }, 422, 'invalid_curation'],
      ['openai', { model_id: 'gpt-4o', colour: 'red' }, 422, 'unknown_field'],
      ['openai', { model_id: 'no-such-model' }, 404, 'model_not_found'],
      ['nobody', { model_id: 'gpt-4o' }, 404, 'provider_not_found'],
      ['Bad', { model_id: 'gpt-4o' }, 400, 'invalid_provider_id'],
      // past the documented 253 characters: refused as such, not looked up
      ['openai', { model_id: 'm'.repeat(254) }, 422, 'invalid_curation'],
      ['p'.repeat(254), { model_id: 'gpt-4o' }, 400, 'invalid_provider_id'],
    ];
    for (const [p, body, status, code] of cases) {
      const res = await f.api.post(`/api/model-catalog/providers/${p}/models/curate`, body);
      expect(res.status, JSON.stringify(res.body)).to.equal(status);
      expect(res.body.diagnostic.code).to.equal(code);
      if (status === 422 && typeof (body as any).model_id === 'string' && (body as any).model_id.length > 253) expect(res.body.diagnostic.evidence).to.deep.equal({ model_id: 'must be at most 253 characters' });
    }
    const workspaceScoped = await f.api.put('/api/resources/model.curation/ws-one', { scope: { kind: 'workspace', id: f.ws.id }, expected_version: 0, spec: { provider_id: 'openai', model_id: 'gpt-4o' } });
    expect(workspaceScoped.status).to.equal(422);
    expect(workspaceScoped.body.diagnostic.evidence).to.have.property('spec.scope');
    expect((await f.api.get('/api/resources/model.curation')).body.records).to.deep.equal([]);
  });

  it('GET /api/openai/v1/models is read by the openai client: the curated models, hidden ones left out; errors in OpenAI\'s shape', async () => {
    await f.api.post('/api/model-catalog/providers/openai/models/curate', { model_id: 'gpt-4o-mini', hidden: true });
    const client = new OpenAI({ apiKey: 'unused', baseURL: `${f.service.url}/api/openai/v1` });
    const ids: string[] = [];
    for await (const m of client.models.list()) {
      ids.push(m.id);
      expect(m.object).to.equal('model');
      expect(m.owned_by).to.equal('openai');
    }
    const curated = (await f.api.get('/api/model-catalog/models')).body.models.map((m: any) => m.model_id);
    expect(ids).to.deep.equal(curated);
    expect(ids).to.include.members(['gpt-4o', 'fixture-only-1']).and.not.include('gpt-4o-mini');
    const bad = await client.models.list({ query: { provider_id: 'Bad!' } } as any).catch((e) => e);
    expect(bad).to.be.instanceOf(OpenAI.BadRequestError);
    expect(bad.status).to.equal(400);
    expect(bad.error).to.deep.equal({ message: 'provider_id "Bad!" must match ^[a-z0-9][a-z0-9_-]*$', type: 'invalid_request_error', param: null, code: 'invalid_request' });
    const missing = await f.api.get('/api/openai/v1/engines');
    expect(missing.status).to.equal(404);
    expect(missing.body).to.deep.equal({ error: { message: 'no route for GET /api/openai/v1/engines', type: 'invalid_request_error', param: null, code: 'not_found' } });
  });

  it('a model.curation record of a model the catalog does not know says so in its status (a warning, still Ready), and clears once a refresh lists it', async () => {
    const put = await f.api.put('/api/resources/model.curation/openai.typo?wait=true', { scope: { kind: 'global' }, expected_version: 0, spec: { provider_id: 'openai', model_id: 'gpt-4o-typo', featured: true } });
    expect(put.status).to.equal(201);
    const cond = async () => Object.fromEntries((await f.api.get('/api/resources/model.curation/openai.typo/status')).body.status.conditions.map((c: any) => [c.type, c]));
    const before = await cond();
    expect(before.Ready.status).to.equal('True');
    expect(before.ModelKnown).to.include({ status: 'False', reason: 'ModelNotInCatalog' });
    expect(before.ModelKnown.message).to.include('gpt-4o-typo').and.include('openai');
    expect(await model('openai', 'gpt-4o-typo')).to.equal(undefined);
    const known = await f.api.put('/api/resources/model.curation/openai.known?wait=true', { scope: { kind: 'global' }, expected_version: 0, spec: { provider_id: 'openai', model_id: 'gpt-4o', featured: true } });
    expect(known.status).to.equal(201);
    expect(Object.fromEntries((await f.api.get('/api/resources/model.curation/openai.known/status')).body.status.conditions.map((c: any) => [c.type, c])).ModelKnown).to.include({ status: 'True', reason: 'ModelInCatalog' });
    up.models = [...up.models, 'gpt-4o-typo'];
    expect((await f.api.post('/api/model-catalog/providers/openai/models/refresh', { force: true })).status).to.equal(200);
    await eventually(async () => expect((await cond()).ModelKnown.status).to.equal('True'));
    expect(await model('openai', 'gpt-4o-typo')).to.include({ featured: true, curated: true });
  });

  it('an agent naming a model the catalog does not know says so in its status (a warning, still Ready); roles too', async () => {
    const put = (id: string, model: string) => f.api.put(`/api/resources/agent/${id}?wait=true`, { scope: { kind: 'global' }, expected_version: 0, spec: { name: id, prompt: 'p', provider: 'openai', model } });
    expect((await put('known', 'fixture-only-1')).status).to.equal(201);
    expect((await put('unknown', 'gpt-99-imaginary')).status).to.equal(201);
    const cond = async (id: string) => Object.fromEntries((await f.api.get(`/api/resources/agent/${id}/status`)).body.status.conditions.map((c: any) => [c.type, c]));
    const known = await cond('known');
    expect(known.ModelKnown).to.include({ status: 'True', reason: 'ModelInCatalog' });
    const unknown = await cond('unknown');
    expect(unknown.Ready.status).to.equal('True');
    expect(unknown.ModelKnown).to.include({ status: 'False', reason: 'ModelNotInCatalog' });
    expect(unknown.ModelKnown.message).to.include('gpt-99-imaginary');
    // the provider starts listing it: a refresh re-reconciles the agents
    up.models = [...up.models, 'gpt-99-imaginary'];
    expect((await f.api.post('/api/model-catalog/providers/openai/models/refresh', { force: true })).status).to.equal(200);
    await eventually(async () => expect((await cond('unknown')).ModelKnown.status).to.equal('True'));
    writeSettings(f.dataDir, `${providerYaml('openai', up.url)}roles:\n  session:\n    provider: openai\n    model: gpt-4o\n    fallback_chain:\n      - {provider: openai, model: gpt-4o-mini}\n      - {provider: openai, model: not-a-model}\n`);
    const role = (await f.api.get('/api/roles/session')).body.role;
    const unknownModels = role.diagnostics.filter((d: any) => d.code === 'role_model_unknown').map((d: any) => d.message);
    expect(unknownModels).to.have.length(1);
    expect(unknownModels[0]).to.include('fallback_chain[1]').and.include('openai/not-a-model');
  });

  it('agents reach the catalog through the svc__provider_models native tools', async () => {
    const invoke = (id: string, input: unknown) => f.api.post(`/api/tools/${id}/invoke`, { input });
    const list = await invoke('svc__provider_models_list', { provider_id: 'openai' });
    expect(list.status, JSON.stringify(list.body)).to.equal(200);
    expect(list.body.result.structured.models.map((m: any) => m.model_id)).to.include.members(['gpt-4o', 'fixture-only-1']);
    const status = await invoke('svc__provider_models_status', { provider_id: 'openai' });
    expect(status.body.result.structured.sources.find((s: any) => s.source_id === 'provider_live:openai')).to.include({ refresh_state: 'succeeded' });
    const bad = await invoke('svc__provider_models_status', { provider_id: 'nobody' });
    expect(bad.status).to.equal(400);
    expect(bad.body.error.details).to.include({ code: 'provider_not_found' });
    const refresh = (await f.api.get('/api/tools/svc__provider_models_refresh')).body.tool.descriptor;
    expect(refresh).to.include({ risk: 'mutating', read_only: false });
    expect(refresh.toolsets).to.deep.equal(['svc__provider_models']);
  });

  it('the workspace snapshot lists the configured providers with their catalog status, and the providers agents name', async () => {
    await f.api.put('/api/resources/agent/a1?wait=true', { scope: { kind: 'global' }, expected_version: 0, spec: { name: 'a1', prompt: 'p', provider: 'local' } });
    const snap = (await f.api.get(`/api/workspaces/${f.ws.id}`)).body;
    expect(snap.providers.map((p: any) => p.name)).to.deep.equal(['builtin', 'local', 'openai']);
    const openai = snap.providers.find((p: any) => p.name === 'openai');
    expect(openai).to.include({ auth_mode: 'api_key', display_name: 'openai', env_policy: 'allowlist', harness: 'acp', home_policy: 'inherit', runtime_provider: 'openai' });
    expect(openai.status).to.include({ configured: true, kind: 'openai-compatible', base_url: `${up.url}/v1`, refresh_state: 'succeeded', row_count: 3, last_error: '' });
    expect(snap.providers.find((p: any) => p.name === 'local').status).to.include({ configured: false });
    expect(JSON.stringify(snap)).to.not.include('SVC_SECRET_CATALOG_KEY').and.not.include(TEST_KEY);
  });
});

describe('Model catalog: the API key never reaches an answer, an event or a log line', function () {
  this.timeout(60_000);
  const redis = new RedisServer();
  let dir = '';
  let service: Service;
  const lines: string[] = [];
  before(async () => {
    await redis.start();
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-catalog-'));
    writeSettings(dir, `${providerYaml('openai', up.url)}${providerYaml('claude', up.url, 'SVC_SECRET_CATALOG_KEY', 'anthropic').replace('providers:\n', '')}`);
    const tokens = path.join(dir, 'tokens.yaml');
    writeFileSync(tokens, `tokens:\n  - {name: ops, role: operator, sha256: ${sha256('o-secret')}}\n  - {name: viewer, role: reader, sha256: ${sha256('r-secret')}}\n`);
    const sink = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    service = new Service(loadConfig({ REDIS_URL: redis.url, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'trace', DATA_DIR: dir, AUTH_MODE: 'token', AUTH_TOKENS_FILE: tokens, EXEC_ALLOWLIST: '*', EGRESS_ALLOWLIST: '127.0.0.1' }), sink);
    await service.start();
  });
  after(async () => {
    await service?.stop();
    await redis.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refreshes with the key (Bearer and x-api-key), and no answer, event or log line holds it, even when the provider echoes it', async () => {
    const api = new Client(service.url);
    const auth = { authorization: 'Bearer o-secret' };
    const bodies: string[] = [];
    const call = async (method: string, p: string, body?: unknown) => {
      const res = await api.call(method, p, body, auth);
      bodies.push(JSON.stringify(res.body), JSON.stringify([...res.headers]));
      return res;
    };
    expect((await call('POST', '/api/model-catalog/models/refresh', { force: true })).status).to.equal(200);
    expect((await call('GET', '/api/model-catalog/providers/claude/models')).body.models.map((m: any) => m.model_id)).to.include('fixture-only-1');
    up.status = 500; // the fixture's error echoes the key it was sent
    try {
      expect((await call('POST', '/api/model-catalog/models/refresh', { force: true })).status).to.equal(503);
    } finally {
      up.status = 200;
    }
    for (const p of ['/api/model-catalog/models?include_stale=true', '/api/model-catalog/sources/status', '/api/model-catalog/providers/openai/models/status', '/api/openai/v1/models']) await call('GET', p);
    const snap = await call('GET', '/api/workspaces');
    expect(snap.status).to.equal(200);
    const unauth = await api.get('/api/openai/v1/models');
    expect(unauth.status).to.equal(401);
    expect(unauth.body.error).to.include({ type: 'invalid_request_error', code: 'unauthorized' });
    const events = JSON.stringify(await service.bus!.latest(500));
    expect(events).to.include('provider.unavailable');
    // NOTE: the failing answer's body (which echoes the key) is never read: the status says the class and the code.
    expect(bodies.join('\n')).to.include('answered HTTP 500 (http_status)').and.not.include('upstream trouble');
    expect(lines.join('')).to.include('model catalog refresh failed');
    for (const [what, text] of [['answers', bodies.join('\n')], ['events', events], ['log lines', lines.join('')]]) expect(text, what).to.not.include(TEST_KEY);
  });

  it('a reader may list but not force a refresh through ?refresh=true (403, the provider is not asked); an operator may', async () => {
    const api = new Client(service.url);
    const reader = { authorization: 'Bearer r-secret' };
    const asked = up.requests;
    for (const p of ['/api/model-catalog/models?refresh=true', '/api/model-catalog/providers/openai/models?refresh=true']) {
      const res = await api.call('GET', p, undefined, reader);
      expect(res.status, p).to.equal(403);
      expect(res.body.diagnostic.evidence).to.deep.equal({ required_role: 'operator' });
    }
    expect(up.requests).to.equal(asked);
    expect((await api.call('GET', '/api/model-catalog/models', undefined, reader)).status).to.equal(200);
    expect((await api.call('GET', '/api/model-catalog/models?refresh=false', undefined, reader)).status).to.equal(200);
    const op = await api.call('GET', '/api/model-catalog/providers/openai/models?refresh=true', undefined, { authorization: 'Bearer o-secret' });
    expect(op.status).to.equal(200);
    expect(up.requests).to.equal(asked + 1);
  });
});
