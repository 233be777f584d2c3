import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { SessionStore } from '../../store/session-store.ts';
import { TSX_LOADER } from '../helpers/agents.ts';
import { eventually } from '../helpers/service.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { SseReader } from '../helpers/sse.ts';
import { readUiStream } from '../helpers/ui-stream.ts';

describe('Sessions on the real scripted ACP agent (HTTP, real Redis, real agent processes)', function () {
  this.timeout(120_000);
  const f = new ServiceFixture().install();

  /** sessionService builds the session service over the running service's store, to reach what HTTP does not. */
  const sessionService = async () => {
    const { SessionService } = await import('../../runtime/sessions/session-service.ts');
    const { WorkspaceService } = await import('../../runtime/workspaces/workspace-service.ts');
    const { WorkspaceStore } = await import('../../store/workspace-store.ts');
    const { RoleResolver } = await import('../../runtime/agents/roles.ts');
    const { Settings } = await import('../../runtime/process/settings.ts');
    const resources = f.service.store!;
    return new SessionService({
      sessions: new SessionStore(resources.redis, resources.keys), resources, redis: resources.redis,
      workspaces: new WorkspaceService({ workspaces: new WorkspaceStore(resources.redis, resources.keys), store: resources, security: f.service.security }),
      roles: new RoleResolver({ store: resources, settings: new Settings(path.join(f.dataDir, 'config.yaml')), inactivityTimeout: '30m' }),
    });
  };
  const create = async (extra: object = {}) => {
    const res = await f.api.post('/api/sessions', { workspace: f.ws.id, ...extra });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.session;
  };
  const prompt = async (id: string, message: string, extra: object = {}) => {
    const res = await fetch(`${f.service.url}/api/workspaces/${f.ws.id}/sessions/${id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message, ...extra }) });
    return { res, ...(res.headers.get('content-type')?.startsWith('text/event-stream') ? await readUiStream(res) : { chunks: [await res.json()], done: false }) };
  };
  const events = async (id: string, q = '') => (await f.api.get(`/api/sessions/${id}/events${q}`)).body.events as any[];

  it('creates a session on the default scripted agent and lists it', async () => {
    const s = await create();
    expect(s).to.include({ state: 'active', agent_name: 'scripted', type: 'user', workspace_id: f.ws.id, badge: 'idle', attachable: true });
    expect(s.acp_session_id).to.match(/^scripted-/);
    expect(s.acp_caps.supports_load_session).to.equal(true);
    expect((await f.api.get('/api/sessions')).body.sessions.map((x: any) => x.id)).to.deep.equal([s.id]);
    expect((await f.api.get(`/api/workspaces/${f.ws.id}`)).body.sessions.map((x: any) => x.id)).to.deep.equal([s.id]);
    expect((await f.api.get(`/api/sessions/${s.id}?include_health=true`)).body.session.health).to.include({ health: 'healthy', state: 'idle' });
  });

  it('validates create requests: workspace required, exclusive, known; unknown agent', async () => {
    expect((await f.api.post('/api/sessions', {})).status).to.equal(400);
    expect((await f.api.post('/api/sessions', { workspace: f.ws.id, workspace_path: f.root })).status).to.equal(400);
    expect((await f.api.post('/api/sessions', { workspace: 'nope' })).status).to.equal(404);
    expect((await f.api.post('/api/sessions', { workspace: f.ws.id, agent_name: 'ghost' })).status).to.equal(400);
    expect((await f.api.post('/api/sessions', { workspace: f.ws.id, model: 'm' })).status).to.equal(400);
    expect((await f.api.post('/api/sessions', '{bad')).status).to.equal(400);
    expect((await f.api.get('/api/sessions')).body.sessions).to.deep.equal([]);
  });

  it('streams a prompt as an AI SDK UI message stream and persists every event with sequences', async () => {
    const s = await create();
    const { res, chunks, done } = await prompt(s.id, 'hello\n/think pondering\n/tool read {"path":"a.txt"}\n/plan one;two\nbye');
    expect(res.headers.get('x-svc-ai-ui-message-stream')).to.equal('v1');
    expect(done).to.equal(true);
    const types = chunks.map((c) => c.type);
    expect(types[0]).to.equal('start');
    expect(types.at(-1)).to.equal('finish');
    expect(chunks.at(-1).finishReason).to.equal('stop');
    expect(chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta)).to.deep.equal(['hello', 'bye']);
    expect(chunks.find((c) => c.type === 'reasoning-delta').delta).to.equal('pondering');
    expect(chunks.find((c) => c.type === 'tool-input-available')).to.deep.include({ toolName: 'read', input: { path: 'a.txt' } });
    expect(types).to.include('tool-output-available');
    const evs = await events(s.id);
    expect(evs.map((e) => e.sequence)).to.deep.equal(evs.map((_, i) => i + 1));
    expect(evs.map((e) => e.type)).to.deep.equal(['user_message', 'agent_message', 'thought', 'tool_call', 'tool_result', 'plan', 'agent_message', 'done']);
    for (const e of evs) {
      expect(e.session_id).to.equal(s.id);
      expect(e.content.schema).to.equal('svc.session.event.v1');
      expect(e.content.session_id).to.equal(s.acp_session_id);
      expect(e.turn_id).to.match(/^turn-/);
    }
    expect((await events(s.id, '?type=agent_message')).map((e) => e.content.text)).to.deep.equal(['hello', 'bye']);
    expect((await events(s.id, '?limit=2')).map((e) => e.type)).to.deep.equal(['agent_message', 'done']);
    expect((await events(s.id, '?after_sequence=6')).map((e) => e.sequence)).to.deep.equal([7, 8]);
    const hist = (await f.api.get(`/api/sessions/${s.id}/history`)).body.history;
    expect(hist).to.have.length(1);
    expect(hist[0].events).to.have.length(8);
  });

  it('shows a running turn in the session: its start and elapsed time while it runs, idle once done is recorded', async () => {
    const s = await create();
    const running = prompt(s.id, 'working\n/sleep 3000\nfinished');
    const during = await eventually(async () => {
      const x = (await f.api.get(`/api/sessions/${s.id}`)).body.session;
      expect(x.activity.last_activity_kind).to.equal('agent_message');
      return x;
    });
    const turn = (await events(s.id, '?type=user_message'))[0].turn_id;
    expect(during.badge).to.equal('running');
    // NOTE: the turn's start survives the appends after it (each writes the activity): elapsed_ms is read from it.
    expect(during.activity).to.include({ turn_id: turn, turn_source: 'user' });
    expect(Date.parse(during.activity.turn_started_at)).to.be.at.most(Date.parse(during.activity.last_activity_at));
    expect(during.activity.elapsed_ms).to.be.a('number').and.at.least(0);
    await running;
    const after = (await f.api.get(`/api/sessions/${s.id}`)).body.session;
    expect(after).to.include({ badge: 'idle', attachable: true });
    expect(after.activity).to.include({ last_activity_kind: 'done', turn_id: turn });
    expect(after.activity).to.not.have.property('elapsed_ms');
  });

  it('answers a permission request: approve grants, deny refuses; unknown request is 409', async () => {
    const s = await create();
    const pending = prompt(s.id, '/permission write file');
    const req = await eventually(async () => {
      const p = (await events(s.id, '?type=permission'))[0];
      expect(p).to.not.equal(undefined);
      return p;
    });
    expect((await f.api.post(`/api/sessions/${s.id}/approve`, { request_id: 'perm-nope', decision: 'allow-once' })).status).to.equal(409);
    expect((await f.api.post(`/api/sessions/${s.id}/approve`, { request_id: req.content.request_id, decision: 'maybe' })).status).to.equal(400);
    const ok = await f.api.post(`/api/sessions/${s.id}/approve`, { request_id: req.content.request_id, decision: 'allow-once' });
    expect(ok.body).to.deep.equal({ status: 'approved' });
    const { chunks } = await pending;
    expect(chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta)).to.deep.equal(['permission granted']);
    expect(chunks.some((c) => c.type === 'data-svc-permission')).to.equal(true);

    const denied = prompt(s.id, '/permission delete all');
    const req2 = await eventually(async () => {
      const p = (await events(s.id, '?type=permission')).filter((e) => e.content.action === 'request')[1];
      expect(p).to.not.equal(undefined);
      return p;
    });
    await f.api.post(`/api/sessions/${s.id}/approve`, { turn_id: req2.turn_id, decision: 'reject-once' });
    expect((await denied).chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta)).to.deep.equal(['permission denied']);
  });

  it('stops a crashed agent with agent_crashed, a redacted failure and a crash bundle; resumes it', async () => {
    const s = await create();
    const { chunks } = await prompt(s.id, 'before\n/crash 3');
    expect(chunks.some((c) => c.type === 'error')).to.equal(true);
    const stopped = await eventually(async () => {
      const x = (await f.api.get(`/api/sessions/${s.id}`)).body.session;
      expect(x.state).to.equal('stopped');
      return x;
    });
    expect(stopped).to.include({ stop_reason: 'agent_crashed', badge: 'failed' });
    expect(stopped.failure.kind).to.equal('process_exit');
    expect(existsSync(stopped.failure.crash_bundle_path)).to.equal(true);
    expect(JSON.parse(readFileSync(stopped.failure.crash_bundle_path, 'utf8')).last_events.length).to.be.greaterThan(0);
    expect((await events(s.id, '?type=session_stopped'))).to.have.length(1);
    const refused = await prompt(s.id, 'hello?');
    expect(refused.res.status).to.equal(400);

    const resumed = (await f.api.post(`/api/sessions/${s.id}/resume`, {})).body.session;
    expect(resumed.state).to.equal('active');
    expect(resumed.acp_session_id).to.equal(s.acp_session_id);
    const again = await prompt(s.id, 'after resume');
    expect(again.chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta)).to.deep.equal(['after resume']);
  });

  it('supervises inactivity: one warning, a cooperative cancel, then stops with timeout/activity_timeout', async () => {
    // NOTE: tight supervision only here: a prompt that spawns a child agent process can be idle for a second.
    await f.restart({
      SESSION_INACTIVITY_WARNING_AFTER: '300ms', SESSION_INACTIVITY_TIMEOUT: '600ms', SESSION_TIMEOUT_CANCEL_GRACE: '400ms',
    });
    const s = await create();
    const { chunks } = await prompt(s.id, '/hang 5000');
    expect(chunks.at(-1).type).to.equal('finish');
    const stopped = await eventually(async () => {
      const x = (await f.api.get(`/api/sessions/${s.id}`)).body.session;
      expect(x.state).to.equal('stopped');
      return x;
    });
    expect(stopped).to.include({ stop_reason: 'timeout', stop_detail: 'activity_timeout' });
    const warnings = await events(s.id, '?type=runtime_warning');
    expect(warnings.length).to.equal(2); // the warning, then the timeout notice
    expect((await events(s.id, '?type=session_stopped'))).to.have.length(1);
  });

  it('warns once early when the agent has not answered a prompt at all within SESSION_FIRST_ACTIVITY_WARNING, and not when it answered first and then went quiet', async () => {
    await f.restart({ SESSION_FIRST_ACTIVITY_WARNING: '300ms' });
    const s = await create();
    // /hang sends nothing until it ends: the agent is started but silent, as one waiting on an unreachable network.
    const silent = await prompt(s.id, '/hang 2000');
    expect(silent.chunks.at(-1).type).to.equal('finish');
    const warnings = await events(s.id, '?type=runtime_warning');
    expect(warnings.map((e) => e.content.kind)).to.deep.equal(['first_activity']);
    expect(warnings[0].content.text).to.match(/^the agent has not answered since the prompt began/);
    const [silentTurn] = (await events(s.id, '?type=user_message')).map((e) => e.turn_id);
    expect(warnings[0].turn_id).to.equal(silentTurn);

    // An agent that answered at once and then went quiet for longer than the threshold gets no such warning.
    const answered = await prompt(s.id, 'right here\n/hang 1000');
    expect(answered.chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta)).to.deep.equal(['right here']);
    expect((await events(s.id, '?type=runtime_warning')).map((e) => e.content.kind)).to.deep.equal(['first_activity']);
    expect((await f.api.get(`/api/sessions/${s.id}`)).body.session).to.include({ state: 'active', badge: 'idle' });
  });

  it('replays the SSE stream after Last-Event-ID and ends a stopped session with the synthetic frame', async () => {
    const s = await create();
    await prompt(s.id, 'one\ntwo');
    const sse = await new SseReader(`${f.service.url}/api/workspaces/${f.ws.id}/sessions/${s.id}/stream`, { 'Last-Event-ID': '2' }).open();
    await sse.until(2);
    const running = prompt(s.id, '/progress 5 20');
    await running;
    expect((await f.api.post(`/api/sessions/${s.id}/stop`, {})).status).to.equal(204);
    await eventually(async () => expect(sse.ended).to.equal(true));
    const ids = sse.events.filter((e) => /^\d+$/.test(e.id ?? '')).map((e) => Number(e.id));
    expect(ids[0]).to.equal(3);
    expect(ids).to.deep.equal([...new Set(ids)].sort((a, b) => a - b));
    expect(ids).to.deep.equal(ids.map((_, i) => i + 3));
    expect(sse.events.at(-1)).to.include({ event: 'session_stopped', id: `session-stopped-${s.id}` });
    expect(JSON.parse(sse.events.at(-1)!.data)).to.include({ stop_reason: 'user_canceled' });
    expect((await f.api.delete(`/api/sessions/${s.id}`)).status).to.equal(204);
    expect((await f.api.get(`/api/sessions/${s.id}`)).status).to.equal(404);
    expect((await f.api.get(`/api/sessions/${s.id}/events`)).status).to.equal(404);
  });

  it('spawns a child session with a narrowed policy and refuses a widened one (422)', async () => {
    const parent = await create();
    const { chunks } = await prompt(parent.id, '/spawn scripted');
    const said = chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta).join('');
    expect(said).to.match(/^spawned child session sess-/);
    const childId = said.split(' ').at(-1);
    const child = (await f.api.get(`/api/sessions/${childId}`)).body.session;
    expect(child).to.include({ type: 'spawned', state: 'active' });
    expect(child.lineage).to.include({ parent_session_id: parent.id, root_session_id: parent.id, spawn_depth: 1 });
    expect((await f.api.post('/api/agent/spawn', { agent_name: 'scripted' })).status).to.equal(401);
  });

  it('refuses a spawn whose permissions widen the parent policy (422) and creates nothing', async () => {
    const parent = await create();
    const { chunks } = await prompt(parent.id, '/spawn scripted');
    const childId = chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta).join('').split(' ').at(-1);
    const child = (await f.api.get(`/api/sessions/${childId}`)).body.session;
    // The child's policy is the parent's (unrestricted); narrow it, then ask the service for a wider grandchild.
    const svc = await sessionService();
    const narrowed = { ...child, lineage: { ...child.lineage, permission_policy: { ...child.lineage.permission_policy, tools: ['svc__read'] } } };
    const before = (await f.api.get('/api/sessions')).body.sessions.length;
    const err = await svc.spawn(narrowed, { permissions: { tools: ['svc__read', 'svc__write'] } }).catch((e: unknown) => e) as { status: number; evidence: Record<string, string> };
    expect(err.status).to.equal(422);
    expect(err.evidence).to.have.property('permissions.tools');
    expect((await f.api.get('/api/sessions')).body.sessions.length).to.equal(before);
  });

  it('builds the transcript and a bounded recap from stored rows', async () => {
    const s = await create();
    await prompt(s.id, 'hi\n/think hmm\n/tool read {"p":1}');
    const messages = (await f.api.get(`/api/workspaces/${f.ws.id}/sessions/${s.id}/transcript`)).body.messages;
    expect(messages.map((m: any) => m.role)).to.deep.equal(['user', 'assistant']);
    expect(messages[1].parts.map((p: any) => p.type)).to.deep.equal(['text', 'reasoning', 'tool-read']);
    expect(messages[1].parts[2]).to.include({ state: 'output-available', toolCallId: 'call-1' });
    const recap = (await f.api.get(`/api/workspaces/${f.ws.id}/sessions/${s.id}/recap?limit=1`)).body.recap;
    expect(recap.recent_messages).to.have.length(1);
    expect(recap.snapshot).to.include({ consistency: 'persisted_reads', transcript_cursor: 2 });
    expect(recap.session.id).to.equal(s.id);
  });

  it('repairs a stopped session: dry run reports, a real run appends the missing result and terminal error', async () => {
    const s = await create();
    await f.api.post(`/api/sessions/${s.id}/stop`, {});
    const store = new SessionStore(f.service.store!.redis, f.service.store!.keys);
    const base = { session_id: s.id, turn_id: 'turn-x', agent_name: 'scripted', workspace_id: f.ws.id, workspace_path: f.root, timestamp: new Date().toISOString(), parent_session_id: '', root_session_id: s.id, spawn_depth: 0 };
    await store.append({ ...base, type: 'tool_call', content: { tool_call_id: 'c1', tool_name: 'read' } });
    const blocked = (await f.api.post(`/api/sessions/${s.id}/repair`, {})).body.repair;
    expect(blocked.issues.map((i: any) => i.code)).to.include('stop_reason_requires_force');
    expect(blocked.persisted).to.equal(false);
    const dry = (await f.api.post(`/api/sessions/${s.id}/repair?dry_run=true&force=true`, {})).body.repair;
    expect(dry.actions.map((a: any) => a.code)).to.deep.equal(['append_interrupted_tool_result', 'append_terminal_error']);
    expect(dry.persisted).to.equal(false);
    const count = (await events(s.id)).length;
    expect((await events(s.id)).length).to.equal(count);
    const real = (await f.api.post(`/api/sessions/${s.id}/repair?force=true`, {})).body.repair;
    expect(real.persisted).to.equal(true);
    const tail = (await events(s.id)).slice(-2);
    expect(tail.map((e) => e.type)).to.deep.equal(['tool_result', 'error']);
    expect(tail[0].content).to.include({ tool_call_id: 'c1', tool_error: true });
    const again = (await f.api.post(`/api/sessions/${s.id}/repair?force=true`, {})).body.repair;
    expect(again.actions).to.deep.equal([]);
  });

  it('runs an agent definition\'s command; an agent that cannot load resumes on a fresh ACP session', async () => {
    const scripted = path.resolve('runtime/agents/scripted.ts');
    const command = `SCRIPTED_NO_LOAD=1 ${process.execPath} --import ${TSX_LOADER} ${scripted}`;
    const def = await f.api.post('/api/agents', { scope: 'global', agent: { name: 'forgetful', prompt: 'p', provider: 'local', command } });
    expect(def.status).to.equal(201);
    const s = await create({ agent_name: 'forgetful' });
    expect(s.acp_caps.supports_load_session).to.equal(false);
    await prompt(s.id, 'first\n/crash 9');
    await eventually(async () => expect((await f.api.get(`/api/sessions/${s.id}`)).body.session.state).to.equal('stopped'));
    const resumed = (await f.api.post(`/api/sessions/${s.id}/resume`, {})).body.session;
    expect(resumed.state).to.equal('active');
    expect(resumed.id).to.equal(s.id);
    expect(resumed.acp_session_id).to.not.equal(s.acp_session_id);
    await prompt(s.id, 'second');
    const contentIds = new Set((await events(s.id, '?type=agent_message')).map((e) => e.content.session_id));
    expect([...contentIds]).to.deep.equal([s.acp_session_id, resumed.acp_session_id]);
  });

  it('resumes a session whose previous run has not released its lease yet: the start waits for it, never left starting', async () => {
    const s = await create();
    expect((await f.api.post(`/api/sessions/${s.id}/stop`, {})).status).to.equal(204);
    // NOTE: the moment a resume sent as soon as the session reads stopped can land in: the runtime ending the run has
    // marked it stopped and not yet released its lease (seen in cluster runs after an agent crash).
    const { SessionKeys } = await import('../../runtime/sessions/keys.ts');
    const lease = new SessionKeys(f.service.store!.keys).lease(s.id);
    expect(await f.service.store!.redis.set(lease, 'a-run-still-ending', 'PX', 1500, 'NX')).to.equal('OK');
    const resumed = (await f.api.post(`/api/sessions/${s.id}/resume`, {})).body.session;
    expect(resumed.state).to.equal('active');
    expect(await f.service.store!.redis.get(lease)).to.be.a('string').and.not.equal('a-run-still-ending');
    const { chunks } = await prompt(s.id, 'after the wait');
    expect(JSON.stringify(chunks)).to.include('after the wait');
  });

  it('reaps a spawned child past its ttl, and stops an auto_stop_on_parent child with its parent', async () => {
    const parent = await create();
    const svc = await sessionService();
    const meta = (await new SessionStore(f.service.store!.redis, f.service.store!.keys).get(parent.id))!;
    const short = (await svc.spawn(meta, { ttl_seconds: 1 })) as { session: { id: string; state: string } };
    const tied = (await svc.spawn(meta, { auto_stop_on_parent: true })) as { session: { id: string } };
    expect(short.session.state).to.equal('active');
    const stoppedDetail = async (id: string) => {
      const x = (await f.api.get(`/api/sessions/${id}`)).body.session;
      expect(x.state).to.equal('stopped');
      return x.stop_detail;
    };
    expect(await eventually(() => stoppedDetail(short.session.id), 20_000, 200)).to.equal('spawn ttl expired');
    expect((await f.api.get(`/api/sessions/${tied.session.id}`)).body.session.state).to.equal('active');
    await f.api.post(`/api/sessions/${parent.id}/stop`, {});
    expect(await eventually(() => stoppedDetail(tied.session.id), 20_000, 200)).to.equal('parent session stopped');
  });
});
