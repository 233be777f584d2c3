import { expect } from 'chai';
import { defined, eventually } from '../helpers/service.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { SseReader } from '../helpers/sse.ts';

const agent = (prompt = 'You help.') => ({ name: 'helper', prompt });
const body = (spec: unknown, expected_version = 0, scope: unknown = { kind: 'global' }) => ({ scope, spec, expected_version });

describe('Resources API (HTTP, real Redis)', () => {
  const f = new ServiceFixture({ workspace: false }).install();

  it('creates with 201, reads it back, updates with 200 and version 2', async () => {
    const created = await f.api.put('/api/resources/agent/a1', body(agent()));
    expect(created.status).to.equal(201);
    expect(created.body.record).to.include({ kind: 'agent', id: 'a1', version: 1 });
    expect(created.body.record.owner).to.deep.equal({ kind: 'daemon', id: 'daemon-control' });
    expect(created.body.record.source).to.deep.equal({ kind: 'daemon', id: 'system' });
    expect((await f.api.get('/api/resources/agent/a1')).body.record).to.deep.equal(created.body.record);
    const updated = await f.api.put('/api/resources/agent/a1', body(agent('Be brief.'), 1));
    expect(updated.status).to.equal(200);
    expect(updated.body.record.version).to.equal(2);
    expect(updated.body.record.spec.prompt).to.equal('Be brief.');
  });

  it('stores the canonical spec (trimmed strings)', async () => {
    const res = await f.api.put('/api/resources/agent/a1', body({ name: '  helper ', prompt: ' hi ' }));
    expect(res.body.record.spec).to.include({ name: 'helper', prompt: 'hi' });
  });

  it('rejects a stale expected_version with 409 and leaves the record unchanged', async () => {
    await f.api.put('/api/resources/agent/a1', body(agent()));
    await f.api.put('/api/resources/agent/a1', body(agent('v2'), 1));
    const res = await f.api.put('/api/resources/agent/a1', body(agent('v3'), 1));
    expect(res.status).to.equal(409);
    expect(res.body.diagnostic.code).to.equal('version_conflict');
    expect(res.body.diagnostic.evidence.current_version).to.equal(2);
    const now = (await f.api.get('/api/resources/agent/a1')).body.record;
    expect(now).to.include({ version: 2 });
    expect(now.spec.prompt).to.equal('v2');
  });

  it('answers 409 to a create over an existing record, 404 to expected_version > 0 on a missing one', async () => {
    await f.api.put('/api/resources/agent/a1', body(agent()));
    expect((await f.api.put('/api/resources/agent/a1', body(agent('x')))).status).to.equal(409);
    const missing = await f.api.put('/api/resources/agent/nope', body(agent(), 4));
    expect(missing.status).to.equal(404);
    expect((await f.api.get('/api/resources/agent/nope')).status).to.equal(404);
  });

  it('keeps the version of a write that changes nothing and triggers no change event', async () => {
    await f.api.put('/api/resources/agent/a1', body(agent()));
    const rev = Number((await f.api.get('/api/resources')).headers.get('x-svc-revision'));
    const same = await f.api.put('/api/resources/agent/a1', body({ prompt: 'You help.', name: 'helper' }, 1));
    expect(same.status).to.equal(200);
    expect(same.body.record.version).to.equal(1);
    expect(Number((await f.api.get('/api/resources')).headers.get('x-svc-revision'))).to.equal(rev);
  });

  it('answers malformed JSON with 400, a wrong body shape with 422, and stores nothing', async () => {
    const bad = await f.api.put('/api/resources/agent/a1', '{"scope": ');
    expect(bad.status).to.equal(400);
    expect(bad.body.diagnostic.code).to.equal('malformed_json');
    const arr = await f.api.put('/api/resources/agent/a1', '[1,2]');
    expect(arr.status).to.equal(422);
    expect((await f.api.get('/api/resources/agent/a1')).status).to.equal(404);
  });

  it('rejects an unknown kind with 422 unknown_kind', async () => {
    const res = await f.api.put('/api/resources/widget/w1', body({}));
    expect(res.status).to.equal(422);
    expect(res.body.diagnostic.code).to.equal('unknown_kind');
    expect(res.body.error).to.be.a('string');
  });

  it('rejects ids outside the grammar with 422', async () => {
    for (const id of ['-x', '.x', 'a%20b', 'x'.repeat(254)]) {
      const res = await f.api.put(`/api/resources/agent/${id}`, body(agent()));
      expect(res.status, id).to.equal(422);
      expect(res.body.diagnostic.code, id).to.equal('invalid_id');
    }
  });

  it('names every failing spec field in diagnostic.evidence (422) and stores nothing', async () => {
    const res = await f.api.put('/api/resources/agent/a1', body({ name: 'a/b', prompt: '' }));
    expect(res.status).to.equal(422);
    expect(res.body.diagnostic.code).to.equal('invalid_spec');
    expect(Object.keys(res.body.diagnostic.evidence)).to.include.members(['spec.name', 'spec.prompt']);
    expect((await f.api.get('/api/resources/agent/a1')).status).to.equal(404);
  });

  it('validates the scope binding: bad kind, global with id, workspace without id or unknown workspace', async () => {
    for (const [scope, field] of [
      [{ kind: 'cluster' }, 'scope.kind'], [{ kind: 'global', id: 'x' }, 'scope.id'],
      [{ kind: 'workspace' }, 'scope.id'], [{ kind: 'workspace', id: 'ws-missing' }, 'scope.id'],
    ] as const) {
      const res = await f.api.put('/api/resources/agent/a1', body(agent(), 0, scope));
      expect(res.status, JSON.stringify(scope)).to.equal(422);
      expect(res.body.diagnostic.evidence, JSON.stringify(scope)).to.have.property(field);
    }
    expect((await f.api.get('/api/resources/agent/a1')).status).to.equal(404);
  });

  it('answers 413 for a spec over 256 KiB and for a body over 1 MiB', async () => {
    const big = await f.api.put('/api/resources/agent/a1', body({ name: 'x', prompt: 'p'.repeat(300 * 1024) }));
    expect(big.status).to.equal(413);
    const huge = await f.api.put('/api/resources/agent/a1', body({ name: 'x', prompt: 'p'.repeat(1100 * 1024) }));
    expect(huge.status).to.equal(413);
    expect(huge.body.diagnostic.code).to.equal('body_too_large');
    expect((await f.api.get('/api/resources/agent/a1')).status).to.equal(404);
  });

  it('deletes with the current version (204), refuses a stale or missing version, 404 when gone', async () => {
    await f.api.put('/api/resources/agent/a1', body(agent()));
    expect((await f.api.delete('/api/resources/agent/a1', {})).status).to.equal(422);
    // A version in the query is not read: the error says where it goes, and nothing is deleted.
    const inQuery = await f.api.delete('/api/resources/agent/a1?expected_version=1');
    expect(inQuery.status).to.equal(422);
    expect(inQuery.body.error).to.include('in the JSON body');
    expect(inQuery.body.diagnostic.evidence).to.deep.equal({ expected_version: 'is required (in the JSON body)' });
    expect((await f.api.delete('/api/resources/agent/a1', { expected_version: 0 })).status).to.equal(422);
    expect((await f.api.delete('/api/resources/agent/a1', { expected_version: 2 })).status).to.equal(409);
    expect((await f.api.get('/api/resources/agent/a1')).status).to.equal(200);
    const del = await f.api.delete('/api/resources/agent/a1', { expected_version: 1 });
    expect(del.status).to.equal(204);
    expect(del.body).to.equal(undefined);
    expect((await f.api.get('/api/resources/agent/a1')).status).to.equal(404);
    expect((await f.api.delete('/api/resources/agent/a1', { expected_version: 1 })).status).to.equal(404);
  });

  it('dry_run runs every check and stores nothing', async () => {
    const dry = await f.api.put('/api/resources/agent/a1?dry_run=true', body(agent()));
    expect(dry.status).to.equal(201);
    expect(dry.headers.get('x-svc-dry-run')).to.equal('true');
    expect(dry.body.record.version).to.equal(1);
    expect((await f.api.get('/api/resources/agent/a1')).status).to.equal(404);
    expect((await f.api.put('/api/resources/agent/a1?dry_run=true', body(agent(), 3))).status).to.equal(404);
    await f.api.put('/api/resources/agent/a1', body(agent()));
    expect((await f.api.delete('/api/resources/agent/a1?dry_run=true', { expected_version: 1 })).status).to.equal(204);
    expect((await f.api.get('/api/resources/agent/a1')).status).to.equal(200);
  });

  it('wait=true answers once the written version is reconciled; status shows it Ready', async () => {
    const res = await f.api.put('/api/resources/agent/a1?wait=true', body(agent()));
    expect(res.headers.get('x-svc-reconcile')).to.equal('done');
    const status = (await f.api.get('/api/resources/agent/a1/status')).body.status;
    expect(status.observed_version).to.equal(1);
    expect(status.conditions.find((c: any) => c.type === 'Ready')).to.include({ status: 'True' });
    expect(status.conditions.find((c: any) => c.type === 'Degraded')).to.include({ status: 'False' });
    expect(status.last_error).to.equal('');
    const agents = defined((await f.api.get('/api/agents')).body.agents);
    expect(agents.map((a: any) => a.name)).to.deep.equal(['helper']);
    const del = await f.api.delete('/api/resources/agent/a1?wait=true', { expected_version: 1 });
    expect(del.headers.get('x-svc-reconcile')).to.equal('done');
    expect(defined((await f.api.get('/api/agents')).body.agents)).to.deep.equal([]);
  });

  it('lists with filters in (kind, id) order and validates the filters', async () => {
    await f.api.put('/api/resources/agent/b', body(agent()));
    await f.api.put('/api/resources/agent/a', body(agent()));
    const ids = (r: any) => r.body.records.map((x: any) => `${x.kind}/${x.id}`);
    expect(ids(await f.api.get('/api/resources'))).to.deep.equal(['agent/a', 'agent/b']);
    expect(ids(await f.api.get('/api/resources/agent?limit=1'))).to.deep.equal(['agent/a']);
    expect(ids(await f.api.get('/api/resources?kind=agent&scope_kind=global'))).to.deep.equal(['agent/a', 'agent/b']);
    expect(ids(await f.api.get('/api/resources?owner_kind=daemon&owner_id=daemon-control&limit=0'))).to.deep.equal(['agent/a', 'agent/b']);
    expect(ids(await f.api.get('/api/resources?source_kind=ext&source_id=x'))).to.deep.equal([]);
    expect((await f.api.get('/api/resources?limit=abc')).status).to.equal(422);
    expect((await f.api.get('/api/resources?limit=-1')).status).to.equal(422);
    expect((await f.api.get('/api/resources?owner_kind=daemon')).status).to.equal(422);
    expect((await f.api.get('/api/resources/agent?kind=tool')).status).to.equal(422);
    expect((await f.api.get('/api/resources/widget')).status).to.equal(422);
  });

  it('answers an unknown route with a JSON 404 and a wrong method with 405', async () => {
    const res = await f.api.get('/api/nothing-here');
    expect(res.status).to.equal(404);
    expect(res.body.diagnostic.code).to.equal('route_not_found');
    const m = await f.api.call('POST', '/api/resources/agent/a1', {});
    expect(m.status).to.equal(405);
    expect(m.body.error).to.be.a('string');
  });

  it('watch streams one frame per change, resumes after Last-Event-ID, honours filters', async () => {
    const watch = await new SseReader(`${f.service.url}/api/resources?watch=true&kind=agent`).open();
    expect(watch.status).to.equal(200);
    await new Promise((r) => setTimeout(r, 100));
    await f.api.put('/api/resources/agent/a1', body(agent()));
    await f.api.put('/api/resources/agent/a1', body(agent('v2'), 1));
    await f.api.delete('/api/resources/agent/a1', { expected_version: 2 });
    const events = await watch.until(3);
    watch.close();
    expect(events.map((e) => [e.event, e.id])).to.deep.equal([['put', '1'], ['put', '2'], ['delete', '3']]);
    const last = JSON.parse(events[2].data);
    expect(last).to.include({ type: 'delete', revision: 3 });
    expect(last.record).to.include({ id: 'a1', version: 2 });

    const resumed = await new SseReader(`${f.service.url}/api/resources?watch=true`, { 'Last-Event-ID': '1' }).open();
    const again = await resumed.until(2);
    resumed.close();
    expect(again.map((e) => e.id)).to.deep.equal(['2', '3']);
    const since = await new SseReader(`${f.service.url}/api/resources?watch=true&since_revision=2&kind=tool`).open();
    await new Promise((r) => setTimeout(r, 300));
    since.close();
    expect(since.events).to.deep.equal([]);
  });

  it('watch from a revision older than the retained log gets one expired frame and ends', async () => {
    await f.restart({ CHANGE_LOG_RETENTION: '10' });
    for (let i = 0; i < 400; i++) await f.api.put(`/api/resources/agent/a${i}`, body(agent()));
    const watch = await new SseReader(`${f.service.url}/api/resources?watch=true`, { 'Last-Event-ID': '1' }).open();
    const events = await watch.until(2, 5000).catch(() => watch.events);
    await eventually(async () => expect(watch.ended).to.equal(true));
    expect(events.map((e) => e.event)).to.deep.equal(['expired']);
  });

  it('resync corrects drift: a registry entry removed behind the controller\'s back is projected again', async () => {
    await f.restart({ RESYNC_INTERVAL: '500ms' });
    await f.api.put('/api/resources/agent/a1?wait=true', body(agent()));
    expect(defined((await f.api.get('/api/agents')).body.agents)).to.have.length(1);
    await f.service.store!.redis.hdel('svc:{r}:registry:agent', 'a1');
    expect(defined((await f.api.get('/api/agents')).body.agents)).to.have.length(0);
    await eventually(async () => expect(defined((await f.api.get('/api/agents')).body.agents).map((a: any) => a.name)).to.deep.equal(['helper']), 10_000, 100);
  });

  it('reconciles records written before any controller ran, and later writes through the change log', async () => {
    await f.restart({ SVC_ROLES: 'api' });
    await f.redis.flush();
    for (const id of ['early1', 'early2']) expect((await f.api.put(`/api/resources/agent/${id}`, body({ name: id, prompt: 'You help.' }))).status).to.equal(201);
    const admin = f.redis.client();
    expect(await admin.exists('svc:{r}:observed')).to.equal(0);
    await f.restart();
    await eventually(async () => {
      for (const id of ['early1', 'early2']) expect((await f.api.get(`/api/resources/agent/${id}/status`)).body.status.observed_version).to.equal(1);
    }, 10_000, 100);
    const late = await f.api.put('/api/resources/agent/late?wait=true', body({ name: 'late', prompt: 'You help.' }));
    expect(late.headers.get('x-svc-reconcile')).to.equal('done');
    expect(defined((await f.api.get('/api/agents')).body.agents).map((a: any) => a.name).sort()).to.deep.equal(['early1', 'early2', 'late']);
    admin.disconnect();
  });

  it('defers a reconcile while another worker holds the key\'s lease, and never overlaps it', async () => {
    const admin = f.redis.client();
    await admin.set('svc:{r}:lock:reconciling:agent:a1', 'another-worker', 'PX', 60_000);
    const put = await f.api.put('/api/resources/agent/a1', body(agent()));
    expect(put.status).to.equal(201);
    await eventually(async () => expect((await f.api.get('/metrics')).body).to.match(/svc_reconcile_deferrals_total\{kind="agent"\} [1-9]/), 10_000, 100);
    expect((await f.api.get('/api/resources/agent/a1/status')).body.status?.observed_version ?? 0).to.equal(0);
    await admin.del('svc:{r}:lock:reconciling:agent:a1');
    await eventually(async () => expect((await f.api.get('/api/resources/agent/a1/status')).body.status.observed_version).to.equal(1), 10_000, 100);
    expect(await admin.get('svc:{r}:lock:reconcile-overlaps')).to.equal(null);
    admin.disconnect();
  });
});
