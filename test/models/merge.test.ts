import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mergeModel, mergeRows, rowOrder, type Curation } from '../../runtime/models/merge.ts';
import { fetchJson } from '../../runtime/models/models-dev.ts';
import { failureClass } from '../../runtime/models/provider-live.ts';
import { HttpStatusError } from '../../runtime/models/models-dev.ts';
import { providerSettings } from '../../runtime/models/providers.ts';
import { EgressPolicy } from '../../runtime/security/egress.ts';
import { PRIORITY, type ModelRow, type SourceKind } from '../../runtime/models/types.ts';

const T1 = '2026-01-01T00:00:00.000Z';
const T2 = '2026-02-01T00:00:00.000Z';
const row = (kind: SourceKind, fields: Partial<ModelRow> = {}, id: string = kind): ModelRow => ({
  provider_id: 'openai', model_id: 'm', source_id: id, source_kind: kind, priority: PRIORITY[kind], refreshed_at: T1, stale: false, ...fields,
});
const merge = (rows: ModelRow[], c?: Curation) => mergeModel([...rows].sort(rowOrder), c);

describe('Model catalog merge: precedence, availability, reasoning', () => {
  const table: { reason: string; given: ModelRow[]; want: Record<string, unknown> }[] = [
    {
      reason: 'config (120) beats provider_live (110) beats models_dev (50) beats builtin (10), field by field',
      given: [row('builtin', { context_window: 1, display_name: 'B', max_output_tokens: 9 }), row('models_dev', { context_window: 2, display_name: 'D' }), row('provider_live', { context_window: 3 }), row('config', { display_name: 'C' })],
      want: { display_name: 'C', context_window: 3, max_output_tokens: 9 },
    },
    {
      reason: 'each field takes the first value present: a higher source without it does not blank it',
      given: [row('builtin', { cost: { input_per_million: 1 }, release_date: '2024-05-13' }), row('provider_live', { available: true })],
      want: { cost: { input_per_million: 1 }, release_date: '2024-05-13' },
    },
    {
      reason: 'between rows of one priority, the fresher refresh wins',
      given: [row('provider_live', { context_window: 10, refreshed_at: T1 }, 'provider_live:a'), row('provider_live', { context_window: 20, refreshed_at: T2 }, 'provider_live:b')],
      want: { context_window: 20 },
    },
    {
      reason: 'availability comes only from live sources; builtin and config never say a model is available',
      given: [row('builtin', { available: true }), row('config', { available: true })],
      want: { available: null, availability_state: 'unknown' },
    },
    { reason: 'a fresh live row that lists the model: available_live', given: [row('provider_live', { available: true })], want: { available: true, availability_state: 'available_live', stale: false } },
    { reason: 'a stale live row that listed it: available_stale', given: [row('provider_live', { available: true, stale: true, last_error: 'HTTP 500' })], want: { availability_state: 'available_stale', stale: true, last_error: 'HTTP 500' } },
    { reason: 'a live row that says no (401): unavailable_live', given: [row('provider_live', { available: false })], want: { available: false, availability_state: 'unavailable_live' } },
    { reason: 'a stale live row that said no: unavailable_stale', given: [row('provider_live', { available: false, stale: true })], want: { availability_state: 'unavailable_stale' } },
    {
      reason: 'a model said to reason gets the five efforts and medium; the source is named',
      given: [row('builtin', { supports_reasoning: true })],
      want: { supports_reasoning: true, reasoning_efforts: ['minimal', 'low', 'medium', 'high', 'xhigh'], default_reasoning_effort: 'medium', reasoning_source: 'builtin' },
    },
    {
      reason: 'explicit efforts of a higher source win over a lower one\'s reasoning flag',
      given: [row('builtin', { supports_reasoning: false }), row('config', { reasoning_efforts: ['low', 'high'], default_reasoning_effort: 'high' })],
      want: { supports_reasoning: true, reasoning_efforts: ['low', 'high'], default_reasoning_effort: 'high', reasoning_source: 'config' },
    },
    { reason: 'a model said not to reason has no default effort', given: [row('models_dev', { supports_reasoning: false, default_reasoning_effort: 'low' })], want: { supports_reasoning: false, default_reasoning_effort: undefined } },
    { reason: 'no display name anywhere: the model id', given: [row('provider_live')], want: { display_name: 'm' } },
    {
      reason: 'acp_session (90) sits below extension (100) and above models_dev (50), field by field',
      given: [row('models_dev', { display_name: 'D', context_window: 2 }), row('acp_session', { display_name: 'A', available: true }), row('extension', { context_window: 3 })],
      want: { display_name: 'A', context_window: 3 },
    },
    { reason: 'an agent\'s report is a live observation: available_live', given: [row('builtin'), row('acp_session', { available: true })], want: { available: true, availability_state: 'available_live' } },
    {
      reason: 'a provider\'s own answer outranks an agent\'s report on availability',
      given: [row('acp_session', { available: true }), row('provider_live', { available: false })],
      want: { available: false, availability_state: 'unavailable_live' },
    },
  ];
  for (const t of table) {
    it(t.reason, () => {
      const m = merge(t.given) as unknown as Record<string, unknown>;
      for (const [k, v] of Object.entries(t.want)) expect(m[k], k).to.deep.equal(v);
      expect((m.sources as { source_id: string }[]).length).to.equal(t.given.length);
    });
  }

  it('lists sources in precedence order, whatever order the rows came in', () => {
    const rows = [row('builtin'), row('config'), row('models_dev'), row('provider_live')];
    for (const order of [rows, [...rows].reverse()]) expect(merge(order).sources.map((s) => s.source_kind)).to.deep.equal(['config', 'provider_live', 'models_dev', 'builtin']);
  });

  it('applies a curation over the merge: flags and the default effort', () => {
    const m = merge([row('builtin', { supports_reasoning: true })], { provider_id: 'openai', model_id: 'm', hidden: true, featured: false, deprecated: true, default_effort: 'high' });
    expect(m).to.include({ hidden: true, deprecated: true, featured: false, default_reasoning_effort: 'high', reasoning_source: 'curation' });
  });

  it('groups by (provider, model) and sorts the result', () => {
    const out = mergeRows([row('builtin', { model_id: 'b' }), row('builtin', { provider_id: 'anthropic', model_id: 'z' }), row('config', { model_id: 'b' }), row('builtin', { model_id: 'a' })]);
    expect(out.map((m) => `${m.provider_id}/${m.model_id}:${m.sources.length}`)).to.deep.equal(['anthropic/z:1', 'openai/a:1', 'openai/b:2']);
  });
});

