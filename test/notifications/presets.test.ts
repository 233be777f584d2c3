import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';

const P = '/api/notifications/presets';

describe('notification presets: the five routes (real Redis, real service)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture({ workspace: false }).install();

  const bridge = async (id: string, spec: Record<string, unknown> = {}) => {
    const res = await f.api.put(`/api/resources/bridge.instance/${id}`, {
      scope: { kind: 'global' }, expected_version: 0,
      spec: { platform: 'webhook', extension_name: 'webhook', display_name: id, provider_config: { url: 'http://127.0.0.1:9/hook' }, ...spec },
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  };
  const all = async () => (await f.api.get(P)).body.presets;

  it('serves the three built-in presets, all disabled, default_version 1, unmodified', async () => {
    const res = await f.api.get(P);
    expect(res.status).to.equal(200);
    expect(res.body.total).to.equal(3);
    expect(Date.parse(res.body.generated_at)).to.be.greaterThan(0);
    const byName = Object.fromEntries(res.body.presets.map((p: any) => [p.name, p]));
    expect(Object.keys(byName)).to.deep.equal(['provider_failure', 'session_unhealthy', 'task_terminal']);
    expect(byName.task_terminal.events).to.deep.equal(['task.run_*']);
    expect(byName.session_unhealthy.events).to.deep.equal(['session.unhealthy', 'session.hung', 'session.recovered']);
    expect(byName.provider_failure.events).to.deep.equal(['provider.auth_required', 'provider.rate_limited', 'provider.permission_denied', 'provider.unavailable']);
    for (const p of res.body.presets) {
      expect(p).to.include({ built_in: true, enabled: false, default_version: '1', user_modified: false, default_update_available: false, filter: '' });
      expect(p.default_hash).to.match(/^[0-9a-f]{16}$/);
      expect(p.targets).to.deep.equal([]);
    }
    expect((await f.api.get(`${P}?built_in=false`)).body.total).to.equal(0);
    expect((await f.api.get(`${P}?name=task_terminal`)).body.presets.map((p: any) => p.name)).to.deep.equal(['task_terminal']);
    expect((await f.api.get(`${P}?limit=1`)).body).to.include({ total: 3 }).and.to.satisfy((b: any) => b.presets.length === 1);
  });

  it('creates (201), reads (200), updates (200) and deletes (204) a preset, normalizing delivery_mode aliases, and announces create and update on the bus', async () => {
    await bridge('ops-hook', { delivery_defaults: { mode: 'reply' } });
    await bridge('dev-hook');
    const created = await f.api.post(P, {
      name: 'ops', enabled: true, events: ['turn.end', 'resource.*'], filter: 'severity>=warning',
      targets: [{ bridge_id: 'ops-hook' }, { bridge_id: 'dev-hook', delivery_mode: 'send', display_name: 'Dev' }],
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect(created.body.preset).to.include({ name: 'ops', enabled: true, built_in: false, filter: 'severity>=warning', user_modified: false, default_version: '' });
    expect(created.body.preset.targets).to.deep.equal([
      { bridge_id: 'ops-hook', canonical_route: 'webhook/ops-hook', delivery_mode: 'reply', display_name: 'ops-hook' },
      { bridge_id: 'dev-hook', canonical_route: 'webhook/dev-hook', delivery_mode: 'direct-send', display_name: 'Dev' },
    ]);
    const got = await f.api.get(`${P}/ops`);
    expect(got.status).to.equal(200);
    expect(got.body.preset).to.deep.equal(created.body.preset);

    const updated = await f.api.put(`${P}/ops`, { enabled: false, targets: [{ bridge_id: 'dev-hook', delivery_mode: 'reply_send' }] });
    expect(updated.status, JSON.stringify(updated.body)).to.equal(200);
    expect(updated.body.preset).to.include({ enabled: false, filter: 'severity>=warning' });
    expect(updated.body.preset.events).to.deep.equal(['turn.end', 'resource.*']);
    expect(updated.body.preset.targets).to.deep.equal([{ bridge_id: 'dev-hook', canonical_route: 'webhook/dev-hook', delivery_mode: 'reply', display_name: 'dev-hook' }]);

    const builtIn = await f.api.put(`${P}/task_terminal`, { enabled: true, targets: [{ bridge_id: 'ops-hook' }] });
    expect(builtIn.status).to.equal(200);
    expect(builtIn.body.preset).to.include({ built_in: true, enabled: true, user_modified: true });

    const types = async () => (await f.service.bus!.latest(100)).filter((e) => e.source === 'notifications').map((e) => `${e.type}:${e.data.name}`);
    await eventually(async () => expect(await types()).to.deep.equal(['notification.preset_created:ops', 'notification.preset_updated:ops', 'notification.preset_updated:task_terminal']));

    const del = await f.api.delete(`${P}/ops`);
    expect(del.status).to.equal(204);
    expect(del.body).to.equal(undefined);
    expect((await f.api.get(`${P}/ops`)).status).to.equal(404);
    expect((await all()).map((p: any) => p.name)).to.deep.equal(['provider_failure', 'session_unhealthy', 'task_terminal']);
  });

  it('refuses bad writes with 400/404/409/422 and leaves every preset as it was', async () => {
    await bridge('hook-a');
    await bridge('hook-b', { display_name: 'Shared' });
    await bridge('hook-c', { display_name: 'Shared' });
    const base = { name: 'keep', enabled: true, events: ['turn.end'], targets: [{ bridge_id: 'hook-a' }] };
    expect((await f.api.post(P, base)).status).to.equal(201);
    const before = await all();

    const refusals: { reason: string; call: () => Promise<{ status: number; body: any }>; status: number; mentions: string }[] = [
      { reason: 'an unknown field on create', call: () => f.api.post(P, { ...base, name: 'n1', colour: 'red' }), status: 400, mentions: 'colour' },
      { reason: 'an unknown field in a target', call: () => f.api.post(P, { ...base, name: 'n1', targets: [{ bridge_id: 'hook-a', url: 'x' }] }), status: 400, mentions: 'targets[0].url' },
      { reason: 'an unknown field on update (name is not updatable)', call: () => f.api.put(`${P}/keep`, { name: 'other' }), status: 400, mentions: 'name' },
      { reason: 'a missing name', call: () => f.api.post(P, { ...base, name: undefined }), status: 400, mentions: 'name' },
      { reason: 'a bad name', call: () => f.api.post(P, { ...base, name: 'Bad Name!' }), status: 400, mentions: 'name' },
      { reason: 'enabled is not a boolean', call: () => f.api.post(P, { ...base, name: 'n1', enabled: 'yes' }), status: 400, mentions: 'enabled' },
      { reason: 'the task_run.* family', call: () => f.api.post(P, { ...base, name: 'n1', events: ['task_run.*'] }), status: 400, mentions: 'task_run' },
      { reason: 'an unknown event name', call: () => f.api.post(P, { ...base, name: 'n1', events: ['session.exploded'] }), status: 400, mentions: 'session.exploded' },
      { reason: 'an invalid filter, naming the problem', call: () => f.api.post(P, { ...base, name: 'n1', filter: 'severity>=warning AND (agent=x' }), status: 400, mentions: 'missing ")"' },
      { reason: 'an invalid filter on update', call: () => f.api.put(`${P}/keep`, { filter: 'colour=red' }), status: 400, mentions: 'unknown field "colour"' },
      { reason: 'an unknown delivery_mode', call: () => f.api.post(P, { ...base, name: 'n1', targets: [{ bridge_id: 'hook-a', delivery_mode: 'shout' }] }), status: 400, mentions: 'delivery_mode' },
      { reason: 'a body that is not an object', call: () => f.api.post(P, [1]), status: 400, mentions: 'object' },
      { reason: 'a duplicate name', call: () => f.api.post(P, base), status: 409, mentions: 'already exists' },
      { reason: 'a built-in name', call: () => f.api.post(P, { ...base, name: 'task_terminal' }), status: 409, mentions: 'already exists' },
      { reason: 'deleting a built-in', call: () => f.api.delete(`${P}/session_unhealthy`), status: 409, mentions: 'built in' },
      { reason: 'reading a missing preset', call: () => f.api.get(`${P}/nope`), status: 404, mentions: 'nope' },
      { reason: 'updating a missing preset', call: () => f.api.put(`${P}/nope`, { enabled: true }), status: 404, mentions: 'nope' },
      { reason: 'deleting a missing preset', call: () => f.api.delete(`${P}/nope`), status: 404, mentions: 'nope' },
      { reason: 'a target naming no bridge', call: () => f.api.post(P, { ...base, name: 'n1', targets: [{ bridge_id: 'ghost' }] }), status: 422, mentions: 'names no bridge.instance record' },
      { reason: 'a target naming a display name two bridges share', call: () => f.api.post(P, { ...base, name: 'n1', targets: [{ bridge_id: 'Shared' }] }), status: 422, mentions: 'ambiguous' },
      { reason: 'the same bridge targeted twice', call: () => f.api.post(P, { ...base, name: 'n1', targets: [{ bridge_id: 'hook-a' }, { bridge_id: 'hook-a', delivery_mode: 'reply' }] }), status: 422, mentions: 'ambiguous' },
      { reason: 'a canonical_route the bridge does not have', call: () => f.api.post(P, { ...base, name: 'n1', targets: [{ bridge_id: 'hook-a', canonical_route: 'slack/x' }] }), status: 422, mentions: 'canonical_route' },
      { reason: 'a bad target on update', call: () => f.api.put(`${P}/keep`, { targets: [{ bridge_id: 'ghost' }] }), status: 422, mentions: 'ghost' },
    ];
    for (const r of refusals) {
      const res = await r.call();
      expect(res.status, `${r.reason}: ${JSON.stringify(res.body)}`).to.equal(r.status);
      expect(res.body.error, r.reason).to.contain(r.mentions);
      expect(res.body.diagnostic.code, r.reason).to.be.a('string');
    }
    expect(await all(), 'nothing changed after the refusals').to.deep.equal(before);
    const announced = (await f.service.bus!.latest(200)).filter((e) => e.source === 'notifications').map((e) => e.data.name);
    expect(announced, 'only the one create was announced').to.deep.equal(['keep']);
  });

  it('a display name that only one bridge has resolves to that bridge id', async () => {
    await bridge('hook-z', { display_name: 'Pager' });
    const res = await f.api.post(P, { name: 'by-name', enabled: false, events: ['session.*'], targets: [{ bridge_id: 'pager' }] });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.preset.targets[0]).to.include({ bridge_id: 'hook-z', display_name: 'Pager' });
  });

  it('deleting a bridge a preset delivers to is 409 naming the preset and deletes nothing; once no preset uses it, it deletes', async () => {
    await bridge('ops');
    expect((await f.api.post(P, { name: 'alerts', enabled: true, events: ['turn.end'], targets: [{ bridge_id: 'ops' }] })).status).to.equal(201);
    for (const q of ['', '?dry_run=true']) {
      const res = await f.api.delete(`/api/resources/bridge.instance/ops${q}`, { expected_version: 1 });
      expect(res.status, q).to.equal(409);
      expect(res.body.diagnostic.code).to.equal('resource_in_use');
      expect(res.body.diagnostic.evidence.used_by).to.deep.equal(['notification preset "alerts"']);
    }
    expect((await f.api.get('/api/resources/bridge.instance/ops')).body.record.version).to.equal(1);
    expect((await f.api.get(`${P}/alerts`)).body.preset.targets.map((t: any) => t.bridge_id)).to.deep.equal(['ops']);
    expect((await f.api.delete(`${P}/alerts`)).status).to.equal(204);
    expect((await f.api.delete('/api/resources/bridge.instance/ops', { expected_version: 1 })).status).to.equal(204);
  });
});
