import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { childPids } from '../helpers/agent-processes.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { readUiStream } from '../helpers/ui-stream.ts';
import { SCRIPTED, SCRIPTED_COMMAND } from '../helpers/agents.ts';

/** agentPids lists the built-in agent's processes this (in-process) service runs. */
const agentPids = () => childPids(process.pid, SCRIPTED);

describe('Agent process pooling and idle suspension (real Redis, real scripted agent processes)', function () {
  this.timeout(120_000);
  const f = new ServiceFixture({ autoStart: false }).install();
  const start = (env: Record<string, string> = {}) => f.start(env);
  const create = async () => {
    const res = await f.api.post('/api/sessions', { workspace: f.ws.id });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.session.state).to.equal('active');
    return res.body.session as { id: string; acp_session_id: string };
  };
  const prompt = async (id: string, message: string) => {
    const res = await fetch(`${f.service.url}/api/workspaces/${f.ws.id}/sessions/${id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message }) });
    const { chunks } = await readUiStream(res);
    return chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta as string);
  };
  const events = async (id: string, q = '') => (await f.api.get(`/api/sessions/${id}/events${q}`)).body.events as any[];
  const session = async (id: string) => (await f.api.get(`/api/sessions/${id}`)).body.session;

  afterEach(() => eventually(async () => expect(agentPids(), 'agent processes left after stop').to.deep.equal([])));

  it('sessions of one agent share a process and stay isolated: events, a cancel and a permission request reach only their own session', async () => {
    await start();
    const a = await create();
    const b = await create();
    expect(agentPids()).to.have.length(1);
    expect(a.acp_session_id).to.not.equal(b.acp_session_id);

    const aTurn = prompt(a.id, 'alpha says hi\n/permission deploy alpha');
    const request = await eventually(async () => {
      const r = (await events(a.id, '?type=permission')).find((e) => e.content.action === 'request');
      expect(r).to.not.equal(undefined);
      return r;
    });
    const bTurn = prompt(b.id, 'beta says hi\n/sleep 60000');
    await eventually(async () => expect((await events(b.id, '?type=agent_message')).map((e) => e.content.text)).to.deep.equal(['beta says hi']));
    // Cancelling b ends b's turn only: a still waits for its permission.
    expect((await f.api.post(`/api/sessions/${b.id}/prompt/cancel`, {})).status).to.be.lessThan(300);
    expect(await bTurn).to.deep.equal(['beta says hi']);
    expect((await session(a.id)).badge).to.equal('running');
    expect((await events(a.id, '?type=permission')).map((e) => e.content.action)).to.deep.equal(['request']);
    await f.api.post(`/api/sessions/${a.id}/approve`, { turn_id: request.turn_id, decision: 'allow-once' });
    expect(await aTurn).to.deep.equal(['alpha says hi', 'permission granted']);

    const aEvents = await events(a.id);
    const bEvents = await events(b.id);
    expect(new Set(aEvents.map((e) => e.content.session_id))).to.deep.equal(new Set([a.acp_session_id]));
    expect(new Set(bEvents.map((e) => e.content.session_id))).to.deep.equal(new Set([b.acp_session_id]));
    expect(JSON.stringify(aEvents)).to.not.include('beta');
    expect(JSON.stringify(bEvents)).to.not.include('alpha');
    expect(bEvents.filter((e) => e.type === 'permission')).to.deep.equal([]);
    expect(aEvents.filter((e) => e.content.kind === 'transcript_marker.prompt_cancel')).to.deep.equal([]);
    expect(bEvents.filter((e) => e.content.kind === 'transcript_marker.prompt_cancel')).to.have.length(1);
    expect(await prompt(b.id, 'beta again')).to.deep.equal(['beta again']);
  });

  it('a crash of a shared process stops exactly the sessions it hosted, each agent_crashed and resumable with its transcript', async () => {
    await start({ AGENT_SESSIONS_PER_PROCESS: '2' });
    const a = await create();
    const b = await create();
    const c = await create();
    expect(agentPids()).to.have.length(2);
    expect(await prompt(b.id, 'b remembers this')).to.deep.equal(['b remembers this']);

    await prompt(a.id, '/crash 7');
    for (const s of [a, b]) {
      const stopped = await eventually(async () => {
        const x = await session(s.id);
        expect(x.state).to.equal('stopped');
        return x;
      });
      expect(stopped, s.id).to.include({ stop_reason: 'agent_crashed' });
      expect(stopped.failure.kind).to.equal('process_exit');
      expect(await events(s.id, '?type=session_stopped')).to.have.length(1);
    }
    expect(await session(c.id)).to.include({ state: 'active' });
    expect(await events(c.id, '?type=session_stopped')).to.deep.equal([]);
    expect(await prompt(c.id, 'c is fine')).to.deep.equal(['c is fine']);
    expect(agentPids()).to.have.length(1);

    for (const s of [a, b]) {
      const resumed = (await f.api.post(`/api/sessions/${s.id}/resume`, {})).body.session;
      expect(resumed).to.include({ state: 'active', acp_session_id: s.acp_session_id });
    }
    expect(await prompt(b.id, '/history')).to.deep.equal(['b remembers this']);
    expect(await prompt(a.id, 'a is back')).to.deep.equal(['a is back']);
  });

  it('an idle session leaves its agent process after SESSION_IDLE_SUSPEND; the next prompt resumes it with its transcript, its state and events unchanged', async () => {
    await start({ SESSION_IDLE_SUSPEND: '1s' });
    const a = await create();
    const b = await create();
    expect(await prompt(a.id, 'first line')).to.deep.equal(['first line']);
    expect(await prompt(b.id, 'other session')).to.deep.equal(['other session']);
    // Both idle: both leave, and the shared process exits with its last session.
    await eventually(async () => expect(agentPids()).to.deep.equal([]), 20_000, 100);
    const before = await events(a.id);
    const suspended = await session(a.id);
    expect(suspended).to.include({ state: 'active', acp_session_id: a.acp_session_id, badge: 'idle', attachable: true });

    expect(await prompt(a.id, '/history')).to.deep.equal(['first line']);
    expect(agentPids()).to.have.length(1);
    const after = await events(a.id);
    expect(after.slice(0, before.length)).to.deep.equal(before);
    expect(after.slice(before.length).map((e) => e.type)).to.deep.equal(['user_message', 'agent_message', 'done']);
    expect(after.filter((e) => e.type === 'session_stopped')).to.deep.equal([]);
    expect(await session(a.id)).to.include({ state: 'active', acp_session_id: a.acp_session_id });
    // Prompts sent at once to a suspended session wake it once and both run.
    await eventually(async () => expect(agentPids()).to.deep.equal([]), 20_000, 100);
    // NOTE: the API may answer the second 202 (queued) when the first turn has begun: both must run either way.
    await Promise.all([prompt(b.id, 'x'), prompt(b.id, 'y')]);
    await eventually(async () => expect((await events(b.id, '?type=done')).length).to.equal(3));
    expect((await events(b.id, '?type=agent_message')).map((e) => e.content.text).sort()).to.deep.equal(['other session', 'x', 'y']);
    await eventually(async () => expect((await session(b.id)).badge).to.equal('idle'));
    const order = (await events(b.id, '?type=user_message')).map((e) => e.content.text);
    expect(order.slice(0, 1)).to.deep.equal(['other session']);
    expect(await prompt(b.id, '/history')).to.deep.equal([order.join(' | ')]);
  });

  it('an agent definition shares a process only when its env opts in with SVC_AGENT_POOL=1; then no session identity is in the process environment', async () => {
    await start();
    const command = SCRIPTED_COMMAND;
    for (const [name, env] of [['pooled', { SVC_AGENT_POOL: '1' }], ['single', {}]] as const) {
      const res = await f.api.post('/api/agents', { scope: 'global', agent: { name, prompt: 'p', provider: 'local', command, env } });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
    }
    const made = async (agent: string) => (await f.api.post('/api/sessions', { workspace: f.ws.id, agent_name: agent })).body.session;
    const p1 = await made('pooled');
    const p2 = await made('pooled');
    expect(agentPids()).to.have.length(1);
    const environ = readFileSync(`/proc/${agentPids()[0]}/environ`, 'utf8');
    expect(environ).to.include('SVC_AGENT_POOL=1');
    expect(environ).to.not.include('SVC_SESSION_ID=').and.not.include('SVC_SESSION_TOKEN=');
    await made('single');
    await made('single');
    expect(agentPids()).to.have.length(3);
    expect(await prompt(p1.id, 'one')).to.deep.equal(['one']);
    expect(await prompt(p2.id, 'two')).to.deep.equal(['two']);
  });

  it('honours AGENT_SESSIONS_PER_PROCESS: 33 sessions of the default agent run on 2 processes (default 32)', async () => {
    await start();
    const made = [];
    for (let i = 0; i < 33; i++) made.push(await create());
    expect(agentPids()).to.have.length(2);
    expect(new Set(made.map((s) => s.acp_session_id)).size).to.equal(33);
    // Stopping the 33rd session leaves its process empty: it exits; the other keeps its 32 sessions.
    await f.api.post(`/api/sessions/${made[32].id}/stop`, {});
    await eventually(async () => expect(agentPids()).to.have.length(1));
    expect(await prompt(made[0].id, 'still here')).to.deep.equal(['still here']);
  });

  it('starts a pool\'s next process ahead once a quarter or less of its slots are free (a warm spare): the session that needs it lands on it; spares end with the last session', async () => {
    await start({ AGENT_SESSIONS_PER_PROCESS: '4' });
    const a = await create();
    const b = await create();
    expect(agentPids(), 'two of four slots free: no spare yet').to.have.length(1);
    const c = await create();
    await eventually(async () => expect(agentPids(), 'one of four slots free: a spare').to.have.length(2));
    // The spare hosts nothing: when the key's last session leaves, it ends too.
    for (const s of [a, b, c]) await f.api.post(`/api/sessions/${s.id}/stop`, {});
    await eventually(async () => expect(agentPids(), 'the spare outlived the last session').to.deep.equal([]));

    for (let i = 0; i < 3; i++) await create();
    await eventually(async () => expect(agentPids()).to.have.length(2));
    const warm = agentPids();
    await create();
    const e = await create();
    expect(agentPids(), 'the fifth session started a process of its own').to.deep.equal(warm);
    expect(await prompt(e.id, 'on the spare')).to.deep.equal(['on the spare']);
  });
});