describe('Model catalog settings and upstream reads', () => {
  const file = (data: Record<string, unknown>) => ({ path: '/cfg.yaml', exists: true, data });

  it('decodes providers and models; refuses a literal key without repeating it, and names each bad field', () => {
    const s = providerSettings([file({
      providers: [
        { name: 'openai', base_url: 'https://api.openai.com/v1/', api_key: 'env:OPENAI_API_KEY' },
        { name: 'claude', kind: 'anthropic', api_key: 'vault:providers/claude/key', display_name: 'Claude' },
        { name: 'leaky', base_url: 'https://x.test/v1', api_key: 'sk-live-abcdefghijklmnop' },
        { name: 'Bad Name', base_url: 'ftp://x', kind: 'grpc', colour: 'red' },
      ],
      models: [{ provider: 'acme', model: 'big-1', context_window: 1000, reasoning_efforts: ['high', 'low'] }, { provider: 'acme', model: 'x', context_window: -1 }],
    })]);
    expect(s.providers.map((p) => [p.name, p.kind, p.base_url, p.auth_mode, p.display_name])).to.deep.equal([
      ['claude', 'anthropic', 'https://api.anthropic.com', 'api_key', 'Claude'],
      ['openai', 'openai-compatible', 'https://api.openai.com/v1', 'api_key', 'openai'],
    ]);
    expect(s.models).to.deep.equal([{ provider_id: 'acme', model_id: 'big-1', source_id: 'config', source_kind: 'config', priority: 120, stale: false, context_window: 1000, reasoning_efforts: ['low', 'high'] }]);
    const text = s.problems.join('\n');
    expect(text).to.include('providers[2].api_key must be env:NAME or vault:providers/<path>').and.not.include('sk-live-abcdefghijklmnop');
    for (const p of ['providers[3].name', 'providers[3].kind', 'providers[3].base_url', 'providers[3].colour', 'models[1].context_window']) expect(text).to.include(p);
  });

  it('a workspace file overrides a global provider of the same name', () => {
    const s = providerSettings([file({ providers: [{ name: 'p', base_url: 'https://a.test' }] }), file({ providers: [{ name: 'p', base_url: 'https://b.test' }] })]);
    expect(s.providers.map((p) => p.base_url)).to.deep.equal(['https://b.test']);
  });

  it('classifies upstream failures: 401, 403, 429, anything else', () => {
    const cases: [unknown, string][] = [[new HttpStatusError(401, ''), 'auth_required'], [new HttpStatusError(403, ''), 'permission_denied'], [new HttpStatusError(429, ''), 'rate_limited'], [new HttpStatusError(502, ''), 'unavailable'], [new Error('fetch failed'), 'unavailable']];
    for (const [err, want] of cases) expect(failureClass(err)).to.equal(want);
  });

  it('cuts off a body over its cap and a server that is too slow; each failure names the source, where, and why', async () => {
    const server = http.createServer((req, res) => {
      if (req.url?.startsWith('/slow')) return void setTimeout(() => res.end('{}'), 2000);
      if (req.url === '/moved') { res.writeHead(302, { location: '/big' }); return void res.end(); }
      res.write('[');
      for (let i = 0; i < 100; i++) res.write('"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",');
      res.end('""]');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const egress = new EgressPolicy({ authMode: 'none' });
    try {
      const big = await fetchJson(`${url}/big`, { timeoutMs: 2000, maxBytes: 1024, what: 'models.dev', egress }).catch((e: Error) => e) as Error;
      expect(big.message).to.equal('models.dev is over the 1024-byte cap');
      expect((await fetchJson(`${url}/big`, { timeoutMs: 2000, maxBytes: 64 * 1024, what: 'x', egress }) as unknown[]).length).to.equal(101);
      const slow = await fetchJson(`${url}/slow?key=sk-in-a-query-0123456789`, { timeoutMs: 100, maxBytes: 1024, what: 'provider p', egress }).catch((e: Error) => e) as Error;
      expect(slow.message).to.equal(`provider p did not answer within 0.1s (${url}): timeout`);
      const moved = await fetchJson(`${url}/moved`, { timeoutMs: 2000, maxBytes: 1024, what: 'provider p', egress }).catch((e: Error) => e) as Error;
      expect(moved.message).to.equal(`provider p answered a redirect (${url}); redirects are not followed: set base_url to where it points`);
      const closed = http.createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
      const gone = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
      await new Promise<void>((r) => closed.close(() => r()));
      const refused = await fetchJson(`${gone}/v1/models`, { timeoutMs: 2000, maxBytes: 1024, what: 'provider p', egress }).catch((e: Error) => e) as Error;
      expect(refused.message).to.equal(`provider p could not be reached at ${gone}: connect_failed`);
      expect(failureClass(refused)).to.equal('unavailable');
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
