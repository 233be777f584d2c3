import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startSignals, signalStarted } from '../../runtime/sessions/start-signal.ts';
import { Keys } from '../../store/keys.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { ServiceProcess } from '../helpers/process.ts';
import { Client } from '../helpers/service.ts';

/** A wait no signal ends outlasts the test's timeout, so a missing signal fails the test. */
const NEVER = 3_600_000;

describe('Session start signal: the API waits for a start by notification, across processes', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  before(() => redis.start());
  after(() => redis.destroy());

  it('wakes the waiters of the signalled session only, remembers a signal sent before the wait, and times out otherwise', async () => {
    const conn = redis.client();
    const keys = new Keys('sig-test:');
    const signals = startSignals(conn, keys);
    const a = signals.listen('sess-a');
    const a2 = signals.listen('sess-a');
    const b = signals.listen('sess-b');
    try {
      expect(await a.ready).to.equal(true);
      expect(await b.ready).to.equal(true);
      let bWoke = false;
      const bWait = b.next(NEVER).then(() => { bWoke = true; });
      await Promise.all([a.next(NEVER), a2.next(NEVER), signalStarted(conn, keys, 'sess-a')]);
      expect(bWoke, 'another session\'s waiter').to.equal(false);
      // A signal that arrives between two waits is not lost.
      await signalStarted(conn, keys, 'sess-b');
      await bWait;
      await signalStarted(conn, keys, 'sess-a');
      await new Promise((r) => setTimeout(r, 200));
      await a.next(NEVER);
      // With no signal, a wait ends at its time limit.
      await a2.next(10);
    } finally {
      a.close();
      a2.close();
      b.close();
      conn.disconnect();
    }
  });

  it('an api-only process answers creates and failed starts from a runtime-only process (active, and stopped with startup_failure when its start fails)', async () => {
    const root = mkdtempSync(path.join(os.tmpdir(), 'svc-signal-ws-'));
    const data = mkdtempSync(path.join(os.tmpdir(), 'svc-signal-data-'));
    const procs = [
      await new ServiceProcess({ REDIS_URL: redis.url, DATA_DIR: data, SVC_ROLES: 'api', SECRET_ENV_ALLOWLIST: 'STOLEN_*' }).start(),
      await new ServiceProcess({ REDIS_URL: redis.url, DATA_DIR: data, SVC_ROLES: 'runtime,controller' }).start(),
    ];
    try {
      const api = new Client(procs[0].url);
      const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
      const created = await Promise.all(Array.from({ length: 5 }, () => api.post('/api/sessions', { workspace: ws.id })));
      for (const res of created) {
        expect(res.status, JSON.stringify(res.body)).to.equal(201);
        expect(res.body.session.state).to.equal('active');
      }
      const put = await api.put('/api/resources/agent/leaky?wait=true', { scope: { kind: 'global' }, spec: { name: 'leaky', prompt: 'p', secret_env: { STOLEN: 'env:STOLEN_TOKEN' } }, expected_version: 0 });
      expect(put.status, JSON.stringify(put.body)).to.equal(201);
      const failed = await api.post('/api/sessions', { workspace: ws.id, agent_name: 'leaky' });
      expect(failed.status, JSON.stringify(failed.body)).to.equal(201);
      expect(failed.body.session).to.include({ state: 'stopped', stop_reason: 'error' });
      expect(failed.body.session.failure.kind).to.equal('startup_failure');
      // A stopped session resumed answers once it is active again.
      const resumed = await api.post(`/api/sessions/${created[0].body.session.id}/stop`, {}).then(() => api.post(`/api/sessions/${created[0].body.session.id}/resume`, {}));
      expect(resumed.body.session.state).to.equal('active');
    } finally {
      for (const p of procs) await p.kill('SIGTERM');
      rmSync(root, { recursive: true, force: true });
      rmSync(data, { recursive: true, force: true });
    }
  });
});
