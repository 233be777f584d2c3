import { expect } from 'chai';
import { Queue } from 'bullmq';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { allowsAt, windowContains } from '../../runtime/agents/heartbeat-wakes.ts';
import { HEARTBEAT_QUEUE, planSchedulers } from '../../runtime/agents/heartbeat-wake-scheduler.ts';
import { eventually, startService } from '../helpers/service.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { queuePrefix } from '../../store/keys.ts';

const POLICY = `---
version: 1
summary: "Check the inbox."
---
Look at the queue before acting.
`;

describe('Heartbeat wakes: rules', () => {
  const at = (iso: string) => new Date(iso);
  const w = (start: string, end: string, timezone = 'UTC') => ({ start, end, timezone });
  const cases = [
    { reason: 'no windows allow any time', given: { active_hours: [], quiet_windows: [] }, now: '2024-01-01T03:00:00Z', want: true },
    { reason: 'inside active hours is allowed', given: { active_hours: [w('08:00', '20:00')], quiet_windows: [] }, now: '2024-01-01T12:00:00Z', want: true },
    { reason: 'outside every active-hours window is refused', given: { active_hours: [w('08:00', '20:00')], quiet_windows: [] }, now: '2024-01-01T21:00:00Z', want: false },
    { reason: 'the end of a window is outside it', given: { active_hours: [w('08:00', '20:00')], quiet_windows: [] }, now: '2024-01-01T20:00:00Z', want: false },
    { reason: 'a quiet window that wraps midnight covers the small hours', given: { active_hours: [], quiet_windows: [w('22:00', '06:00')] }, now: '2024-01-01T02:00:00Z', want: false },
    { reason: 'a quiet window that wraps midnight leaves the day', given: { active_hours: [], quiet_windows: [w('22:00', '06:00')] }, now: '2024-01-01T10:00:00Z', want: true },
    { reason: 'windows are read in their own time zone', given: { active_hours: [w('08:00', '20:00', 'America/Sao_Paulo')], quiet_windows: [] }, now: '2024-01-01T10:30:00Z', want: false },
    { reason: 'a quiet window wins over active hours', given: { active_hours: [w('00:00', '23:59')], quiet_windows: [w('12:00', '13:00')] }, now: '2024-01-01T12:30:00Z', want: false },
  ];
  for (const c of cases) it(c.reason, () => expect(allowsAt(c.given, at(c.now))).to.equal(c.want));

  it('windowContains handles a window of one minute', () => {
    expect(windowContains(w('09:15', '09:16'), at('2024-06-01T09:15:30Z'))).to.equal(true);
    expect(windowContains(w('09:15', '09:16'), at('2024-06-01T09:16:00Z'))).to.equal(false);
  });

  const t = (agent: string, every: number) => ({ agent_name: agent, workspace_id: 'ws-1', every_ms: every });
  const plans = [
    { reason: 'a new heartbeat gets a scheduler', want: [t('a', 1000)], have: [], upsert: ['a'], remove: [] },
    { reason: 'an unchanged scheduler is left alone (re-upserting would fire it again)', want: [t('a', 1000)], have: [{ key: 'hb:ws-1:a', every: 1000, data: { agent_name: 'a', workspace_id: 'ws-1' } }], upsert: [], remove: [] },
    { reason: 'a changed interval replaces the scheduler', want: [t('a', 2000)], have: [{ key: 'hb:ws-1:a', every: 1000, data: { agent_name: 'a', workspace_id: 'ws-1' } }], upsert: ['a'], remove: [] },
    { reason: 'a heartbeat no longer active loses its scheduler; other schedulers of the queue are not touched', want: [], have: [{ key: 'hb:ws-1:a', every: 1000 }, { key: 'other', every: 5 }], upsert: [], remove: ['hb:ws-1:a'] },
  ];
  for (const p of plans) {
    it(p.reason, () => {
      const plan = planSchedulers(p.want, p.have);
      expect(plan.upsert.map((x) => x.agent_name)).to.deep.equal(p.upsert);
      expect(plan.remove).to.deep.equal(p.remove);
    });
  }
});

