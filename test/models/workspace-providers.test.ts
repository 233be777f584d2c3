import { expect } from 'chai';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { ProviderFixture, providerYaml, TEST_KEY, writeSettings } from './fixtures.ts';

describe('Model catalog: providers a workspace configures', function () {
  this.timeout(60_000);
  /** The global provider's server, and the server a workspace file names (it must never be asked). */
  const up = new ProviderFixture();
  const elsewhere = new ProviderFixture();
  const f = new ServiceFixture({ env: { SECRET_ENV_ALLOWLIST: 'SVC_SECRET_*' } }).install();
  before(async () => {
    process.env.SVC_SECRET_CATALOG_KEY = TEST_KEY;
    await up.start();
    await elsewhere.start();
  });
  after(async () => {
    await up.stop();
    await elsewhere.stop();
  });
  beforeEach(() => {
    up.requests = 0;
    elsewhere.requests = 0;
    writeSettings(f.dataDir, providerYaml('openai', up.url));
  });

  const writeWorkspaceSettings = (yaml: string) => {
    mkdirSync(path.join(f.root, '.svc'), { recursive: true });
    writeFileSync(path.join(f.root, '.svc', 'config.yaml'), yaml);
  };
  const snapshotProviders = async () => (await f.api.get(`/api/workspaces/${f.ws.id}`)).body.providers as any[];

  it('a provider only a workspace configures is shown disabled with the reason, and is never fetched (not on demand, not on a schedule)', async () => {
    writeWorkspaceSettings(`providers:\n  - {name: local, kind: openai-compatible, base_url: ${elsewhere.url}/v1, api_key: env:SVC_SECRET_CATALOG_KEY}\n`);
    await f.restart({ MODEL_CATALOG_REFRESH: '1s' });
    const all = await f.api.post('/api/model-catalog/models/refresh', { force: true });
    expect(all.status, JSON.stringify(all.body)).to.equal(200);
    expect(all.body.sources.map((s: any) => s.source_id)).to.not.include('provider_live:local');
    // ticks keep refreshing the global provider: the workspace's is still never asked
    await eventually(async () => expect(up.requests).to.be.at.least(3), 20_000, 100);
    expect(elsewhere.requests, 'requests to the URL the workspace file names').to.equal(0);
    const local = (await snapshotProviders()).find((p) => p.name === 'local');
    expect(local.status).to.include({ configured: true, scope: 'workspace', kind: 'openai-compatible', base_url: `${elsewhere.url}/v1`, refresh_state: 'disabled', row_count: 0, last_refresh: '' });
    expect(local.status.last_error).to.match(/^not refreshed: provider "local" is configured only in this workspace's \.svc\/config\.yaml, .* add it there to have it refreshed$/);
    expect(local.status.last_error).to.include(path.join(f.dataDir, 'config.yaml'));
    for (const [method, p] of [['GET', '/api/model-catalog/providers/local/models'], ['POST', '/api/model-catalog/providers/local/models/refresh']]) {
      const res = await f.api.call(method, p, method === 'POST' ? {} : undefined);
      expect(res.status, p).to.equal(404);
      expect(res.body.diagnostic.code).to.equal('provider_not_found');
      expect(res.body.error).to.include('a workspace\'s .svc/config.yaml providers are not refreshed');
    }
    expect(elsewhere.requests).to.equal(0);
  });

  it('a workspace may relabel a global provider; a base_url or api_key it sets is not applied, and the status says so', async () => {
    expect((await f.api.post('/api/model-catalog/providers/openai/models/refresh', {})).status).to.equal(200);
    writeWorkspaceSettings(`providers:\n  - {name: openai, display_name: Team OpenAI, harness: claude-code}\n`);
    const relabelled = (await snapshotProviders()).find((p) => p.name === 'openai');
    expect(relabelled).to.include({ display_name: 'Team OpenAI', harness: 'claude-code', auth_mode: 'api_key' });
    expect(relabelled.status).to.deep.include({ scope: 'global', base_url: `${up.url}/v1`, refresh_state: 'succeeded', row_count: 3, warnings: [] });

    writeWorkspaceSettings(`providers:\n  - {name: openai, display_name: Team OpenAI, base_url: ${elsewhere.url}/v1, api_key: env:SVC_SECRET_OTHER_KEY}\n`);
    const redirected = (await snapshotProviders()).find((p) => p.name === 'openai');
    expect(redirected.display_name).to.equal('Team OpenAI');
    expect(redirected.status).to.deep.include({ scope: 'global', kind: 'openai-compatible', base_url: `${up.url}/v1`, refresh_state: 'succeeded' });
    expect(redirected.status.warnings).to.deep.equal([
      'this workspace\'s base_url for provider "openai" is not applied: the model catalog uses the global settings file\'s',
      'this workspace\'s api_key for provider "openai" is not applied: the model catalog uses the global settings file\'s',
    ]);
    const res = await f.api.post('/api/model-catalog/providers/openai/models/refresh', { force: true });
    expect(res.status).to.equal(200);
    expect(up.requests).to.equal(2);
    expect(elsewhere.requests, 'the key went where the workspace file said').to.equal(0);
    // the catalog itself is the global one: the workspace's relabelling is its snapshot's only
    const gpt = (await f.api.get('/api/model-catalog/providers/openai/models')).body.models.find((m: any) => m.model_id === 'gpt-4o');
    expect(gpt).to.include({ availability_state: 'available_live' });
    expect(JSON.stringify(await snapshotProviders())).to.not.include(TEST_KEY);
  });

  it('a literal key in a workspace file is refused like one in the global file: the entry is left out, its value never repeated', async () => {
    writeWorkspaceSettings(`providers:\n  - {name: leaky, base_url: ${elsewhere.url}/v1, api_key: sk-literal-0000111122223333}\n`);
    const providers = await snapshotProviders();
    expect(providers.map((p) => p.name)).to.not.include('leaky');
    expect(JSON.stringify(providers)).to.not.include('sk-literal-0000111122223333');
    expect(elsewhere.requests).to.equal(0);
  });
});
