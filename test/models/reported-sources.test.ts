import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { AcpSessionSource, acpSourceId, MAX_ACP_SOURCES } from '../../runtime/models/acp-session.ts';
import { acpCapsOf, reportsModels } from '../../runtime/sessions/acp-caps.ts';
import { PRIORITY } from '../../runtime/models/types.ts';
import { ModelCatalogStore } from '../../store/model-catalog-store.ts';
import { childPids } from '../helpers/agent-processes.ts';
import { SCRIPTED, TSX_LOADER } from '../helpers/agents.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { ProviderFixture, providerYaml, TEST_KEY, writeSettings } from './fixtures.ts';

describe('ACP answers: the model state an agent reports (unit)', () => {
  const table: { reason: string; given: unknown; want: { models: string[]; names?: string[]; reports: boolean; modes?: string[]; options?: number } }[] = [
    {
      reason: 'the stable shape: a select config option of category model, grouped values flattened',
      given: { sessionId: 's', configOptions: [{ type: 'select', id: 'llm', name: 'Model', category: 'model', currentValue: 'a', options: [{ group: 'g', name: 'G', options: [{ value: 'a', name: 'Model A' }, { value: 'b', name: 'b' }] }] }] },
      want: { models: ['a', 'b'], names: ['Model A', ''], reports: true, options: 1 },
    },
    {
      reason: 'the earlier unstable shape that agents in use send: models.availableModels',
      given: { sessionId: 's', models: { currentModelId: 'x', availableModels: [{ modelId: 'x', name: 'X' }, { modelId: 'y', name: 'Y' }] }, modes: { currentModeId: 'ask', availableModes: [{ id: 'ask', name: 'Ask' }] } },
      want: { models: ['x', 'y'], names: ['X', 'Y'], reports: true, modes: ['ask'], options: 0 },
    },
    {
      reason: 'both shapes: deduplicated, the config option first',
      given: { configOptions: [{ type: 'select', id: 'model', currentValue: 'a', options: [{ value: 'a', name: 'A' }] }], models: { availableModels: [{ modelId: 'a' }, { modelId: 'c' }] } },
      want: { models: ['a', 'c'], reports: true, options: 1 },
    },
    {
      reason: 'an option of another category is shown, but is no model list',
      given: { configOptions: [{ type: 'select', id: 'effort', category: 'thought_level', currentValue: 'low', options: [{ value: 'low', name: 'Low' }] }, { type: 'boolean', id: 'web', name: 'Web', currentValue: true }] },
      want: { models: [], reports: false, options: 2 },
    },
    {
      reason: 'an explicit empty list is a report (the agent offers none now); no field is no report',
      given: { models: { currentModelId: '', availableModels: [] } },
      want: { models: [], reports: true },
    },
    { reason: 'a bare session id reports nothing', given: { sessionId: 's' }, want: { models: [], reports: false } },
    {
      reason: 'malformed entries are skipped, never trusted',
      given: { models: { availableModels: [null, 'x', { modelId: 7 }, { modelId: '  ok  ', name: 42 }] }, configOptions: 'nope', modes: { availableModes: [{}] } },
      want: { models: ['ok'], names: [''], reports: true, modes: [] },
    },
  ];
  for (const t of table) {
    it(t.reason, () => {
      const caps = acpCapsOf(t.given);
      expect(caps.supported_models).to.deep.equal(t.want.models);
      if (t.want.names) expect(caps.models.map((m) => m.name)).to.deep.equal(t.want.names);
      if (t.want.modes) expect(caps.supported_modes).to.deep.equal(t.want.modes);
      if (t.want.options !== undefined) expect(caps.config_options).to.have.length(t.want.options);
      expect(reportsModels(t.given)).to.equal(t.want.reports);
    });
  }

  it('bounds what an agent says: 256 models at most, ids of 253 characters at most', () => {
    const caps = acpCapsOf({ models: { availableModels: Array.from({ length: 400 }, (_, i) => ({ modelId: i === 0 ? 'x'.repeat(300) : `m${i}` })) } });
    expect(caps.supported_models).to.have.length(256);
    expect(caps.supported_models[0]).to.have.length(253);
  });

  it('an agent name becomes a source id of the catalog grammar, distinct names staying distinct', () => {
    expect(acpSourceId('scripted')).to.equal('acp_session:scripted');
    const a = acpSourceId('Reviewer.v2');
    const b = acpSourceId('reviewer-v2');
    expect(a).to.match(/^acp_session:reviewer-v2-[0-9a-f]{8}$/);
    expect(b).to.equal('acp_session:reviewer-v2');
    expect(a).to.not.equal(b);
  });
});

