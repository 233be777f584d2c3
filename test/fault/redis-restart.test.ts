import { expect } from 'chai';
import { testRedis } from '../helpers/redis-cluster.ts';
import { ServiceProcess } from '../helpers/process.ts';
import { Client, eventually } from '../helpers/service.ts';

describe('Redis restarted without the last writes of a reconcile', function () {
  this.timeout(60_000);
  const redis = testRedis();
  let svc: ServiceProcess;

  before(async () => { await redis.start(); });
  after(async () => {
    await svc?.kill('SIGKILL');
    await redis.destroy();
  });

  it('reconciles every key again once the service reconnects: a status and registry entry lost with them come back', async () => {
    // NOTE: the interval resync is an hour away, so only the pass after the reconnect can bring them back.
    svc = await new ServiceProcess({ ...redis.env, RESYNC_INTERVAL: '1h' }).start();
    const api = new Client(svc.url);
    const body = { scope: { kind: 'global' }, spec: { name: 'a1', prompt: 'You help.' }, expected_version: 0 };
    expect((await api.put('/api/resources/agent/a1?wait=true', body)).status).to.equal(201);
    expect((await api.get('/api/resources/agent/a1/status')).body.status.observed_version).to.equal(1);
    // The reconcile's writes are what a restart loses (the AOF's last second, or a failover's unreplicated tail)
    // while the change-log entry behind them was acknowledged: the record stays, and nothing announces it again.
    const admin = redis.client();
    await admin.del('svc:{r}:status:agent:a1');
    await admin.hdel('svc:{r}:registry:agent', 'a1');
    admin.disconnect();
    await redis.restart('svc:{r}:status:agent:a1');
    await eventually(async () => {
      const status = await api.get('/api/resources/agent/a1/status');
      expect(status.status, JSON.stringify(status.body)).to.equal(200);
      expect(status.body.status.observed_version).to.equal(1);
      expect((await api.get('/api/agents')).body.agents.map((a: { name: string }) => a.name)).to.include('a1');
    }, 30_000, 200);
    expect((await api.get('/api/resources/agent/a1')).body.record.version).to.equal(1);
  });
});
