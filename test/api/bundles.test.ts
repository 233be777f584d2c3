import { expect } from 'chai';
import { bundleSpec } from '../fixtures.ts';
import { defined, eventually } from '../helpers/service.ts';
import { ServiceFixture } from '../helpers/fixture.ts';

const CHILD_KINDS = ['agent', 'agent.soul', 'automation.job', 'automation.trigger', 'bridge.instance'];

describe('Bundles and bundle.activation children (HTTP, real Redis)', () => {
  const f = new ServiceFixture({ workspace: false }).install();
  beforeEach(async () => {
    const b = await f.api.put('/api/resources/bundle/bun-support?wait=true', { scope: { kind: 'global' }, spec: bundleSpec(), expected_version: 0 });
    expect(b.status, JSON.stringify(b.body)).to.equal(201);
  });

  const children = async (actId: string) =>
    (await f.api.get(`/api/resources?owner_kind=bundle.activation&owner_id=${actId}`)).body.records as any[];

  it('lists the catalog from bundle records', async () => {
    const { bundles } = (await f.api.get('/api/bundles/catalog')).body;
    expect(bundles).to.have.length(1);
    expect(bundles[0]).to.include({ bundle_name: 'support', extension_name: 'acme', description: 'Support desk' });
    expect(bundles[0].profiles[0]).to.include({ name: 'default', agent_count: 1, bridge_count: 1 });
    expect(bundles[0].profiles[0].channels).to.deep.equal([{ name: 'desk', description: 'Main desk', primary: true }]);
  });

  it('activates a profile: children owned by the activation, projected, listed in the activation', async () => {
    const res = await f.api.post('/api/bundles/activations', { extension_name: 'ACME', bundle_name: 'support', profile_name: 'default' });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const act = res.body.activation;
    expect(act.id).to.match(/^act_[0-9a-f]{16}$/);
    expect(act.status.conditions.find((c: any) => c.type === 'Ready').status).to.equal('True');
    expect(act.inventory.map((i: any) => i.resource_kind).sort()).to.deep.equal([...CHILD_KINDS].sort());
    const kids = await children(act.id);
    expect(kids.map((k) => k.kind).sort()).to.deep.equal([...CHILD_KINDS].sort());
    for (const k of kids) {
      expect(k.owner).to.deep.equal({ kind: 'bundle.activation', id: act.id });
      expect(k.source).to.deep.equal({ kind: 'daemon', id: `bundle.activation.${act.id}` });
    }
    expect(kids.find((k) => k.kind === 'bridge.instance').spec).to.include({ enabled: false, source: 'package' });
    expect(kids.find((k) => k.kind === 'automation.job').spec.name).to.equal('acme/support/default/daily');
    await eventually(async () => expect(defined((await f.api.get('/api/agents')).body.agents).map((a: any) => a.name)).to.deep.equal(['triage']));
    expect((await f.api.get('/api/bundles/activations')).body.activations.map((a: any) => a.id)).to.deep.equal([act.id]);
    expect((await f.api.post('/api/bundles/activations', { extension_name: 'acme', bundle_name: 'support', profile_name: 'default' })).status).to.equal(409);
  });

  it('re-creates a hand-deleted child promptly, and refuses a foreign PUT to a child with 409', async () => {
    const act = (await f.api.post('/api/bundles/activations', { extension_name: 'acme', bundle_name: 'support', profile_name: 'default' })).body.activation;
    const agent = (await children(act.id)).find((k) => k.kind === 'agent');
    const foreign = await f.api.put(`/api/resources/agent/${agent.id}`, { scope: agent.scope, spec: { name: 'triage', prompt: 'hijack' }, expected_version: agent.version });
    expect(foreign.status).to.equal(409);
    expect(foreign.body.diagnostic.evidence.owner).to.deep.equal({ kind: 'bundle.activation', id: act.id });
    expect((await f.api.get(`/api/resources/agent/${agent.id}`)).body.record.spec.prompt).to.equal('You are triage.');
    expect((await f.api.delete(`/api/resources/agent/${agent.id}`, { expected_version: agent.version })).status).to.equal(204);
    const back = await eventually(async () => {
      const r = await f.api.get(`/api/resources/agent/${agent.id}`);
      expect(r.status).to.equal(200);
      return r.body.record;
    }, 5000);
    expect(back.version).to.equal(1);
    expect(back.owner).to.deep.equal({ kind: 'bundle.activation', id: act.id });
  });

  it('deleting the activation deletes its children', async () => {
    const act = (await f.api.post('/api/bundles/activations', { extension_name: 'acme', bundle_name: 'support', profile_name: 'default' })).body.activation;
    expect((await f.api.delete(`/api/bundles/activations/${act.id}`)).status).to.equal(204);
    expect(await children(act.id)).to.deep.equal([]);
    expect((await f.api.get(`/api/bundles/activations/${act.id}`)).status).to.equal(404);
    await eventually(async () => expect(defined((await f.api.get('/api/agents')).body.agents)).to.deep.equal([]));
  });

  it('degrades the activation when its bundle disappears, keeping its children', async () => {
    const act = (await f.api.post('/api/bundles/activations', { extension_name: 'acme', bundle_name: 'support', profile_name: 'default' })).body.activation;
    const bundle = (await f.api.get('/api/resources/bundle/bun-support')).body.record;
    await f.api.delete('/api/resources/bundle/bun-support', { expected_version: bundle.version });
    await eventually(async () => {
      const s = (await f.api.get(`/api/resources/bundle.activation/${act.id}/status`)).body.status;
      expect(s.conditions.find((c: any) => c.type === 'Degraded')).to.include({ status: 'True', reason: 'BundleNotFound' });
    });
    expect((await children(act.id)).length).to.equal(CHILD_KINDS.length);
  });

  it('patches bind_primary_channel_as_default and validates activation input', async () => {
    const act = (await f.api.post('/api/bundles/activations', { extension_name: 'acme', bundle_name: 'support', profile_name: 'default' })).body.activation;
    const res = await f.api.patch(`/api/bundles/activations/${act.id}`, { bind_primary_channel_as_default: true });
    expect(res.status).to.equal(200);
    expect(res.body.activation.bind_primary_channel_as_default).to.equal(true);
    expect((await f.api.patch(`/api/bundles/activations/${act.id}`, { bind_primary_channel_as_default: 'yes' })).status).to.equal(422);
    expect((await f.api.patch('/api/bundles/activations/act_missing', { bind_primary_channel_as_default: true })).status).to.equal(404);
    const missing = await f.api.post('/api/bundles/activations', { extension_name: 'acme', bundle_name: 'nope', profile_name: 'default' });
    expect(missing.status).to.equal(422);
    expect(missing.body.diagnostic.evidence).to.have.property('bundle_name');
    expect((await f.api.post('/api/bundles/activations', { extension_name: 'acme' })).status).to.equal(422);
  });
});
