import { expect } from 'chai';
import { eventually } from '../helpers/service.ts';
import { ServiceFixture } from '../helpers/fixture.ts';

const body = (prompt: string, expected_version = 0) => ({ scope: { kind: 'global' }, spec: { name: 'helper', prompt }, expected_version });

describe('Batch reconciles of projection-only kinds (relay pages, real Redis)', () => {
  const f = new ServiceFixture({ workspace: false }).install();

  it('projects a burst of writes and writes each status without a BullMQ job, leaving no lease behind', async () => {
    const ids = Array.from({ length: 60 }, (_, i) => `b${i}`);
    await Promise.all(ids.map((id) => f.api.put(`/api/resources/agent/${id}`, body(`p-${id}`))));
    const admin = f.redis.client();
    // NOTE: the second burst waits for the first's statuses: a page holding v1 and v2 of a key reconciles it once.
    const observed = async (id: string) => JSON.parse((await admin.get(`svc:{r}:status:agent:${id}`)) ?? '{}').observed_version;
    await eventually(async () => expect(await Promise.all(ids.map(observed))).to.deep.equal(ids.map(() => 1)), 20_000, 100);
    await Promise.all(ids.slice(0, 20).map((id) => f.api.put(`/api/resources/agent/${id}`, body(`p2-${id}`, 1))));
    await eventually(async () => {
      const registry = await admin.hgetall('svc:{r}:registry:agent');
      for (const [i, id] of ids.entries()) {
        const entry = JSON.parse(registry[id]);
        expect(entry.version, id).to.equal(i < 20 ? 2 : 1);
        expect(entry.spec.prompt, id).to.equal(i < 20 ? `p2-${id}` : `p-${id}`);
        const status = JSON.parse((await admin.get(`svc:{r}:status:agent:${id}`))!);
        expect(status.observed_version, id).to.equal(i < 20 ? 2 : 1);
        expect(status.conditions.find((c: { type: string }) => c.type === 'Ready').status).to.equal('True');
      }
    }, 20_000, 100);
    // No agent reconcile went through the queue (the resync at start had no agent keys), none overlapped.
    expect(await admin.get('svc:{q:reconcile-agent}:reconcile-agent:id')).to.equal(null);
    expect(await admin.keys('svc:{r}:lock:reconciling:*')).to.deep.equal([]);
    expect(await admin.get('svc:{r}:lock:reconcile-overlaps')).to.equal(null);
    expect((await f.api.get("/metrics")).body).to.match(/svc_reconciles_total\{kind="agent",outcome="ready"\} 80\n/);
    admin.disconnect();
  });

  it('answers ?wait=true from the batch announcement, and a delete removes the entry and the status', async () => {
    const put = await f.api.put('/api/resources/agent/w1?wait=true', body('hi'));
    expect(put.status).to.equal(201);
    expect((await f.api.get('/api/resources/agent/w1/status')).body.status.observed_version).to.equal(1);
    const del = await f.api.delete('/api/resources/agent/w1', { expected_version: 1 });
    expect(del.status).to.equal(204);
    const admin = f.redis.client();
    await eventually(async () => {
      expect(await admin.hget('svc:{r}:registry:agent', 'w1')).to.equal(null);
      expect(await admin.get('svc:{r}:status:agent:w1')).to.equal(null);
    }, 10_000, 100);
    admin.disconnect();
  });

  it('hands a key whose lease another reconcile holds to its queue, which reconciles it after the lease ends', async () => {
    const admin = f.redis.client();
    await admin.set('svc:{r}:lock:reconciling:agent:held', 'another-worker', 'PX', 60_000);
    await f.api.put('/api/resources/agent/held', body('a'));
    await f.api.put('/api/resources/agent/free', body('b'));
    await eventually(async () => expect(await admin.hget('svc:{r}:registry:agent', 'free')).to.not.equal(null), 10_000, 100);
    await eventually(async () => expect(Number(await admin.get('svc:{q:reconcile-agent}:reconcile-agent:id'))).to.be.greaterThan(0), 10_000, 100);
    expect(await admin.hget('svc:{r}:registry:agent', 'held')).to.equal(null);
    expect(await admin.get('svc:{r}:status:agent:held')).to.equal(null);
    expect(await admin.get('svc:{r}:lock:reconciling:agent:held')).to.equal('another-worker');
    await admin.del('svc:{r}:lock:reconciling:agent:held');
    await eventually(async () => expect(JSON.parse((await admin.get('svc:{r}:status:agent:held'))!).observed_version).to.equal(1), 10_000, 100);
    expect(await admin.get('svc:{r}:lock:reconcile-overlaps')).to.equal(null);
    admin.disconnect();
  });
});
