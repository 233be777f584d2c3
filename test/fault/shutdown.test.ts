import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RedisServer } from '../helpers/redis-server.ts';
import { ServiceProcess } from '../helpers/process.ts';
import { Client } from '../helpers/service.ts';

describe('Shutdown: SIGTERM finishes cleanly, or by SHUTDOWN_TIMEOUT when it cannot', function () {
  this.timeout(60_000);
  const redis = new RedisServer();
  const data = mkdtempSync(path.join(os.tmpdir(), 'svc-shutdown-'));
  let svc: ServiceProcess | undefined;

  before(async () => { await redis.start(); });
  after(async () => {
    await svc?.kill('SIGKILL');
    await redis.destroy();
    rmSync(data, { recursive: true, force: true });
  });

  it('exits 0 on SIGTERM while Redis answers', async () => {
    svc = await new ServiceProcess({ REDIS_URL: redis.url, DATA_DIR: data, LOG_LEVEL: 'info' }).start();
    expect((await new Client(svc.url).put('/api/resources/agent/a1?wait=true', { scope: { kind: 'global' }, spec: { name: 'a1', prompt: 'p' }, expected_version: 0 })).status).to.equal(201);
    expect(await svc.kill('SIGTERM')).to.equal(0);
    expect(svc.stderr).to.include('service stopped');
    expect(svc.stderr).not.to.include('shutdown did not finish');
  });

  it('exits 1 at SHUTDOWN_TIMEOUT when Redis is gone and the shutdown cannot finish', async () => {
    svc = await new ServiceProcess({ REDIS_URL: redis.url, DATA_DIR: data, LOG_LEVEL: 'info', SHUTDOWN_TIMEOUT: '2s' }).start();
    await redis.stop('SIGKILL');
    expect(await svc.kill('SIGTERM')).to.equal(1);
    expect(svc.stderr).to.include('shutdown did not finish in time');
    await redis.start();
  });
});
