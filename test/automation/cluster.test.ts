import { expect } from 'chai';
import { ProcessCluster } from '../helpers/process.ts';
import { Client, eventually } from '../helpers/service.ts';
import { putRecord, runsOf } from './helpers.ts';

describe('Automation across controller processes: exactly one run per tick, SIGKILL, misfires', function () {
  this.timeout(300_000);
  const cluster = new ProcessCluster('auto-cluster', { LOG_LEVEL: 'error' }).install();
  const { redis, root, procs } = cluster;
  const start = (roles: string) => cluster.start(roles);
  let api: Client;
  let ws: { id: string };

  before(async () => {
    api = new Client((await start('api,runtime')).url);
    ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
  });

  /** automationSessions are the sessions runs started, by name (`automation <run id>#<attempt>`). */
  const automationSessions = async () => ((await api.get(`/api/sessions?workspace=${ws.id}`)).body.sessions as any[]).filter((s) => String(s.name).startsWith('automation '));

  it('records exactly one run and one session per tick with 2 controllers while the one running a turn is SIGKILLed', async () => {
    const [c1, c2] = [await start('controller'), await start('controller')];
    const spec = { name: 'slow', agent_name: 'scripted', prompt: '/sleep 2500', enabled: true, schedule: { mode: 'every', interval: '2s' }, fire_limit: { max: 1000, window: '1h' } };
    await putRecord(api, 'automation.job', 'slow', { kind: 'workspace', id: ws.id }, spec);
    // Wait until a run has its session and is mid-turn, then kill the controller that runs it.
    const victim = await eventually(async () => {
      const running = (await runsOf(api, 'jobs', 'slow')).find((r) => r.status === 'running' && r.session_id);
      expect(running).to.not.equal(undefined);
      const bus = await (async () => { const c = redis.client(); const rows = await c.xrange('svc:{bus}:events', '-', '+'); c.disconnect(); return rows; })();
      const fire = bus.map(([, f]) => JSON.parse(f[1])).find((e) => e.type === 'automation.job.pre_fire' && e.data.run_id === running.id);
      return { run: running, worker: String(fire.data.worker) };
    }, 30_000, 100);
    const dead = [c1, c2].find((c) => victim.worker.endsWith(`-${c.proc!.pid}`))!;
    expect(dead, victim.worker).to.not.equal(undefined);
    await dead.kill('SIGKILL');
    // The surviving controller takes the killed run over (after its lock lapses) and finishes it with the same session.
    await eventually(async () => {
      const r = (await api.get(`/api/automation/runs/${victim.run.id}`)).body.run;
      expect(r.status).to.equal('succeeded');
      expect(r.session_id).to.equal(victim.run.session_id);
    }, 60_000, 250);
    const disabledAt = Date.now();
    await putRecord(api, 'automation.job', 'slow', { kind: 'workspace', id: ws.id }, { ...spec, enabled: false }, 1);
    await new Promise((r) => setTimeout(r, 4000));
    await eventually(async () => {
      const runs = await runsOf(api, 'jobs', 'slow');
      expect(runs.filter((r) => r.status === 'running' || r.status === 'queued')).to.deep.equal([]);
    }, 60_000, 250);
    const all = await runsOf(api, 'jobs', 'slow');
    const ticks = all.map((r) => r.scheduled_at);
    expect(new Set(ticks).size, 'one run per tick').to.equal(ticks.length);
    // NOTE: a tick due just before the job was disabled but taken after it is recorded skipped (disabled), with no
    // session; every other run succeeded.
    const skipped = all.filter((r) => r.status === 'skipped');
    for (const r of skipped) {
      expect([r.reason, r.session_id], r.id).to.deep.equal(['disabled', '']);
      expect(Date.parse(r.scheduled_at), r.id).to.be.greaterThan(disabledAt - 2 * 2000);
    }
    const runs = all.filter((r) => r.status !== 'skipped');
    expect(runs.length).to.be.at.least(4);
    for (const r of runs) expect(r.status, r.id).to.equal('succeeded');
    const sessions = await automationSessions();
    expect(sessions.length, 'one session per run').to.equal(runs.length);
    for (const r of runs) expect(sessions.filter((s) => s.name === `automation ${r.id}#1`).map((s) => s.id), r.id).to.deep.equal([r.session_id]);
    for (const s of sessions) {
      const prompts = (await api.get(`/api/sessions/${s.id}/events?type=user_message`)).body.events;
      expect(prompts, s.id).to.have.length(1);
    }
  });

  it('fires a tick missed while no controller ran once at start, not once per missed tick', async () => {
    const controller = await start('controller');
    const spec = { name: 'beat', agent_name: 'scripted', prompt: 'beat', enabled: true, schedule: { mode: 'every', interval: '1s' }, fire_limit: { max: 1000, window: '1h' } };
    await putRecord(api, 'automation.job', 'beat', { kind: 'workspace', id: ws.id }, spec);
    await eventually(async () => expect((await runsOf(api, 'jobs', 'beat')).filter((r) => r.status === 'succeeded').length).to.be.at.least(2), 30_000, 100);
    const down = Date.now();
    for (const p of procs.filter((x) => x !== procs[0])) await p.kill('SIGKILL');
    expect(controller.proc!.signalCode).to.equal('SIGKILL');
    await new Promise((r) => setTimeout(r, 5000));
    const up = Date.now();
    await start('controller');
    await eventually(async () => expect((await runsOf(api, 'jobs', 'beat')).filter((r) => Date.parse(r.scheduled_at) > up && r.status === 'succeeded').length).to.be.at.least(2), 30_000, 100);
    const runs = await runsOf(api, 'jobs', 'beat');
    // While down, five ticks were due; the one pending tick fires once at start, the rest are not made up.
    // NOTE: the pending tick may fall due during the kills: it is found by its start, after `up`.
    const missed = runs.filter((r) => Date.parse(r.scheduled_at) < up && Date.parse(r.started_at) > up);
    expect(missed.map((r) => r.status)).to.deep.equal(['succeeded']);
    expect(Date.parse(missed[0].scheduled_at)).to.be.greaterThan(down - 1000);
    expect(new Set(runs.map((r) => r.scheduled_at)).size).to.equal(runs.length);
  });
});
