import { expect } from 'chai';
import { ProcessCluster } from '../helpers/process.ts';
import { Client, eventually } from '../helpers/service.ts';
import { readUiStream } from '../helpers/ui-stream.ts';

describe('Crash safety: the runtime that owns a session is SIGKILLed', function () {
  this.timeout(120_000);
  const cluster = new ProcessCluster('rtcrash').install();
  const { root } = cluster;

  it('marks its sessions stopped with a failure, keeps their events, and resumes them on a surviving runtime', async () => {
    const a = await cluster.start();
    const api = new Client(a.url);
    const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
    const s = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
    expect(s.state).to.equal('active');
    const turn = await readUiStream(await fetch(`${a.url}/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'remember me' }) }));
    expect(turn.done).to.equal(true);
    const before = (await api.get(`/api/sessions/${s.id}/events`)).body.events.length;

    const b = await cluster.start();
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