describe('Heartbeat wakes: scheduled and manual wakes of real sessions (HTTP, Redis, scripted agent)', function () {
  this.timeout(90_000);
  const f = new ServiceFixture({ env: (dirs) => ({ SVC_CONFIG_FILE: path.join(dirs.dataDir, 'global-settings.yaml'), HEARTBEAT_RESYNC_INTERVAL: '200ms' }) }).install();
  const policyFile = (agent = 'scripted') => path.join(f.root, '.svc', 'agents', agent, 'HEARTBEAT.md');
  const writePolicy = (text = POLICY, agent = 'scripted') => {
    mkdirSync(path.dirname(policyFile(agent)), { recursive: true });
    writeFileSync(policyFile(agent), text);
  };
  const config = (yaml: string) => writeFileSync(path.join(f.dataDir, 'global-settings.yaml'), `heartbeat:\n${yaml}`);
  const history = async (q = '') => {
    const res = await f.api.get(`/api/agents/scripted/heartbeat/history?workspace=${f.ws.id}${q}`);
    expect(res.status).to.equal(200);
    return res.body.wakes as any[];
  };
  const newSession = async () => {
    const res = await f.api.post('/api/sessions', { workspace: f.ws.id });
    expect(res.status).to.equal(201);
    return res.body.session as { id: string };
  };
  const events = async (id: string) => (await f.api.get(`/api/sessions/${id}/events`)).body.events as any[];
  const schedulers = async () => {
    const conn = f.redis.client();
    const q = new Queue(HEARTBEAT_QUEUE, { connection: conn, prefix: queuePrefix('svc:', HEARTBEAT_QUEUE) });
    try { return (await q.getJobSchedulers(0, -1)).map((s) => ({ key: s.key, every: s.every })); } finally { await q.close(); conn.disconnect(); }
  };

  it('a heartbeat with a short interval wakes the agent\'s active session with the heartbeat prompt, and the history lists it', async () => {
    config('  min_interval: 1s\n  default_interval: 1s\n  wake_cooldown: 1s\n');
    const s = await newSession();
    writePolicy();
    const wakes = await eventually(async () => {
      const sent = (await history()).filter((w) => w.result === 'sent');
      expect(sent.length).to.be.at.least(2);
      return sent;
    }, 30_000, 100);
    const w = wakes.at(-1);
    expect(w).to.include({ agent_name: 'scripted', workspace_id: f.ws.id, session_id: s.id, source: 'scheduler', reason: 'wake_sent' });
    expect(w.id).to.match(/^hwe-/);
    expect(w.synthetic_prompt_id).to.match(/^turn-/);
    expect(Date.parse(w.scheduled_at)).to.be.at.most(Date.parse(w.created_at));
    expect(w.policy_digest).to.match(/^sha256:/);
    // The wake's turn is in the session's events: the heartbeat prompt as the user message, the agent's answer, done.
    const turn = await eventually(async () => {
      const evs = (await events(s.id)).filter((e) => e.turn_id === w.synthetic_prompt_id);
      expect(evs.map((e) => e.type)).to.include('done');
      return evs;
    });
    expect(turn[0].type).to.equal('user_message');
    expect(turn[0].content.text).to.contain('Agent Heartbeat requested a reorientation').and.contain('Check the inbox.').and.contain('Look at the queue before acting.');
    expect(turn.filter((e) => e.type === 'agent_message').map((e) => e.content.text ?? e.content)).to.not.be.empty;
    // Each tick is handled once: no two wakes of the same tick, no two sent wakes of one session within a cooldown.
    const all = await history('&limit=1000');
    const ticks = all.filter((x) => x.source === 'scheduler').map((x) => `${x.session_id}@${x.scheduled_at}`);
    expect(new Set(ticks).size).to.equal(ticks.length);
    // The bus carries both sides of a sent wake.
    const bus = await f.service.bus!.latest(500);
    expect(bus.some((e) => e.type === 'agent.heartbeat.wake.before' && e.data.wake_event_id === w.id)).to.equal(true);
    expect(bus.find((e) => e.type === 'agent.heartbeat.wake.after' && e.data.id === w.id)).to.deep.include({ outcome: 'success', session_id: s.id, agent_name: 'scripted' });
    // The agent-level history (no workspace) has the same wakes.
    const agentWide = (await f.api.get('/api/agents/scripted/heartbeat/history?limit=1000')).body.wakes as any[];
    expect(agentWide.map((x) => x.id)).to.include(w.id);
  });

  it('with two controller processes each tick is handled once', async () => {
    config('  min_interval: 1s\n  default_interval: 1s\n  wake_cooldown: 1s\n');
    const other = await startService(f.redis.env, { SVC_ROLES: 'controller', DATA_DIR: f.dataDir, SVC_CONFIG_FILE: path.join(f.dataDir, 'global-settings.yaml'), HEARTBEAT_RESYNC_INTERVAL: '200ms' });
    try {
      await newSession();
      writePolicy();
      const all = await eventually(async () => {
        const got = (await history('&limit=1000')).filter((w) => w.source === 'scheduler');
        expect(got.filter((w) => w.result === 'sent').length).to.be.at.least(4);
        return got;
      }, 30_000, 100);
      const ticks = all.map((w) => w.scheduled_at);
      expect(new Set(ticks).size).to.equal(ticks.length);
      expect(await schedulers()).to.have.length(1);
    } finally {
      await other.stop();
    }
  });

  it('a change to an agent record re-plans the schedulers through the bus (no resync needed)', async () => {
    await f.restart({ HEARTBEAT_RESYNC_INTERVAL: '1h' });
    config('  min_interval: 1s\n  default_interval: 1h\n');
    mkdirSync(path.join(f.dataDir, 'agents', 'bee'), { recursive: true });
    writeFileSync(path.join(f.dataDir, 'agents', 'bee', 'HEARTBEAT.md'), POLICY);
    expect(await schedulers()).to.deep.equal([]);
    const put = await f.api.put('/api/resources/agent/bee', { scope: { kind: 'global' }, spec: { name: 'bee', prompt: 'p' }, expected_version: 0 });
    expect(put.status).to.equal(201);
    await eventually(async () => expect((await schedulers()).map((x) => x.key)).to.deep.equal([`hb:${f.ws.id}:bee`]), 30_000, 100);
    expect((await f.api.delete('/api/resources/agent/bee', { expected_version: put.body.record.version })).status).to.be.oneOf([200, 204]);
    await eventually(async () => expect(await schedulers()).to.deep.equal([]), 30_000, 100);
  });

  it('with no eligible session a tick records a skipped wake with the reason; a busy session is skipped, not interrupted', async () => {
    config('  min_interval: 1s\n  default_interval: 1s\n  wake_cooldown: 1s\n');
    writePolicy();
    const skipped = await eventually(async () => {
      const found = (await history()).find((w) => w.result === 'skipped');
      expect(found).to.not.equal(undefined);
      return found;
    }, 30_000, 100);
    expect(skipped).to.include({ reason: 'heartbeat_no_eligible_session', session_id: '', synthetic_prompt_id: '', source: 'scheduler' });
    expect((await history()).filter((w) => w.result === 'sent')).to.deep.equal([]);

    // A session in a long turn: ticks skip it with session_prompt_active and never start a turn of their own in it.
    const s = await newSession();
    const long = fetch(`${f.service.url}/api/workspaces/${f.ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: '/sleep 3000' }) }).then((r) => r.text());
    await eventually(async () => {
      expect((await history()).some((w) => w.session_id === s.id && w.reason === 'session_prompt_active')).to.equal(true);
    }, 30_000, 100);
    // NOTE: a tick may wake the new session before '/sleep' starts its turn; what must not happen is a turn after it.
    const messages = (await events(s.id)).filter((e) => e.type === 'user_message').map((e) => e.content.text);
    expect(messages).to.include('/sleep 3000');
    expect(messages.slice(messages.indexOf('/sleep 3000') + 1)).to.deep.equal([]);
    await long;
  });

  it('max_wakes_per_cycle bounds one tick: one session woken, the other rate_limited', async () => {
    config('  min_interval: 1s\n  default_interval: 1s\n  wake_cooldown: 1s\n  max_wakes_per_cycle: 1\n');
    const [a, b] = [await newSession(), await newSession()];
    writePolicy();
    const tick = await eventually(async () => {
      const all = await history('&limit=1000');
      const byTick = new Map<string, any[]>();
      for (const w of all.filter((x) => x.scheduled_at && x.session_id)) byTick.set(w.scheduled_at, [...(byTick.get(w.scheduled_at) ?? []), w]);
      const full = [...byTick.values()].find((ws) => ws.length === 2 && ws.some((x) => x.result === 'sent'));
      expect(full).to.not.equal(undefined);
      return full!;
    }, 30_000, 100);
    expect(tick.map((w) => w.result).sort()).to.deep.equal(['rate_limited', 'sent']);
    expect(tick.find((w) => w.result === 'rate_limited').reason).to.equal('heartbeat_rate_limited');
    expect(tick.map((w) => w.session_id).sort()).to.deep.equal([a.id, b.id].sort());
  });

  it('POST /heartbeat/wake wakes now (202 and the wake in the history), 409 in cooldown or with no eligible session, 404 for an unknown agent', async () => {
    // A long interval and cooldown: the scheduler's own ticks stay out of the way once its first tick has run.
    config('  min_interval: 1s\n  default_interval: 1h\n  wake_cooldown: 1h\n');
    writePolicy();
    await eventually(async () => expect((await schedulers()).map((x) => x.key)).to.deep.equal([`hb:${f.ws.id}:scripted`]), 30_000, 100);
    // NOTE: the scheduler's first tick runs at once; it must have run before the session exists, or it wakes it.
    await eventually(async () => expect((await history()).some((w) => w.source === 'scheduler')).to.equal(true), 30_000, 100);

    const none = await f.api.post('/api/agents/scripted/heartbeat/wake', { workspace_id: f.ws.id });
    expect(none.status).to.equal(409);
    expect(none.body.diagnostic.code).to.equal('heartbeat_no_eligible_session');
    expect(none.body.diagnostic.evidence.wake).to.include({ result: 'skipped', source: 'manual' });

    const s = await newSession();
    const dry = await f.api.post('/api/agents/scripted/heartbeat/wake', { workspace_id: f.ws.id, dry_run: true });
    expect(dry.status).to.equal(200);
    expect(dry.body.wake).to.include({ result: 'sent', session_id: s.id, id: '', synthetic_prompt_id: '' });

    const res = await f.api.post('/api/agents/scripted/heartbeat/wake', { workspace_id: f.ws.id });
    expect(res.status).to.equal(202);
    expect(res.body.wake).to.include({ result: 'sent', reason: 'wake_sent', session_id: s.id, source: 'manual' });
    const w = res.body.wake;
    const h = await history();
    expect(h[0]).to.deep.equal(w);
    expect(h.filter((x) => x.result === 'sent')).to.have.length(1);
    await eventually(async () => expect((await events(s.id)).filter((e) => e.turn_id === w.synthetic_prompt_id).map((e) => e.type)).to.include('done'));

    const again = await f.api.post('/api/agents/scripted/heartbeat/wake', { workspace_id: f.ws.id, session_id: s.id });
    expect(again.status).to.equal(409);
    expect(again.body.diagnostic.code).to.equal('cooldown_active');
    expect(again.body.diagnostic.evidence.wake).to.include({ result: 'rate_limited', session_id: s.id });
    expect((await events(s.id)).filter((e) => e.type === 'user_message')).to.have.length(1);

    // The workspace can come from the session alone.
    const bySession = await f.api.post('/api/agents/scripted/heartbeat/wake', { session_id: s.id });
    expect(bySession.status).to.equal(409);
    expect(bySession.body.diagnostic.code).to.equal('cooldown_active');

    const ghost = await f.api.post('/api/agents/ghost/heartbeat/wake', { workspace_id: f.ws.id });
    expect(ghost.status).to.equal(404);
    expect(ghost.body.diagnostic.code).to.equal('agent_not_found');
    expect((await f.api.get(`/api/agents/ghost/heartbeat/history?workspace=${f.ws.id}`)).status).to.equal(404);
    expect((await f.api.post('/api/agents/scripted/heartbeat/wake', {})).status).to.equal(422);
    expect((await f.api.post('/api/agents/scripted/heartbeat/wake', { workspace_id: 'nowhere' })).status).to.equal(404);
    expect((await f.api.post('/api/agents/scripted/heartbeat/wake', { workspace_id: f.ws.id, dry_run: 'yes' })).status).to.equal(422);
  });

  it('a manual wake without a policy is 409 heartbeat_no_policy, and no scheduler exists', async () => {
    await newSession();
    const res = await f.api.post('/api/agents/scripted/heartbeat/wake', { workspace_id: f.ws.id });
    expect(res.status).to.equal(409);
    expect(res.body.diagnostic.code).to.equal('heartbeat_no_policy');
    expect(await schedulers()).to.deep.equal([]);
  });

  it('disabling the heartbeat removes its scheduler, and no further wakes happen', async () => {
    config('  min_interval: 1s\n  default_interval: 1s\n  wake_cooldown: 1s\n');
    const s = await newSession();
    writePolicy();
    await eventually(async () => expect((await history()).some((w) => w.result === 'sent')).to.equal(true), 30_000, 100);
    expect(await schedulers()).to.deep.equal([{ key: `hb:${f.ws.id}:scripted`, every: 1000 }]);
    writePolicy(POLICY.replace('version: 1', 'version: 1\nenabled: false'));
    await eventually(async () => expect(await schedulers()).to.deep.equal([]), 30_000, 100);
    // NOTE: a tick already taken when the scheduler went is let finish; after that, nothing more.
    await new Promise((r) => setTimeout(r, 1500));
    const before = (await history('&limit=1000')).length;
    const turns = (await events(s.id)).filter((e) => e.type === 'user_message').length;
    await new Promise((r) => setTimeout(r, 3000));
    expect((await history('&limit=1000')).length).to.equal(before);
    expect((await events(s.id)).filter((e) => e.type === 'user_message').length).to.equal(turns);
  });

  it('the native tools report the heartbeat status and wake a session', async () => {
    config('  min_interval: 1s\n  default_interval: 1h\n  wake_cooldown: 1h\n');
    writePolicy();
    await eventually(async () => expect((await history()).length).to.be.at.least(1), 30_000, 100);
    const s = await newSession();
    const status = await f.api.post('/api/tools/svc__agent_heartbeat_status/invoke', { workspace_id: f.ws.id, input: { agent_name: 'scripted' } });
    expect(status.status).to.equal(200);
    expect(status.body.result.structured).to.include({ agent_name: 'scripted', active: true, interval: '1h' });
    expect(status.body.result.structured.wake_states).to.deep.equal([{ session_id: s.id, eligible_for_wake: true, ineligibility_reason: '', next_allowed_at: '' }]);
    // The wake tool is mutating: it needs an approval token, then it wakes the session once.
    const input = { agent_name: 'scripted' };
    const bare = await f.api.post('/api/tools/svc__agent_heartbeat_wake/invoke', { session_id: s.id, input });
    expect(bare.status).to.equal(202);
    expect(bare.body.error.code).to.equal('tool_approval_required');
    expect((await history()).filter((w) => w.source === 'manual')).to.deep.equal([]);
    const approval = await f.api.post('/api/tools/svc__agent_heartbeat_wake/approvals', { session_id: s.id, input });
    expect(approval.status).to.equal(201);
    const wake = await f.api.post('/api/tools/svc__agent_heartbeat_wake/invoke', { session_id: s.id, input, approval_token: approval.body.approval.approval_token });
    expect(wake.status).to.equal(200);
    const decision = wake.body.result.structured.decision;
    expect(decision).to.include({ result: 'sent', session_id: s.id, source: 'manual' });
    expect((await history())[0]).to.deep.equal(decision);
    await eventually(async () => expect((await events(s.id)).filter((e) => e.turn_id === decision.synthetic_prompt_id).map((e) => e.type)).to.include('done'));
    const after = await f.api.post('/api/tools/svc__agent_heartbeat_status/invoke', { workspace_id: f.ws.id, input: { agent_name: 'scripted', limit: 1 } });
    expect(after.body.result.structured.wake_events).to.deep.equal([decision]);
    expect(after.body.result.structured.wake_states[0].next_allowed_at).to.not.equal('');
  });
});
