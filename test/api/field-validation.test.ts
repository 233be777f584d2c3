import { expect } from 'chai';
import { decodeSpec, KINDS } from '../../codecs/index.ts';
import { ServiceFixture } from '../helpers/fixture.ts';

const job = { name: 'j', agent_name: 'scripted', prompt: 'p', enabled: false, schedule: { mode: 'every', interval: '1h' } };
const hook = { name: 'h', event: 'tool.pre_call', mode: 'sync', executor: 'deny', metadata: { reason: 'no' } };

/** Each row: a manifest with a typo, and the field paths a strict write must name. */
const TYPOS: { reason: string; kind: string; body: Record<string, unknown>; unknown: string[] }[] = [
  { reason: 'a misspelt field of an automation.job', kind: 'automation.job', body: { spec: { ...job, enabeld: true } }, unknown: ['spec.enabeld'] },
  { reason: 'a misspelt field of an agent', kind: 'agent', body: { spec: { name: 'a', prompt: 'p', promt: 'x' } }, unknown: ['spec.promt'] },
  { reason: 'a misspelt field of a hook.binding', kind: 'hook.binding', body: { spec: { ...hook, requird: true } }, unknown: ['spec.requird'] },
  { reason: 'fields of nested declarations, every one', kind: 'agent', body: { spec: { name: 'a', prompt: 'p', mcp_servers: [{ name: 'm', transport: 'http', url: 'http://127.0.0.1:1/mcp', trasnport: 'x' }], hooks: [{ ...hook, priorty: 1 }] } }, unknown: ['spec.mcp_servers[0].trasnport', 'spec.hooks[0].priorty'] },
  { reason: 'a misspelt field of the body itself', kind: 'agent', body: { spec: { name: 'a', prompt: 'p' }, expected_versoin: 3 }, unknown: ['expected_versoin'] },
];

describe('Resources API: server-side field validation (strict by default, ?field_validation=warn|ignore)', () => {
  const f = new ServiceFixture({ workspace: false }).install();
  const put = (kind: string, id: string, body: Record<string, unknown>, q = '') => f.api.put(`/api/resources/${kind}/${id}${q}`, { scope: { kind: 'global' }, expected_version: 0, ...body });

  for (const t of TYPOS) {
    it(`strict: refuses ${t.reason} with 422 naming each unknown field, dry runs too, and stores nothing`, async () => {
      for (const q of ['', '?dry_run=true', '?field_validation=strict']) {
        const res = await put(t.kind, 'x1', t.body, q);
        expect(res.status, q).to.equal(422);
        expect(res.body.diagnostic.code).to.equal('unknown_field');
        for (const p of t.unknown) expect(res.body.diagnostic.evidence, q).to.have.property(p, 'unknown field');
      }
      expect((await f.api.get(`/api/resources/${t.kind}/x1`)).status).to.equal(404);
    });
  }

  it('strict: one 422 names the unknown fields and the invalid ones together', async () => {
    const res = await put('agent', 'x1', { spec: { name: 'a', promt: 'x' } });
    expect(res.status).to.equal(422);
    expect(res.body.diagnostic.evidence).to.include({ 'spec.promt': 'unknown field' });
    expect(res.body.diagnostic.evidence).to.have.property('spec.prompt');
  });

  it('warn: applies the write and answers one Warning header per unknown field, as kube-apiserver does', async () => {
    const res = await put('agent', 'x1', { spec: { name: 'a', prompt: 'p', promt: 'x', colour: 'blue' } }, '?field_validation=warn');
    expect(res.status).to.equal(201);
    const warnings = res.headers.get('warning')!.split(/,\s*(?=299 )/);
    expect(warnings).to.have.members(['299 - "unknown field \\"spec.promt\\""', '299 - "unknown field \\"spec.colour\\""']);
    const stored = (await f.api.get('/api/resources/agent/x1')).body.record;
    expect(stored.version).to.equal(1);
    expect(stored.spec).not.to.have.any.keys('promt', 'colour');
  });

  it('ignore: applies the write without warnings; a write without unknown fields never warns', async () => {
    const res = await put('agent', 'x1', { spec: { name: 'a', prompt: 'p', promt: 'x' } }, '?field_validation=ignore');
    expect(res.status).to.equal(201);
    expect(res.headers.get('warning')).to.equal(null);
    const clean = await put('agent', 'x2', { spec: { name: 'a', prompt: 'p' } }, '?field_validation=warn');
    expect(clean.status).to.equal(201);
    expect(clean.headers.get('warning')).to.equal(null);
  });

  it('refuses an unknown field_validation mode with 400 and stores nothing', async () => {
    const res = await put('agent', 'x1', { spec: { name: 'a', prompt: 'p' } }, '?field_validation=lenient');
    expect(res.status).to.equal(400);
    expect(res.body.diagnostic.evidence).to.have.property('field_validation');
    expect((await f.api.get('/api/resources/agent/x1')).status).to.equal(404);
  });

  it('POST /api/agents refuses an unknown field of the agent it writes', async () => {
    const res = await f.api.post('/api/agents', { scope: 'global', agent: { name: 'a', prompt: 'p', provider: 'local', promt: 'x' } });
    expect(res.status).to.equal(422);
    expect(res.body.diagnostic.evidence).to.have.property('spec.promt');
  });
});

describe('Codecs: every kind reports unknown fields of its spec, and none of a known one', () => {
  for (const kind of KINDS) {
    it(`${kind}: a top-level unknown field is reported`, () => {
      const unknown: string[] = [];
      decodeSpec(kind, { zz_unknown: 1 }, { scope: { kind: 'global' }, unknownFields: unknown });
      expect(unknown).to.deep.equal(['zz_unknown']);
    });
  }

  it('a known field is never reported, and a decode without a sink reports nothing', () => {
    const unknown: string[] = [];
    const res = decodeSpec('automation.job', job, { scope: { kind: 'global' }, unknownFields: unknown });
    expect(res.ok).to.equal(true);
    expect(unknown).to.deep.equal([]);
    expect(decodeSpec('agent', { name: 'a', prompt: 'p', promt: 'x' }, { scope: { kind: 'global' } }).ok).to.equal(true);
  });
});
