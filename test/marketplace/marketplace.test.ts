import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { decodeMarketSettings, DEFAULT_LIMITS } from '../../runtime/marketplace/settings.ts';
import { packageOf } from '../../runtime/marketplace/mcp-registry.ts';
import { eventPatternProblem } from '../../codecs/event-names.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { IndexFixture, registryEntry, RegistryFixture, skillArchive } from './fixtures.ts';

describe('marketplace sources, sync and pages (real Redis, fixture registry and index servers)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture({ autoStart: false, workspace: false }).install();
  const registry = new RegistryFixture();
  const index = new IndexFixture();
  before(async () => { await registry.start(); await index.start(); });
  after(async () => { await registry.stop(); await index.stop(); });
  beforeEach(() => {
    registry.servers = [];
    registry.failing = false;
    registry.requests.length = 0;
    index.index = { skills: [] };
    index.failWith = 0;
    index.requests.length = 0;
  });

  const sources = (extra: unknown[] = []) => [
    { id: 'official', type: 'mcp-registry', url: registry.url },
    { id: 'team', type: 'index', url: `${index.url}/index.json` },
    ...extra,
  ];
  const start = async (list: unknown[] = sources(), more: Record<string, unknown> = {}) => {
    // NOTE: refresh_interval 0: the schedule is off, so each test's syncs are the ones it asks for.
    writeFileSync(path.join(f.dataDir, 'config.yaml'), stringify({ marketplace: { refresh_interval: '0s', ...more, sources: list } }));
    await f.start();
  };
  const refresh = async (q = '') => {
    const res = await f.api.post(`/api/marketplace/refresh${q}`, {});
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return Object.fromEntries((res.body.kinds as any[]).map((k) => [k.kind, k]));
  };

  it('pages through 250 registry entries with cursors (limit 1-100), mapping npm, pypi, oci and remote entries', async () => {
    for (let i = 0; i < 247; i++) registry.servers.push(registryEntry(`io.github.acme/server-${String(i).padStart(3, '0')}`));
    registry.servers.push(registryEntry('io.github.acme/py', { packages: [{ registryType: 'pypi', identifier: 'mcp-py', version: '2.0.0', transport: { type: 'stdio' }, environmentVariables: [{ name: 'PY_HOME', description: 'where', default: '/opt' }] }] }));
    registry.servers.push(registryEntry('io.github.acme/oci', { packages: [{ registryType: 'oci', identifier: 'docker.io/acme/mcp', version: '3.1.0', transport: { type: 'stdio' }, environmentVariables: [{ name: 'API_KEY', isRequired: true, isSecret: true }] }] }));
    registry.servers.push(registryEntry('io.github.acme/remote', { remotes: [{ type: 'streamable-http', url: 'https://mcp.example.com/mcp' }] }));
    registry.servers.push(registryEntry('io.github.acme/gone', { status: 'deleted' }));
    await start();
    // NOTE: a controller syncs every source when it starts, so the first refresh may find nothing new.
    const kinds = await refresh('?kind=mcp');
    expect(kinds.mcp).to.include({ entry_count: 250, stale: false, error_class: '' });
    expect(kinds.mcp.outcome).to.be.oneOf(['updated', 'unchanged']);
    // The registry was read in pages of 100 with version=latest, following nextCursor.
    const reads = registry.listRequests();
    expect(reads.slice(0, 3).map((u) => [u.searchParams.get('limit'), u.searchParams.get('updated_since')])).to.deep.equal([['100', null], ['100', null], ['100', null]]);
    expect(reads.every((u) => u.searchParams.get('version') === 'latest')).to.equal(true);
    expect(reads[1].searchParams.get('cursor')).to.be.a('string').and.not.equal('');

    const seen: string[] = [];
    let cursor = '';
    for (let page = 0; page < 5; page++) {
      const res = await f.api.get(`/api/marketplace/mcp?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.status).to.equal(200);
      expect(res.body.total).to.equal(250);
      seen.push(...res.body.items.map((e: any) => e.entry_id));
      cursor = res.body.next_cursor;
      if (!cursor) break;
    }
    expect(seen).to.have.length(250);
    expect(new Set(seen).size).to.equal(250);
    expect(seen).to.not.include('io.github.acme_gone');

    for (const bad of ['0', '101', 'x', '-1']) expect((await f.api.get(`/api/marketplace/mcp?limit=${bad}`)).status, bad).to.equal(400);
    expect((await f.api.get('/api/marketplace/mcp?cursor=bogus')).status).to.equal(400);
    expect((await f.api.get('/api/marketplace/tools')).status).to.equal(404);
    // A cursor belongs to its kind: one kind's next_cursor on another kind is a 400, not that kind's page 2.
    index.addSkill('@acme/one', '1.0.0', skillArchive('one'));
    index.addSkill('@acme/two', '1.0.0', skillArchive('two'));
    expect((await refresh('?kind=skill')).skill.entry_count).to.equal(2);
    const skillCursor = (await f.api.get('/api/marketplace/skill?limit=1')).body.next_cursor;
    const mcpCursor = (await f.api.get('/api/marketplace/mcp?limit=1')).body.next_cursor;
    expect(skillCursor).to.be.a('string').and.not.equal('');
    for (const [kind, c] of [['mcp', skillCursor], ['skill', mcpCursor], ['extension', mcpCursor]]) {
      const res = await f.api.get(`/api/marketplace/${kind}?limit=1&cursor=${c}`);
      expect(res.status, `${kind}: ${JSON.stringify(res.body)}`).to.equal(400);
      expect(res.body.diagnostic).to.include({ code: 'invalid_cursor' });
    }
    expect((await f.api.get(`/api/marketplace/skill?limit=1&cursor=${skillCursor}`)).body.items.map((e: any) => e.entry_id)).to.deep.equal(['acme_two']);

    const npm = (await f.api.get('/api/marketplace/mcp/io.github.acme_server-000')).body;
    expect(npm.entry).to.include({ kind: 'mcp', install_slug: 'io.github.acme/server-000', source: 'official', installed: false, transport: 'stdio', version: '1.0.0' });
    expect(npm.mcp).to.include({ command: 'npx', transport: 'stdio', default_scope: 'global' });
    expect(npm.mcp.args).to.deep.equal(['-y', '@example/server-000@1.0.0']);
    const py = (await f.api.get('/api/marketplace/mcp/io.github.acme_py')).body.mcp;
    expect(py).to.deep.include({ command: 'uvx', args: ['mcp-py==2.0.0'] });
    expect(py.env).to.deep.equal([{ name: 'PY_HOME', default: '/opt', prompt: 'where', required: false, secret: false }]);
    const oci = (await f.api.get('/api/marketplace/mcp/io.github.acme_oci')).body.mcp;
    expect(oci).to.deep.include({ command: 'docker', args: ['run', '-i', '--rm', '-e', 'API_KEY', 'docker.io/acme/mcp:3.1.0'] });
    expect(oci.env[0]).to.include({ name: 'API_KEY', required: true, secret: true });
    const remote = (await f.api.get('/api/marketplace/mcp/io.github.acme_remote')).body.mcp;
    expect(remote).to.include({ transport: 'http', url: 'https://mcp.example.com/mcp', command: '' });
    expect((await f.api.get('/api/marketplace/mcp/io.github.acme_gone')).status).to.equal(404);
  });

  it('an incremental sync asks for updated_since and applies changes and deletions', async () => {
    registry.servers.push(registryEntry('io.github.acme/alpha'), registryEntry('io.github.acme/beta'), registryEntry('io.github.acme/gamma'));
    await start();
    expect((await refresh('?kind=mcp')).mcp).to.include({ entry_count: 3, stale: false });
    const later = new Date(Date.now() + 1000).toISOString();
    registry.servers[0] = registryEntry('io.github.acme/alpha', { version: '1.1.0', updatedAt: later });
    registry.servers[1] = registryEntry('io.github.acme/beta', { status: 'deleted', updatedAt: later });
    registry.requests.length = 0;
    const kinds = await refresh('?kind=mcp');
    expect(kinds.mcp).to.include({ entry_count: 2, outcome: 'updated' });
    const [read] = registry.listRequests();
    expect(read.searchParams.get('updated_since')).to.match(/^\d{4}-\d\d-\d\dT/);
    expect((await f.api.get('/api/marketplace/mcp/io.github.acme_alpha')).body.entry.version).to.equal('1.1.0');
    expect((await f.api.get('/api/marketplace/mcp/io.github.acme_beta')).status).to.equal(404);
    expect((await f.api.get('/api/marketplace/mcp/io.github.acme_gamma')).status).to.equal(200);
    // Nothing changed since: an incremental sync with no rows is unchanged.
    expect((await refresh('?kind=mcp')).mcp).to.include({ entry_count: 2, outcome: 'unchanged' });
  });

  it('one failing kind is stale with its error class while the other kinds answer', async () => {
    registry.servers.push(registryEntry('io.github.acme/alpha'));
    index.addSkill('@acme/pdf', '1.0.0', skillArchive('pdf'));
    await start();
    expect((await refresh()).mcp.entry_count).to.equal(1);
    registry.failing = true;
    index.addSkill('@acme/csv', '1.0.0', skillArchive('csv'));
    const kinds = await refresh();
    expect(kinds.mcp).to.include({ outcome: 'failed', stale: true, error_class: 'http_status', entry_count: 1 });
    expect(kinds.skill).to.include({ outcome: 'updated', stale: false, entry_count: 2 });
    const search = (await f.api.get('/api/marketplace/search')).body;
    const byKind = Object.fromEntries((search.kinds as any[]).map((k) => [k.kind, k]));
    expect(byKind.mcp).to.include({ stale: true, error_class: 'http_status' });
    expect(byKind.mcp.error).to.include('500');
    // NOTE: the stale kind still answers its last good rows.
    expect(byKind.mcp.items.map((e: any) => e.entry_id)).to.deep.equal(['io.github.acme_alpha']);
    expect(byKind.skill).to.include({ stale: false, error_class: '' });
    expect(byKind.skill.items).to.have.length(2);
    // A broken index section fails only that kind of the index.
    index.index = { ...index.index, extensions: 'nope' };
    const again = await refresh();
    expect(again.extension).to.include({ outcome: 'failed', error_class: 'invalid_response' });
    expect(again.skill).to.include({ stale: false });
  });

  it('syncs on the configured schedule, without a refresh', async () => {
    registry.servers.push(registryEntry('io.github.acme/alpha'));
    await start(sources(), { refresh_interval: '1s' });
    registry.servers.push(registryEntry('io.github.acme/beta', { updatedAt: new Date(Date.now() + 500).toISOString() }));
    await eventually(async () => expect((await f.api.get('/api/marketplace/mcp')).body.items.map((e: any) => e.entry_id)).to.have.members(['io.github.acme_alpha', 'io.github.acme_beta']), 10_000, 200);
    expect(registry.listRequests().length).to.be.at.least(2);
  });

  it('an index is fetched with its ETag: an unchanged index answers 304 and the rows stay', async () => {
    index.addSkill('@acme/pdf', '1.0.0', skillArchive('pdf'));
    await start([{ id: 'team', type: 'index', url: `${index.url}/index.json` }]);
    expect((await refresh('?kind=skill')).skill).to.include({ stale: false, entry_count: 1 });
    index.requests.length = 0;
    expect((await refresh('?kind=skill')).skill).to.include({ outcome: 'unchanged', entry_count: 1 });
    expect(index.requests[0].headers['if-none-match']).to.be.a('string');
    expect((await f.api.get('/api/marketplace/skill')).body.items[0]).to.include({ entry_id: 'acme_pdf', install_slug: '@acme/pdf' });
  });

  it('a duplicate entry goes to the source with the higher priority', async () => {
    index.addSkill('@acme/pdf', '1.0.0', skillArchive('pdf'));
    await start([
      { id: 'low', type: 'index', url: `${index.url}/index.json`, priority: 1 },
      { id: 'high', type: 'index', url: `${index.url}/index.json?copy`, priority: 5 },
    ]);
    await refresh();
    const page = (await f.api.get('/api/marketplace/skill')).body;
    expect(page.total).to.equal(1);
    expect(page.items[0].source).to.equal('high');
  });

  it('search ranks matches with BM25 and an empty query answers the curated slice (most downloaded first)', async () => {
    registry.servers.push(
      registryEntry('io.github.acme/postgres', { description: 'Query a PostgreSQL database' }),
      registryEntry('io.github.acme/weather', { description: 'Forecasts for any city' }),
      registryEntry('io.github.acme/sqlite', { description: 'A small database in a file' }),
    );
    index.addSkill('@acme/pdf', '1.0.0', skillArchive('pdf'), { extra: { downloads: 5 } });
    index.addSkill('@acme/csv', '1.0.0', skillArchive('csv'), { extra: { downloads: 50 } });
    await start();
    await refresh();
    const db = (await f.api.get('/api/marketplace/search?q=database&limit=10')).body;
    expect(db.query).to.equal('database');
    const mcp = db.kinds.find((k: any) => k.kind === 'mcp');
    expect(mcp.items.map((e: any) => e.entry_id)).to.have.members(['io.github.acme_postgres', 'io.github.acme_sqlite']);
    expect((await f.api.get('/api/marketplace/search?q=postgres')).body.kinds.find((k: any) => k.kind === 'mcp').items[0].entry_id).to.equal('io.github.acme_postgres');
    const idle = (await f.api.get('/api/marketplace/search')).body.kinds.find((k: any) => k.kind === 'skill');
    expect(idle.items.map((e: any) => e.install_slug)).to.deep.equal(['@acme/csv', '@acme/pdf']);
    expect((await f.api.get('/api/marketplace/search?limit=1')).body.kinds.find((k: any) => k.kind === 'skill').items).to.have.length(1);
  });

  it('refuses bad queries with 400 and answers a kind no source serves as not configured', async () => {
    index.index = { bundles: [{ name: 'starter', extension_name: 'acme', description: 'x', profiles: [{ name: 'default', agents: 2 }] }] };
    await start([{ id: 'team', type: 'index', url: `${index.url}/index.json` }]);
    await refresh();
    expect((await f.api.get('/api/marketplace/bundle/acme_starter?installed_name=x')).status).to.equal(400);
    const bundle = (await f.api.get('/api/marketplace/bundle/acme_starter')).body;
    expect(bundle.bundle.profiles[0]).to.include({ name: 'default', agents: 2, jobs: 0 });
    expect((await f.api.get('/api/marketplace/skill?scope=workspace')).status).to.equal(400);
    expect((await f.api.get('/api/marketplace/skill?scope=team')).status).to.equal(400);
    expect((await f.api.post('/api/marketplace/refresh?kind=bundle', {})).status).to.equal(400);
    const mcp = (await f.api.get('/api/marketplace/mcp')).body;
    expect(mcp).to.include({ error_class: 'not_configured', total: null });
    const none = await f.api.post('/api/marketplace/refresh?kind=mcp', {});
    expect(none.body.kinds).to.deep.equal([{ kind: 'mcp', entry_count: 0, error_class: 'not_configured', outcome: 'failed', stale: false }]);
    const skills = await f.api.get('/api/skills/marketplace/search?query=x');
    expect(skills.status).to.equal(200);
  });

  it('answers 503 with a diagnostic when no source serves skills, and when the section is broken', async () => {
    await start([]);
    const res = await f.api.get('/api/skills/marketplace/search?query=pdf');
    expect(res.status).to.equal(503);
    expect(res.body.diagnostic.code).to.equal('marketplace_not_configured');
    expect((await f.api.post('/api/skills/marketplace/install', { slug: '@a/b' })).status).to.equal(503);
    writeFileSync(path.join(f.dataDir, 'config.yaml'), stringify({ marketplace: { sources: [{ id: 'X', type: 'ftp' }] } }));
    const broken = await f.api.get('/api/marketplace/search');
    expect(broken.body.kinds[0].error_class).to.equal('marketplace_config_invalid');
    expect((await f.api.post('/api/marketplace/refresh', {})).status).to.equal(503);
  });
});

describe('marketplace settings and server.json mapping (unit)', () => {
  const cases: { reason: string; given: unknown; want: Record<string, string> | 'ok' }[] = [
    { reason: 'an absent section is no sources', given: undefined, want: 'ok' },
    { reason: 'a source needs a known type and an http(s) URL', given: { sources: [{ id: 'a', type: 'ftp', url: 'x' }] }, want: { 'marketplace.sources[0].type': 'must be mcp-registry or index' } },
    { reason: 'an mcp-registry serves only mcp', given: { sources: [{ id: 'a', type: 'mcp-registry', url: 'http://x', kinds: ['skill'] }] }, want: { 'marketplace.sources[0].kinds': 'a mcp-registry source serves mcp (not skill)' } },
    { reason: 'ids are unique', given: { sources: [{ id: 'a', type: 'index', url: 'http://x' }, { id: 'a', type: 'index', url: 'http://y' }] }, want: { 'marketplace.sources[1].id': 'duplicates source "a"' } },
    { reason: 'unknown fields are refused', given: { sources: [], mirrors: 1 }, want: { 'marketplace.mirrors': 'is not a known field' } },
  ];
  for (const c of cases) {
    it(c.reason, () => {
      const r = decodeMarketSettings(c.given);
      if (c.want === 'ok') expect(r.ok).to.equal(true);
      else expect(r.ok ? {} : r.problems).to.deep.include(c.want);
    });
  }
  it('notification presets may name the skill install events exactly', () => {
    for (const e of ['skill.installed', 'skill.updated', 'skill.removed']) expect(eventPatternProblem(e), e).to.equal(undefined);
    expect(eventPatternProblem('skill.installd')).to.be.a('string');
  });
  it('a settings file may tighten the install limits but not loosen them', () => {
    const r = decodeMarketSettings({ limits: { max_archive_bytes: 10, max_files: 1e9, max_expanded_bytes: 2 ** 40 } });
    expect(r.ok && r.settings.limits).to.include({ maxArchiveBytes: 10, maxFiles: 10_000, maxExpandedBytes: 500 * 1024 * 1024 });
    const tight = decodeMarketSettings({ limits: { max_expansion_ratio: 20, inspect_timeout: '2s', download_timeout: '5s' } });
    expect(tight.ok && tight.settings.limits).to.include({ maxExpansionRatio: 20, inspectTimeoutMs: 2000, downloadTimeoutMs: 5000 });
    // every limit, the download timeout too: a value above the default reads as the default
    const loose = decodeMarketSettings({ limits: { max_expansion_ratio: 5000, inspect_timeout: '1h', download_timeout: '10m' } });
    expect(loose.ok && loose.settings.limits).to.deep.equal(DEFAULT_LIMITS);
    const above = decodeMarketSettings({ limits: { download_timeout: '61s' } });
    expect(above.ok && above.settings.limits.downloadTimeoutMs).to.equal(60_000);
    const bad = decodeMarketSettings({ limits: { max_expansion_ratio: 0, inspect_timeout: 'soon' } });
    expect(bad.ok ? {} : bad.problems).to.deep.equal({ 'marketplace.limits.max_expansion_ratio': 'must be a positive integer', 'marketplace.limits.inspect_timeout': 'must be a positive duration' });
  });
  it('maps named and positional package arguments and leaves out transports it cannot run', () => {
    expect(packageOf({ registryType: 'npm', identifier: 'x', version: '1', transport: { type: 'stdio' }, packageArguments: [{ type: 'named', name: '--port', value: '8080' }, { type: 'positional', valueHint: 'path' }, { type: 'positional', value: 'stdio' }] })!.args)
      .to.deep.equal(['-y', 'x@1', '--port', '8080', 'stdio']);
    expect(packageOf({ registryType: 'nuget', identifier: 'x', version: '1', transport: { type: 'stdio' } })).to.equal(undefined);
    expect(packageOf({ registryType: 'npm', identifier: 'x', version: '1', transport: { type: 'streamable-http' } })).to.equal(undefined);
  });
});
