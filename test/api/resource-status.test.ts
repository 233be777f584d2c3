import { expect } from 'chai';
import type { ResourceStatus } from '../../store/types.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { SseReader } from '../helpers/sse.ts';

const body = (name: string, expected_version = 0) => ({ scope: { kind: 'global' }, spec: { name, prompt: 'You help.' }, expected_version });
const degraded = (observed_version: number, message: string): ResourceStatus => ({
  observed_version, last_reconciled_at: new Date().toISOString(), last_error: message,
  conditions: [{ type: 'Degraded', status: 'True', reason: 'test_reason', message, last_transition_time: new Date().toISOString() }],
});

describe('Resource statuses in lists and the status watch (HTTP, real Redis)', () => {
  const f = new ServiceFixture({ workspace: false }).install();
  const data = (e: { data: string }) => JSON.parse(e.data);

  it('?include=status adds each record\'s status (null before its first reconcile); without it the list is unchanged', async () => {
    await f.api.put('/api/resources/agent/a1?wait=true', body('a1'));
    await f.api.put('/api/resources/agent/a2?wait=true', body('a2'));
    // A record whose status is gone (as before its first reconcile).
    await f.service.store!.redis.del('svc:{r}:status:agent:a2');
    const plain = (await f.api.get('/api/resources/agent')).body.records;
    expect(plain.map((r: any) => r.status)).to.deep.equal([undefined, undefined]);
    const res = await f.api.get('/api/resources/agent?include=status');
    expect(res.status).to.equal(200);
    expect(res.headers.get('x-svc-revision')).to.equal('2');
    const [a1, a2] = res.body.records;
    expect(a1).to.include({ id: 'a1', version: 1 });
    expect(a1.status).to.deep.equal((await f.api.get('/api/resources/agent/a1/status')).body.status);
    expect(a1.status.observed_version).to.equal(1);
    expect(a2).to.include({ id: 'a2', status: null });
    const all = (await f.api.get('/api/resources?include=status')).body.records;
    expect(all.map((r: any) => [r.id, r.status?.observed_version ?? null])).to.deep.equal([['a1', 1], ['a2', null]]);
    const bad = await f.api.get('/api/resources?include=spec');
    expect(bad.status).to.equal(422);
    expect(bad.body.diagnostic.evidence).to.have.property('include');
  });

  it('status watch: a snapshot of the kind first, then each status change (also one no edit caused), none twice, none of other kinds', async () => {
    await f.api.put('/api/resources/agent/a1?wait=true', body('a1'));
    const before = (await f.api.get('/api/resources/agent/a1/status')).body.status;
    const watch = await new SseReader(`${f.service.url}/api/resources/status/watch?kind=agent`).open();
    expect(watch.status).to.equal(200);
    const [snap] = await watch.until(1);
    expect(snap.event).to.equal('snapshot');
    expect(data(snap)).to.deep.equal({ type: 'snapshot', kind: 'agent', statuses: [{ id: 'a1', status: before }] });

    // A controller's status write with no edit of the record (a retry's outcome): pushed, with the stored status.
    const store = f.service.store!;
    const d = degraded(1, 'backend went away');
    await store.writeStatus('agent', 'a1', d, await store.revision());
    // The same status written again is not sent again; another kind's changes are never sent.
    await store.writeStatus('agent', 'a1', d, await store.revision());
    await f.api.put('/api/resources/tool/t1?wait=true', { scope: { kind: 'global' }, spec: { name: 't1', description: 'x', command: 'true' }, expected_version: 0 }).catch(() => undefined);
    await f.api.put('/api/resources/agent/a2?wait=true', body('a2'));
    await f.api.delete('/api/resources/agent/a1?wait=true', { expected_version: 1 });
    const events = await watch.until(4);
    await new Promise((r) => setTimeout(r, 300));
    watch.close();
    expect(watch.events.map((e) => e.event)).to.deep.equal(['snapshot', 'status', 'status', 'status']);
    expect(data(watch.events[1])).to.deep.equal({ type: 'status', kind: 'agent', id: 'a1', status: d });
    expect(data(events[2])).to.include({ id: 'a2' });
    expect(data(events[2]).status.observed_version).to.equal(1);
    expect(data(events[3])).to.deep.equal({ type: 'status', kind: 'agent', id: 'a1', status: null });

    // A reconnect starts from the latest state again; ?id= narrows to one record.
    const again = await new SseReader(`${f.service.url}/api/resources/status/watch?kind=agent`).open();
    const [snap2] = await again.until(1);
    again.close();
    expect(data(snap2).statuses.map((s: any) => s.id)).to.deep.equal(['a2']);
    const one = await new SseReader(`${f.service.url}/api/resources/status/watch?kind=agent&id=a3`).open();
    expect(data((await one.until(1))[0]).statuses).to.deep.equal([]);
    await f.api.put('/api/resources/agent/a2', body('a2', 1));
    await f.api.put('/api/resources/agent/a3?wait=true', body('a3'));
    const got = await one.until(2);
    await new Promise((r) => setTimeout(r, 300));
    one.close();
    expect(one.events.slice(1).map((e) => data(e).id)).to.deep.equal(['a3']);
    expect(data(got[1]).status.observed_version).to.equal(1);
  });

  it('status watch: a status written while its subscription was down is sent once the subscription is back', async function () {
    // NOTE: one Redis: on a cluster the subscription sits on one node of several, which this CLIENT KILL may miss.
    if (process.env.TEST_REDIS === 'cluster') this.skip();
    await f.api.put('/api/resources/agent/a1?wait=true', body('a1'));
    const watch = await new SseReader(`${f.service.url}/api/resources/status/watch?kind=agent`).open();
    const [snap] = await watch.until(1);
    expect(data(snap).statuses.map((s: any) => s.id)).to.deep.equal(['a1']);
    // NOTE: written straight to Redis with no announcement, as one whose announcement a dropped connection lost.
    const admin = f.redis.client();
    const d = degraded(1, 'written while the subscription was down');
    try {
      await admin.set('svc:{r}:status:agent:a1', JSON.stringify(d));
      expect(await admin.client('KILL', 'TYPE', 'pubsub')).to.be.greaterThan(0);
      const events = await watch.until(2);
      expect(events.map((e) => e.event)).to.deep.equal(['snapshot', 'status']);
      expect(data(events[1])).to.deep.equal({ type: 'status', kind: 'agent', id: 'a1', status: d });
    } finally {
      watch.close();
      admin.disconnect();
    }
  });

  it('status watch refuses a missing or unknown kind before it opens; the record route is unchanged', async () => {
    const missing = await f.api.get('/api/resources/status/watch');
    expect(missing.status).to.equal(422);
    expect(missing.body.diagnostic.evidence).to.have.property('kind');
    const unknown = await f.api.get('/api/resources/status/watch?kind=nope');
    expect(unknown.status).to.be.oneOf([400, 404, 422]);
    expect(unknown.headers.get('content-type')).to.include('application/json');
    await f.api.put('/api/resources/agent/status?wait=true', body('status'));
    expect((await f.api.get('/api/resources/agent/status')).body.record).to.include({ id: 'status' });
  });
});