/** acpSchema validates a value against one definition of ACP's JSON schema (the SDK 2.4.0 package's). */
const acpSchema = createRequire(import.meta.url)('@agentclientprotocol/sdk/schema/v1/schema.json') as { $defs: Record<string, unknown> };
const ajv = new Ajv2020({ strict: false, allErrors: true });
const validAcp = (def: string, value: unknown) => {
  const ok = ajv.validate({ $defs: acpSchema.$defs, $ref: `#/$defs/${def}` }, value);
  return ok ? '' : ajv.errorsText();
};

/** Step is one request to send, made from the answers so far (a later request names the session the first opened). */
type Step = (answers: any[]) => [string, unknown];

/**
 * talk runs the built-in agent with `env` and sends it requests in order over ACP's stdio framing; it answers each
 * result (or `{error}`), and last the text of the agent messages it sent.
 */
async function talk(env: Record<string, string>, steps: Step[]): Promise<any[]> {
  const child = spawn(process.execPath, ['--import', TSX_LOADER, SCRIPTED], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['pipe', 'pipe', 'ignore'] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const answers: any[] = [];
  const said: string[] = [];
  try {
    for (const [i, step] of steps.entries()) {
      const [method, params] = step(answers);
      child.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', id: i + 1, method, params })}\n`);
      for (;;) {
        const msg = JSON.parse(String((await lines.next()).value));
        if (msg.method === 'session/update' && msg.params.update.sessionUpdate === 'agent_message_chunk') said.push(msg.params.update.content.text);
        if (msg.id !== i + 1) continue;
        answers.push(msg.error ? { error: msg.error } : msg.result);
        break;
      }
    }
  } finally {
    child.kill();
  }
  return [...answers, said];
}

describe('The scripted agent reports its models in valid ACP (SDK 2.4.0 schema)', function () {
  this.timeout(30_000);
  const open: Step[] = [() => ['initialize', { protocolVersion: 1, clientCapabilities: {} }], () => ['session/new', { cwd: '/tmp', mcpServers: [] }]];
  const inSession = (method: string, params: object): Step => (a) => [method, { sessionId: a[1].sessionId, ...params }];

  it('by default as a select config option of category model, which session/set_config_option changes', async () => {
    const [, created, set, unknown, prompted, said] = await talk({ SCRIPTED_MODELS: 'm-a=Model A,m-b' }, [
      ...open,
      inSession('session/set_config_option', { configId: 'model', value: 'm-b' }),
      inSession('session/set_config_option', { configId: 'model', value: 'm-z' }),
      inSession('session/prompt', { prompt: [{ type: 'text', text: '/model' }] }),
    ]);
    expect(validAcp('NewSessionResponse', created)).to.equal('');
    expect(created.configOptions).to.deep.equal([{ type: 'select', id: 'model', name: 'Model', category: 'model', currentValue: 'm-a', options: [{ value: 'm-a', name: 'Model A' }, { value: 'm-b', name: 'm-b' }] }]);
    expect(acpCapsOf(created).supported_models).to.deep.equal(['m-a', 'm-b']);
    expect(validAcp('SetSessionConfigOptionResponse', set)).to.equal('');
    expect(set.configOptions[0].currentValue).to.equal('m-b');
    expect(unknown.error).to.include({ code: -32602, message: 'unknown model m-z' });
    expect(prompted).to.include({ stopReason: 'end_turn' });
    expect(said).to.deep.equal(['model m-b']);
  });

  it('as the earlier unstable models field with SCRIPTED_MODEL_STATE=models (extra fields are still valid ACP), and none with none', async () => {
    const [, legacy] = await talk({ SCRIPTED_MODEL_STATE: 'models', SCRIPTED_MODELS: 'x,y=Y' }, open);
    expect(validAcp('NewSessionResponse', legacy)).to.equal('');
    expect(legacy.models).to.deep.equal({ currentModelId: 'x', availableModels: [{ modelId: 'x', name: 'x' }, { modelId: 'y', name: 'Y' }] });
    expect(legacy.configOptions).to.equal(undefined);
    const [, none] = await talk({ SCRIPTED_MODEL_STATE: 'none' }, open);
    expect(Object.keys(none)).to.deep.equal(['sessionId']);
    expect(reportsModels(none)).to.equal(false);
  });
});

describe('Model catalog: reported sources, acp_session and extension (real Redis, real scripted agent)', function () {
  this.timeout(60_000);
  const up = new ProviderFixture();
  const f = new ServiceFixture({ env: { SECRET_ENV_ALLOWLIST: 'SVC_SECRET_*' } }).install();
  before(async () => {
    process.env.SVC_SECRET_CATALOG_KEY = TEST_KEY;
    await up.start();
  });
  after(() => up.stop());
  afterEach(() => eventually(async () => expect(childPids(process.pid, SCRIPTED), 'agent processes left after stop').to.deep.equal([])));

  const models = async (q = '') => (await f.api.get(`/api/model-catalog/models${q}`)).body.models as any[];
  const find = (list: any[], p: string, m: string) => list.find((x) => x.provider_id === p && x.model_id === m);
  const startSession = async (agent?: string) => {
    const res = await f.api.post('/api/sessions', { workspace: f.ws.id, ...(agent ? { agent_name: agent } : {}) });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.session.state).to.equal('active');
    return res.body.session;
  };
  const defineAgent = async (spec: { name: string } & Record<string, unknown>) => {
    const res = await f.api.put(`/api/resources/agent/${spec.name}?wait=true`, { scope: { kind: 'global' }, expected_version: 0, spec });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  };
  const catalogStore = () => new ModelCatalogStore(f.service.store!.redis, f.service.store!.keys);

  it('a session of the scripted agent starts: the models it reports are in the catalog as source acp_session, with its status', async () => {
    // before any session: no such source, no such provider
    expect((await f.api.get('/api/model-catalog/models?source_id=acp_session:scripted')).body.diagnostic.code).to.equal('source_not_registered');
    expect((await f.api.get('/api/model-catalog/providers/scripted/models')).status).to.equal(404);
    const s = await startSession();
    expect(s.acp_caps).to.deep.include({ supported_models: ['scripted-default', 'scripted-fast'], supports_load_session: true });
    expect(s.acp_caps.config_options).to.deep.equal([{
      current: 'scripted-default', description: '', id: 'model', kind: 'select', label: 'Model',
      values: [{ value: 'scripted-default', label: 'Scripted default', description: '' }, { value: 'scripted-fast', label: 'Scripted fast', description: '' }],
    }]);
    const curated = await models();
    const reported = curated.filter((m) => m.provider_id === 'scripted');
    expect(reported.map((m) => m.model_id)).to.deep.equal(['scripted-default', 'scripted-fast']);
    const m = find(curated, 'scripted', 'scripted-default');
    expect(m).to.include({ display_name: 'Scripted default', available: true, availability_state: 'available_live', stale: false, curated: true });
    expect(m.sources).to.deep.equal([{ source_id: 'acp_session:scripted', source_kind: 'acp_session', priority: 90, refreshed_at: m.refreshed_at, stale: false, last_error: '' }]);
    const status = (await f.api.get('/api/model-catalog/providers/scripted/models/status')).body.sources;
    const acp = status.find((x: any) => x.source_id === 'acp_session:scripted');
    expect(acp).to.deep.equal({
      source_id: 'acp_session:scripted', source_kind: 'acp_session', provider_id: 'scripted', priority: 90, last_refresh: acp.last_refresh, next_refresh: '',
      last_success: acp.last_refresh, last_error: '', refresh_state: 'succeeded', row_count: 2, stale: false,
    });
    expect((await f.api.get('/api/model-catalog/sources/status')).body.sources.map((x: any) => x.source_id)).to.include('acp_session:scripted');
    expect((await models('?view=all&source_id=acp_session:scripted')).map((x) => x.model_id)).to.deep.equal(['scripted-default', 'scripted-fast']);
    // announced once: a second session reporting the same models writes nothing and announces nothing
    await startSession();
    const announced = (await f.service.bus!.latest(200)).filter((e) => e.type === 'provider.model_catalog_refreshed' && e.data.source_id === 'acp_session:scripted');
    expect(announced).to.have.length(1);
    expect(announced[0]).to.deep.include({ source: 'models', outcome: 'success', agent_name: 'scripted', data: { provider: 'scripted', source_id: 'acp_session:scripted', row_count: 2, agent: 'scripted' } });
    // an observed source has nothing to fetch: a refresh of it answers its status and asks no one
    const refreshed = await f.api.post('/api/model-catalog/models/refresh', { source_id: 'acp_session:scripted', force: true });
    expect(refreshed.status).to.equal(200);
    expect(refreshed.body.sources.map((x: any) => x.source_id)).to.deep.equal(['acp_session:scripted']);
    expect(up.requests).to.equal(0);
  });

  it('an agent definition\'s provider files its models there, merged by priority with the provider\'s live list and the builtin data', async () => {
    writeSettings(f.dataDir, providerYaml('openai', up.url));
    up.models = ['gpt-4o'];
    expect((await f.api.post('/api/model-catalog/providers/openai/models/refresh', { force: true })).status).to.equal(200);
    // the unstable `models` shape, as agents in use send it
    await defineAgent({ name: 'coder', prompt: 'p', provider: 'openai', env: { SCRIPTED_MODEL_STATE: 'models', SCRIPTED_MODELS: 'gpt-4o=GPT-4o via coder,agent-only-1' } });
    const s = await startSession('coder');
    expect(s.acp_caps.supported_models).to.deep.equal(['gpt-4o', 'agent-only-1']);
    expect(s.acp_caps.config_options).to.deep.equal([]);
    const all = await models('?view=all');
    const gpt = find(all, 'openai', 'gpt-4o');
    // provider_live 110 > acp_session 90 > builtin 10; each field from the first that has it
    expect(gpt.sources.map((x: any) => x.source_id)).to.deep.equal(['provider_live:openai', 'acp_session:coder', 'builtin']);
    expect(gpt).to.include({ display_name: 'GPT-4o via coder', context_window: 128000, availability_state: 'available_live' });
    expect(find(all, 'openai', 'agent-only-1')).to.include({ availability_state: 'available_live', curated: true, display_name: 'agent-only-1' });
    expect(find(all, 'scripted', 'scripted-default')).to.equal(undefined);
    // what the agent says is masked like everything else it says: a token-shaped label never reaches the session or the catalog
    await defineAgent({ name: 'leaky', prompt: 'p', env: { SCRIPTED_MODELS: 'm-leaky=Leaky sk-live-0123456789abcdefghij' } });
    const leaky = await startSession('leaky');
    expect(leaky.acp_caps.config_options[0].values[0]).to.deep.include({ value: 'm-leaky', label: 'Leaky [REDACTED]' });
    expect(JSON.stringify(await models('?view=all'))).to.include('Leaky [REDACTED]').and.not.include('sk-live-0123456789abcdefghij');
    // an agent that reports no model state adds no source
    await defineAgent({ name: 'quiet', prompt: 'p', env: { SCRIPTED_MODEL_STATE: 'none' } });
    expect((await startSession('quiet')).acp_caps.supported_models).to.deep.equal([]);
    const ids = (await f.api.get('/api/model-catalog/sources/status')).body.sources.map((x: any) => x.source_id);
    expect(ids.filter((id: string) => id.startsWith('acp_session:'))).to.deep.equal(['acp_session:coder', 'acp_session:leaky']);
  });

  it('the OpenAI list names each model id once, however many agents report it, with every provider that lists it', async () => {
    // two agents without a provider report the same models, each under its own name: two catalog rows per id
    await defineAgent({ name: 'twin', prompt: 'p' });
    await startSession();
    await startSession('twin');
    const catalog = (await models()).filter((m) => m.model_id === 'scripted-default');
    expect(catalog.map((m) => m.provider_id)).to.deep.equal(['scripted', 'twin']);
    const data = (await f.api.get('/api/openai/v1/models')).body.data as any[];
    const ids = data.map((m) => m.id);
    expect(ids, 'no id twice').to.deep.equal([...new Set(ids)]);
    const entry = data.filter((m) => m.id === 'scripted-default');
    expect(entry).to.have.length(1);
    expect(entry[0]).to.deep.include({ object: 'model', owned_by: 'scripted' });
    expect(entry[0].svc.provider_ids).to.deep.equal(['scripted', 'twin']);
    // the catalog's own listing still has one row per (provider, model): only the OpenAI shape merges ids
    expect((await models()).filter((m) => m.model_id === 'scripted-fast')).to.have.length(2);
    // a provider's own list is unchanged
    expect((await f.api.get('/api/openai/v1/models?provider_id=twin')).body.data.map((m: any) => m.id)).to.deep.equal(['scripted-default', 'scripted-fast']);
  });

  it('a repeated report writes nothing; a changed one replaces the rows; old reports read stale; at most 256 agents are kept', async () => {
    const store = catalogStore();
    let changes = 0;
    const src = new AcpSessionSource({ store, onChange: async () => { changes++; } });
    const t0 = Date.now();
    expect(await src.record({ agent: 'a1', provider: '', models: [{ id: 'm1', name: 'M1' }] }, t0)).to.equal('changed');
    const rev = await store.revision();
    expect(await src.record({ agent: 'a1', provider: '', models: [{ id: 'm1', name: 'M1' }] }, t0 + 1000)).to.equal('unchanged');
    expect(await store.revision(), 'an unchanged report bumps no revision').to.equal(rev);
    expect(await src.record({ agent: 'a1', provider: '', models: [{ id: 'm1', name: 'M1' }] }, t0 + 61_000)).to.equal('refreshed');
    expect(changes).to.equal(1);
    expect(await src.record({ agent: 'a1', provider: '', models: [{ id: 'm2', name: '' }] }, t0 + 62_000)).to.equal('changed');
    expect(changes).to.equal(2);
    const now = await models('?view=all&source_id=acp_session:a1');
    expect(now.map((m) => m.model_id)).to.deep.equal(['m2']);
    // a report older than three MODEL_CATALOG_REFRESH TTLs (6h by default) reads stale
    await src.record({ agent: 'old', provider: 'oldprov', models: [{ id: 'o1', name: '' }] }, Date.now() - 19 * 3600_000);
    expect(find(await models('?view=all'), 'oldprov', 'o1')).to.equal(undefined);
    expect(find(await models('?view=all&include_stale=true'), 'oldprov', 'o1')).to.include({ stale: true, availability_state: 'available_stale' });
    expect((await f.api.get('/api/model-catalog/providers/oldprov/models/status')).body.sources.find((x: any) => x.source_id === 'acp_session:old')).to.include({ stale: true });
    // the bound: the least recently written agents go, rows and status
    for (let i = 0; i < MAX_ACP_SOURCES; i++) await src.record({ agent: `bulk-${i}`, provider: '', models: [{ id: 'b', name: '' }] }, t0 + 100_000 + i);
    const statuses = await store.statuses<{ source_id: string; provider_id: string }>();
    expect(statuses.filter((x) => x.source_id.startsWith('acp_session:'))).to.have.length(MAX_ACP_SOURCES);
    expect(statuses.map((x) => x.source_id)).to.not.include.members(['acp_session:old', 'acp_session:a1']);
    expect(await store.rowsOf('acp_session:a1', '')).to.deep.equal([]);
  });

  it('accepts a source of kind extension (the extensions family writes them): merged at priority 100, its availability, its status', async () => {
    writeSettings(f.dataDir, providerYaml('openai', up.url));
    up.models = ['gpt-4o'];
    expect((await f.api.post('/api/model-catalog/providers/openai/models/refresh', { force: true })).status).to.equal(200);
    const at = new Date().toISOString();
    const row = (model: string, extra: object) => ({ provider_id: 'openai', model_id: model, source_id: 'extension:acme', source_kind: 'extension', priority: PRIORITY.extension, refreshed_at: at, stale: false, ...extra });
    await catalogStore().put({
      source_id: 'extension:acme', source_kind: 'extension', provider_id: 'openai', priority: PRIORITY.extension, last_refresh: at, next_refresh: '', last_success: at,
      last_error: '', refresh_state: 'succeeded', row_count: 2, stale: false,
    }, [row('gpt-4o', { display_name: 'GPT-4o (acme)', context_window: 5, available: true }), row('acme-only', { available: false })]);
    const all = await models('?view=all');
    const gpt = find(all, 'openai', 'gpt-4o');
    expect(gpt.sources.map((x: any) => x.source_id)).to.deep.equal(['provider_live:openai', 'extension:acme', 'builtin']);
    expect(gpt).to.include({ display_name: 'GPT-4o (acme)', context_window: 5, availability_state: 'available_live' });
    expect(find(all, 'openai', 'acme-only')).to.include({ available: false, availability_state: 'unavailable_live', curated: true });
    expect((await models('?source_id=extension:acme')).map((m) => m.model_id)).to.deep.equal(['acme-only', 'gpt-4o']);
    const status = (await f.api.get('/api/model-catalog/providers/openai/models/status')).body.sources;
    expect(status.map((x: any) => x.source_id)).to.deep.equal(['builtin', 'models_dev', 'provider_live:openai', 'extension:acme']);
    expect(status.find((x: any) => x.source_id === 'extension:acme')).to.include({ source_kind: 'extension', priority: 100, row_count: 2, refresh_state: 'succeeded' });
  });
});
