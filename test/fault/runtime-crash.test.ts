import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RedisServer } from '../helpers/redis-server.ts';
import { ServiceProcess } from '../helpers/process.ts';
import { Client, eventually } from '../helpers/service.ts';
import { readUiStream } from '../helpers/ui-stream.ts';

describe('Crash safety: the runtime that owns a session is SIGKILLed', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  const root = mkdtempSync(path.join(os.tmpdir(), 'svc-rtcrash-'));
  const data = mkdtempSync(path.join(os.tmpdir(), 'svc-rtcrash-data-'));
  const procs: ServiceProcess[] = [];

  before(async () => { await redis.start(); });
  after(async () => {
    for (const p of procs) await p.kill('SIGKILL');
    await redis.destroy();
    rmSync(root, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  });

  it('marks its sessions stopped with a failure, keeps their events, and resumes them on a surviving runtime', async () => {
    const env = { REDIS_URL: redis.url, DATA_DIR: data };
    const a = await new ServiceProcess(env).start();
    procs.push(a);
    const api = new Client(a.url);
    const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
    const s = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
    expect(s.state).to.equal('active');
    const turn = await readUiStream(await fetch(`${a.url}/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'remember me' }) }));
    expect(turn.done).to.equal(true);
    const before = (await api.get(`/api/sessions/${s.id}/events`)).body.events.length;

    const b = await new ServiceProcess(env).start();
    procs.push(b);
    await a.kill('SIGKILL');
    const api2 = new Client(b.url);
    const stopped = await eventually(async () => {
      const x = (await api2.get(`/api/sessions/${s.id}`)).body.session;
      expect(x.state).to.equal('stopped');
      return x;
    }, 60_000, 250);
    expect(stopped.stop_reason).to.equal('error');
    expect(stopped.failure.kind).to.equal('transport_failure');
    const events = (await api2.get(`/api/sessions/${s.id}/events`)).body.events;
    expect(events.length).to.equal(before + 1);
    expect(events.at(-1).type).to.equal('session_stopped');
    expect((await api2.get('/api/sessions?resumable=true')).body.sessions.map((x: any) => x.id)).to.deep.equal([s.id]);

    const resumed = (await api2.post(`/api/sessions/${s.id}/resume`, {})).body.session;
    expect(resumed.state).to.equal('active');
    const again = await readUiStream(await fetch(`${b.url}/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'still here' }) }));
    expect(again.chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta)).to.deep.equal(['still here']);
  });
});
