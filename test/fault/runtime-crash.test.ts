import { expect } from 'chai';
import { SCRIPTED_COMMAND, sessionTokens } from '../helpers/agents.ts';
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

describe('Crash safety: the token of a session whose runtime was lost', function () {
  this.timeout(120_000);
  const cluster = new ProcessCluster('rttoken').install();

  it('is refused once the session is resumed on another runtime, whose new token is taken', async () => {
    const a = await cluster.start();
    const api = new Client(a.url);
    const ws = (await api.post('/api/workspaces', { root_dir: cluster.root })).body.workspace;
    // NOTE: an agent of its own process, whose environment holds the session's token (the agent's credential).
    const ag = await api.post('/api/agents', { scope: 'global', agent: { name: 'solo', prompt: 'p', provider: 'local', command: SCRIPTED_COMMAND } });
    expect(ag.status, JSON.stringify(ag.body)).to.be.oneOf([200, 201]);
    const s = (await api.post('/api/sessions', { workspace: ws.id, agent_name: 'solo' })).body.session;
    expect(s.state).to.equal('active');
    const old = await eventually(async () => { const [t] = sessionTokens(s.id); expect(t).to.match(/^svc_st_/); return t; });
    const claim = (url: string, token: string) => fetch(`${url}/api/agent/tasks/claim-next`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: '{}' });
    expect((await claim(a.url, old)).status).to.equal(204);

    const b = await cluster.start();
    await a.kill('SIGKILL');
    const api2 = new Client(b.url);
    await eventually(async () => expect((await api2.get(`/api/sessions/${s.id}`)).body.session.state).to.equal('stopped'), 60_000, 250);
    expect((await claim(b.url, old)).status).to.equal(401);
    const resumed = (await api2.post(`/api/sessions/${s.id}/resume`, {})).body.session;
    expect(resumed.state).to.equal('active');
    expect(resumed).to.not.have.property('token_hash');
    const fresh = await eventually(async () => { const t = sessionTokens(s.id).find((x) => x !== old); expect(t).to.match(/^svc_st_/); return t!; });
    // NOTE: the lost runtime's agent may still run with the old token: the resumed session answers only to the new one.
    const refused = await claim(b.url, old);
    expect(refused.status).to.equal(401);
    expect((await refused.json()).diagnostic.code).to.equal('unauthenticated');
    expect((await claim(b.url, fresh)).status).to.equal(204);
  });
});
