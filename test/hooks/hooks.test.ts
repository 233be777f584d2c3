import { expect } from 'chai';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { lines, writeHookScripts } from './scripts.ts';

describe('hooks on every event (real Redis, real subprocess hooks)', function () {
  this.timeout(120_000);
  const f = new ServiceFixture({ env: { HOOK_RETRY_BACKOFF: '100ms', HOOK_ATTEMPTS: '3' } }).install();
  let dir = '';
  let scripts: ReturnType<typeof writeHookScripts>;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-hooks-'));
    scripts = writeHookScripts(dir);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const put = async (id: string, spec: Record<string, unknown>, scope: unknown = { kind: 'global' }) => {
    const res = await f.api.put(`/api/resources/hook.binding/${id}?wait=true`, { scope, spec: { name: id, ...spec }, expected_version: 0 });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  };
  const node = (script: string, ...args: string[]) => ({ command: process.execPath, args: [script, ...args] });
  const newSession = async (body: Record<string, unknown> = {}) => {
    const res = await f.api.post('/api/sessions', { workspace: f.ws.id, ...body });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.session as { id: string; agent_name: string };
  };
  const stop = async (id: string) => expect((await f.api.post(`/api/sessions/${id}/stop`, {})).status).to.be.oneOf([200, 202, 204]);
  const prompt = (id: string, message: string) => fetch(`${f.service.url}/api/workspaces/${f.ws.id}/sessions/${id}/prompt`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message }),
  });
  const runs = async (q: string) => (await f.api.get(`/api/hooks/runs?${q}`)).body.runs as Record<string, any>[];
  const settle = () => new Promise((r) => setTimeout(r, 1500));

  it('an async audit hook on session.post_stop receives the event JSON once per stop, and every run is recorded', async () => {
    const out = path.join(dir, 'audit.jsonl');
    await put('audit', { event: 'session.post_stop', ...node(scripts.audit, out) });
    const a = await newSession();
    const b = await newSession();
    await stop(a.id);
    await stop(b.id);
    await eventually(async () => expect(lines(out)).to.have.length(2));
    await settle();
    const got = lines(out);
    expect(got.map((e) => e.session_id).sort()).to.deep.equal([a.id, b.id].sort());
    for (const e of got) {
      expect(e).to.include({ event: 'session.post_stop', workspace_id: f.ws.id, agent_name: a.agent_name, stop_reason: 'user_canceled' });
      expect(e.event_id).to.match(/^\d+-\d+$/);
    }
    // Runs: listed, filterable, recorded on the bus and in /metrics; never a hook's output.
    // NOTE: a run is recorded (runs, bus, metrics) after its process exits, which follows its last write.
    const listed = await eventually(async () => {
      const r = await runs('binding=audit');
      expect(r).to.have.length(2);
      return r;
    });
    for (const r of listed) expect(r).to.include({ binding: 'audit', name: 'audit', event: 'session.post_stop', mode: 'async', outcome: 'allow', attempt: 1, executor: 'subprocess' });
    expect(await runs('binding=audit&event=turn.end')).to.deep.equal([]);
    expect(await runs('binding=audit&limit=1')).to.have.length(1);
    expect((await f.api.get('/api/hooks/runs?event=nope')).status).to.equal(422);
    const bus = await f.service.bus!.latest(500);
    const complete = bus.filter((e) => e.type === 'hook.dispatch.complete' && e.data.binding === 'audit');
    expect(complete).to.have.length(2);
    expect(complete[0].data).to.include({ event: 'session.post_stop', outcome: 'allow', mode: 'async' });
    expect(complete[0].data.duration_ms).to.be.a('number');
    expect(bus.filter((e) => e.type === 'hook.dispatch.start' && e.data.binding === 'audit')).to.have.length(2);
    const metrics = await (await fetch(`${f.service.url}/metrics`)).text();
    expect(metrics).to.include('svc_hook_runs_total{event="session.post_stop",mode="async",outcome="allow"} 2');
    expect(metrics).to.include('svc_hook_run_duration_seconds_count{mode="async"} 2');
  });

  it('a required sync hook on session.pre_create denies a session: 403 hook_denied, nothing stored, the hook named', async () => {
    await put('gatekeeper', { event: 'session.pre_create', mode: 'sync', required: true, ...node(scripts.deny, 'no sessions today') });
    const before = (await f.api.get('/api/sessions')).body.sessions.length;
    const res = await f.api.post('/api/sessions', { workspace: f.ws.id });
    expect(res.status, JSON.stringify(res.body)).to.equal(403);
    expect(JSON.stringify(res.body)).to.include('hook_denied').and.include('gatekeeper').and.include('no sessions today');
    expect((await f.api.get('/api/sessions')).body.sessions).to.have.length(before);
    expect((await f.service.bus!.latest(200)).filter((e) => e.type === 'session.post_create')).to.deep.equal([]);
    await eventually(async () => expect(await runs('binding=gatekeeper')).to.have.length(1));
    expect((await runs('binding=gatekeeper'))[0]).to.include({ event: 'session.pre_create', mode: 'sync', outcome: 'deny', reason: 'no sessions today' });
  });

  it('an optional sync hook that crashes (or times out) does not block; a required one that crashes does', async () => {
    const count = path.join(dir, 'crash-runs');
    await put('crashy', { event: 'session.pre_create', mode: 'sync', ...node(scripts.crash, count) });
    await put('sleepy', { event: 'session.pre_create', mode: 'sync', timeout: '200ms', command: process.execPath, args: ['-e', 'setTimeout(()=>{}, 5000)'] });
    const s = await newSession();
    expect(s.id).to.match(/^sess-/);
    expect(readFileSync(count, 'utf8').split('\n').filter(Boolean)).to.have.length(1);
    await eventually(async () => {
      const outcomes = (await runs('event=session.pre_create')).map((r) => [r.name, r.outcome, r.reason]);
      expect(outcomes).to.deep.include.members([['crashy', 'error', 'exited with code 1'], ['sleepy', 'error', 'timed out after 200 ms']]);
    });

    await put('crashy-required', { event: 'session.pre_create', mode: 'sync', required: true, ...node(scripts.crash, count) });
    const refused = await f.api.post('/api/sessions', { workspace: f.ws.id });
    expect(refused.status).to.equal(403);
    expect(JSON.stringify(refused.body)).to.include('hook_denied').and.include('crashy-required');
  });

  it('matcher fields filter: a binding whose agent_name or workspace matcher does not match is not run', async () => {
    const hit = path.join(dir, 'hit.jsonl');
    const miss = path.join(dir, 'miss.jsonl');
    await put('hit', { event: 'session.post_stop', matcher: { agent_name: 'scr*' }, ...node(scripts.audit, hit) });
    await put('miss', { event: 'session.post_stop', matcher: { agent_name: 'someone-else' }, ...node(scripts.audit, miss) });
    await put('elsewhere', { event: 'session.pre_create', mode: 'sync', required: true, matcher: { workspace_id: 'ws-other' }, ...node(scripts.deny, 'not here') });
    const other = (await f.api.post('/api/workspaces', { root_dir: dir })).body.workspace;
    await put('scoped-out', { event: 'session.post_stop', ...node(scripts.audit, miss) }, { kind: 'workspace', id: other.id });
    const s = await newSession();
    expect(s.agent_name).to.equal('scripted');
    await stop(s.id);
    await eventually(async () => expect(lines(hit)).to.have.length(1));
    await settle();
    expect(existsSync(miss)).to.equal(false);
    await eventually(async () => expect((await runs('')).map((r) => r.name)).to.include('hit'));
    const names = (await runs('')).map((r) => r.name);
    expect(names).to.include('hit').and.not.include('miss').and.not.include('elsewhere').and.not.include('scoped-out');
  });

  it('a failing async hook is retried with backoff, then dead-lettered with its event', async () => {
    const count = path.join(dir, 'tries');
    await put('flaky', { event: 'session.post_stop', ...node(scripts.crash, count) });
    const s = await newSession();
    await stop(s.id);
    await eventually(async () => expect((await f.api.get('/api/hooks/dead-letters?binding=flaky')).body.dead_letters).to.have.length(1));
    await settle();
    expect(readFileSync(count, 'utf8').split('\n').filter(Boolean)).to.have.length(3);
    const dead = (await f.api.get('/api/hooks/dead-letters')).body.dead_letters[0];
    expect(dead.run).to.include({ binding: 'flaky', outcome: 'dead', attempt: 3, event: 'session.post_stop', session_id: s.id });
    expect(dead.input).to.include({ event: 'session.post_stop', session_id: s.id });
    const tries = (await runs('binding=flaky')).map((r) => [r.attempt, r.outcome]).reverse();
    expect(tries).to.deep.equal([[1, 'error'], [2, 'error'], [3, 'dead']]);
    const metrics = await (await fetch(`${f.service.url}/metrics`)).text();
    expect(metrics).to.include('svc_hook_runs_total{event="session.post_stop",mode="async",outcome="dead"} 1');
  });

  it('runs a binding\'s events of one session one at a time, in order', async () => {
    const out = path.join(dir, 'turns.jsonl');
    await put('turns', { event: 'turn.start', ...node(scripts.slowAudit, out) });
    const s = await newSession();
    for (let i = 0; i < 5; i++) await (await prompt(s.id, `hello ${i}`)).text();
    await eventually(async () => expect(lines(out)).to.have.length(5));
    const seqs = lines(out).map((e) => e.sequence as number);
    expect(seqs).to.deep.equal([...seqs].sort((x, y) => x - y));
    expect(lines(out).map((e) => e.text)).to.deep.equal([0, 1, 2, 3, 4].map((i) => `hello ${i}`));
  });

  it('gates session.pre_resume, session.pre_stop and input.pre_submit; native built-ins deny and record', async () => {
    const s = await newSession();
    await put('no-prompts', { event: 'input.pre_submit', mode: 'sync', metadata: { builtin: 'deny', reason: 'read-only hour' } });
    const denied = await prompt(s.id, 'hi');
    expect(denied.status).to.equal(403);
    expect(await denied.text()).to.include('hook_denied').and.include('read-only hour');
    expect((await f.api.get(`/api/workspaces/${f.ws.id}/sessions/${s.id}/events`)).body.events.filter((e: any) => e.type === 'user_message')).to.deep.equal([]);

    await put('keep-alive', { event: 'session.pre_stop', mode: 'sync', metadata: { builtin: 'deny', reason: 'pinned' } });
    expect((await f.api.post(`/api/sessions/${s.id}/stop`, {})).status).to.equal(403);
    expect((await f.api.get(`/api/sessions/${s.id}`)).body.session.state).to.equal('active');
    expect((await f.api.delete(`/api/resources/hook.binding/keep-alive?wait=true`, { expected_version: 1 })).status).to.be.oneOf([200, 204]);
    await stop(s.id);

    await put('frozen', { event: 'session.pre_resume', mode: 'sync', metadata: { builtin: 'deny' } });
    const resumed = await f.api.post(`/api/sessions/${s.id}/resume`, {});
    expect(resumed.status).to.equal(403);
    expect(JSON.stringify(resumed.body)).to.include('denied by hook frozen');
    expect((await f.api.get(`/api/sessions/${s.id}`)).body.session.state).to.equal('stopped');

    // The `record` built-in (the default native) keeps the event in the run record: an audit trail with no script.
    await put('recorder', { event: 'session.post_create' });
    const t = await newSession();
    await eventually(async () => expect(await runs('binding=recorder')).to.have.length(1));
    const [rec] = await runs('binding=recorder');
    expect(rec).to.include({ executor: 'native', outcome: 'allow', session_id: t.id });
    expect(rec.record).to.include({ event: 'session.post_create', session_id: t.id, workspace_id: f.ws.id });
  });

  it('bindings on events the service does not emit are accepted with an EventEmitted=False condition; wasm is refused', async () => {
    const cond = async (id: string) => {
      const st = (await f.api.get(`/api/resources/hook.binding/${id}/status`)).body.status;
      return { ready: st.conditions.find((c: any) => c.type === 'Ready'), emitted: st.conditions.find((c: any) => c.type === 'EventEmitted') };
    };
    await put('peer-audit', { event: 'network.peer.joined', ...node(scripts.audit, path.join(dir, 'x')) });
    const c = await cond('peer-audit');
    expect(c.ready).to.include({ status: 'True' });
    expect(c.emitted).to.include({ status: 'False', reason: 'EventNotEmitted' });
    expect(c.emitted.message).to.include('network.peer.joined');
    await put('perm-sync', { event: 'permission.request', mode: 'sync', ...node(scripts.deny, 'x') });
    expect((await cond('perm-sync')).emitted).to.include({ status: 'False', reason: 'SyncPointNotGated' });
    await put('stop-audit', { event: 'session.post_stop', ...node(scripts.audit, path.join(dir, 'y')) });
    expect((await cond('stop-audit')).emitted).to.include({ status: 'True', reason: 'EventEmitted' });

    const wasm = await f.api.put('/api/resources/hook.binding/wasm?wait=true', { scope: { kind: 'global' }, spec: { name: 'w', event: 'turn.end', executor_kind: 'wasm' }, expected_version: 0 });
    expect(wasm.status).to.equal(422);
    expect(JSON.stringify(wasm.body)).to.include('executor_kind').and.include('wasm');
    const badBuiltin = await f.api.put('/api/resources/hook.binding/bad?wait=true', { scope: { kind: 'global' }, spec: { name: 'b', event: 'turn.end', metadata: { builtin: 'explode' } }, expected_version: 0 });
    expect(badBuiltin.status).to.equal(422);
    expect(JSON.stringify(badBuiltin.body)).to.include('metadata.builtin');
    const catalog = (await f.api.get('/api/hooks/events')).body;
    expect(catalog.not_emitted).to.include('network.peer.joined').and.not.include('session.post_stop');
    expect(catalog.events.find((e: any) => e.name === 'tool.pre_call')).to.include({ emitted: true, gated: true });
  });
});
