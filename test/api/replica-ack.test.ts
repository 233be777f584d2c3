import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';

describe('REDIS_MIN_REPLICAS_ACK: a write the replicas do not confirm answers 503 and says it may have happened', function () {
  // NOTE: the test Redis has no replica, so WAIT 1 always falls short: the path a lost replica takes.
  const f = new ServiceFixture({ workspace: false, env: { REDIS_MIN_REPLICAS_ACK: '1', REDIS_REPLICA_ACK_TIMEOUT: '100ms' } }).install();

  it('answers a create 503 replication_unconfirmed with Retry-After, the write applied on the master; reads are not held', async () => {
    const res = await f.api.put('/api/resources/agent/a1', { scope: { kind: 'global' }, spec: { name: 'a1', prompt: 'p' }, expected_version: 0 });
    expect(res.status).to.equal(503);
    expect(res.headers.get('retry-after')).to.equal('1');
    expect(res.body.diagnostic).to.include({ code: 'replication_unconfirmed' });
    expect(res.body.diagnostic.evidence).to.include({ replicas_acked: 0, replicas_wanted: 1 });
    expect(res.body.error).to.match(/may or may not survive a failover/);
    // The write did happen on the master: a read finds it, and a retry of the create is a conflict, not a second record.
    const got = await f.api.get('/api/resources/agent/a1');
    expect(got.status).to.equal(200);
    expect(got.body.record.version).to.equal(1);
    const again = await f.api.put('/api/resources/agent/a1', { scope: { kind: 'global' }, spec: { name: 'a1', prompt: 'p' }, expected_version: 0 });
    expect(again.status).to.equal(409);
    expect((await f.api.get('/api/resources/agent/a1')).body.record.version).to.equal(1);
  });

  it('leaves a refused write alone: a 422 stays a 422 (no WAIT for what was not written)', async () => {
    const res = await f.api.put('/api/resources/agent/a2', { scope: { kind: 'global' }, spec: { name: '' }, expected_version: 0 });
    expect(res.status).to.equal(422);
    expect((await f.api.get('/api/resources/agent/a2')).status).to.equal(404);
  });
});
