import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { putRecord, runsOf } from './helpers.ts';

describe('Automation runs: fire_limit, retry, fire now, routes and tools', function () {
  this.timeout(120_000);
  const f = new ServiceFixture().install();
  const ws = () => ({ kind: 'workspace', id: f.ws.id });
  const job = (over: Record<string, unknown> = {}) => ({ name: 'j', agent_name: 'scripted', prompt: 'hi', enabled: true, schedule: { mode: 'cron', expr: '0 0 1 1 *' }, ...over });

  it('enforces fire_limit: fires over max per window are recorded skipped (fire_limit), start no session, and stop nothing else', async () => {
    await putRecord(f.api, 'automation.job', 'limited', ws(), job({ schedule: { mode: 'every', interval: '1s' }, fire_limit: { max: 2, window: '1h' } }));
    const runs = await eventually(async () => {
      const r = await runsOf(f.api, 'jobs', 'limited');
      expect(r.filter((x) => x.status === 'skipped').length).to.be.at.least(2);
      // NOTE: a skip is recorded at once; the two fired runs finish only after their sessions' turns.
      expect(r.filter((x) => x.status !== 'skipped').map((x) => x.status)).to.deep.equal(['succeeded', 'succeeded']);
      return r;
    }, 30_000, 200);
    const fired = runs.filter((r) => r.status !== 'skipped');
    expect(fired.map((r) => r.status)).to.deep.equal(['succeeded', 'succeeded']);
    for (const r of runs.filter((x) => x.status === 'skipped')) expect(r).to.include({ reason: 'fire_limit', session_id: '' });
    // Fire now counts too: the limit is the job's, whoever fires.
    const now = await f.api.post('/api/automation/jobs/limited/trigger', {});
    expect(now.status).to.equal(202);
    expect(now.body.run).to.include({ status: 'skipped', reason: 'fire_limit', kind: 'manual' });
    // Every skip says so on the bus, the ticks the executor recorded and the fire refused at once alike.
    const skipped = [...runs.filter((x) => x.status === 'skipped').map((x) => x.id), now.body.run.id];
    await eventually(async () => {
      const evs = (await f.service.bus!.range('', 10_000)).filter((e) => e.type === 'automation.run.skipped');
      expect(evs.map((e) => e.data.run_id)).to.include.members(skipped);
      const manual = evs.find((e) => e.data.run_id === now.body.run.id)!;
      expect(manual).to.include({ source: 'automation', workspace_id: f.ws.id, outcome: 'info' });
      expect(manual.data).to.include({ reason: 'fire_limit', status: 'skipped', kind: 'manual' });
    });
  });

  it('retries a failed run with backoff up to max_retries, one new session per attempt, then fails it and says so on the bus', async () => {
    await putRecord(f.api, 'automation.job', 'flaky', ws(), job({ prompt: '/error boom', retry: { strategy: 'backoff', max_retries: 2, base_delay: '100ms' } }));
    const fired = await f.api.post('/api/automation/jobs/flaky/trigger', {});
    expect(fired.status).to.equal(202);
    const run = await eventually(async () => {
      const r = (await f.api.get(`/api/automation/runs/${fired.body.run.id}`)).body.run;
      expect(r.status).to.equal('failed');
      return r;
    }, 30_000, 100);
    expect(run).to.include({ attempt: 3, max_attempts: 3, reason: 'turn_failed', kind: 'manual', job_id: 'flaky' });
    expect(run.previous_session_ids).to.have.length(2);
    expect(new Set([...run.previous_session_ids, run.session_id]).size).to.equal(3);
    const bus = await f.service.bus!.latest(500);
    const failed = bus.filter((e) => e.type === 'automation.run.failed' && e.data.run_id === run.id);
    expect(failed).to.have.length(1);
    expect(failed[0]).to.include({ outcome: 'failure', workspace_id: f.ws.id, session_id: run.session_id, agent_name: 'scripted' });
    expect(bus.filter((e) => e.type === 'automation.job.post_fire' && e.data.run_id === run.id)).to.have.length(3);
  });

  it('a task job\'s fire creates a task with a queued run; a global job\'s fire without a workspace is skipped', async () => {
    await putRecord(f.api, 'automation.job', 'tasky', ws(), { name: 't', enabled: true, schedule: { mode: 'cron', expr: '0 0 1 1 *' }, task: { title: 'do it' } });
    const t = (await f.api.post('/api/automation/jobs/tasky/trigger', {})).body.run;
    const fired = await eventually(async () => { const r = (await f.api.get(`/api/automation/runs/${t.id}`)).body.run; expect(r, JSON.stringify(r)).to.include({ status: 'succeeded', session_id: '' }); return r; });
    const made = (await f.api.get(`/api/tasks?workspace=${f.ws.id}`)).body.tasks;
    expect(made.map((x: any) => [x.title, x.status, x.origin.kind])).to.deep.equal([['do it', 'ready', 'automation']]);
    // the run names the task it made and when it started; the task and its run say the job made them
    expect(fired.task_id).to.equal(made[0].id);
    expect(Date.parse(fired.started_at)).to.be.within(Date.parse(fired.created_at), Date.parse(fired.finished_at));
    expect(made[0].created_by).to.deep.equal({ kind: 'automation', ref: 'tasky' });
    expect(made[0].origin).to.deep.equal({ kind: 'automation', ref: 'tasky' });
    const taskRuns = (await f.api.get(`/api/tasks/${made[0].id}/runs`)).body.runs;
    expect(taskRuns.map((r: any) => [r.status, r.origin])).to.deep.equal([['queued', { kind: 'automation', ref: 'tasky' }]]);
    await putRecord(f.api, 'automation.job', 'everywhere', { kind: 'global' }, job());
    const g = (await f.api.post('/api/automation/jobs/everywhere/trigger', {})).body.run;
    await eventually(async () => expect((await f.api.get(`/api/automation/runs/${g.id}`)).body.run).to.include({ status: 'skipped', reason: 'workspace_required' }));
    await eventually(async () => expect((await f.service.bus!.range('', 10_000)).filter((e) => e.type === 'automation.run.skipped').map((e) => [e.data.run_id, e.data.reason])).to.deep.include([g.id, 'workspace_required']));
    const inWs = (await f.api.post('/api/automation/jobs/everywhere/trigger', { workspace_id: f.ws.id })).body.run;
    await eventually(async () => expect((await f.api.get(`/api/automation/runs/${inWs.id}`)).body.run).to.include({ status: 'succeeded', workspace_id: f.ws.id }), 20_000);
    const list = (await f.api.get('/api/automation/runs?job=everywhere&status=succeeded')).body.runs;
    expect(list.map((r: any) => r.id)).to.deep.equal([inWs.id]);
  });

  it('answers 404 for unknown jobs, triggers and runs and 422/400 for bad queries and bodies, changing nothing', async () => {
    await putRecord(f.api, 'automation.job', 'ok', ws(), job());
    for (const p of ['/api/automation/jobs/nope', '/api/automation/jobs/nope/history', '/api/automation/triggers/nope', '/api/automation/triggers/nope/history', '/api/automation/runs/run_nope']) {
      const res = await f.api.get(p);
      expect(res.status, p).to.equal(404);
      expect(res.body.diagnostic.code, p).to.match(/not_found$/);
    }
    expect((await f.api.post('/api/automation/jobs/nope/trigger', {})).status).to.equal(404);
    expect((await f.api.get('/api/automation/runs?status=done')).status).to.equal(422);
    expect((await f.api.get('/api/automation/runs?limit=lots')).status).to.equal(422);
    expect((await f.api.post('/api/automation/jobs/ok/trigger', { workspace_id: 'ws-missing' })).status).to.equal(422);
    expect((await f.api.post('/api/automation/jobs/ok/trigger', { workspace_id: 7 })).status).to.equal(422);
    expect((await f.api.post('/api/automation/jobs/ok/trigger', [])).status).to.equal(422);
    expect((await f.api.get('/api/automation/runs')).body.runs).to.deep.equal([]);
  });

  it('serves the svc__automation_* tools: list, get, history, fire now, runs', async () => {
    await putRecord(f.api, 'automation.job', 'tooled', ws(), job());
    const invoke = (id: string, input: object) => f.api.post(`/api/tools/${id}/invoke`, { workspace_id: f.ws.id, input });
    const list = await invoke('svc__automation_jobs_list', {});
    expect(list.status, JSON.stringify(list.body)).to.equal(200);
    expect(list.body.result.structured.jobs.map((j: any) => j.id)).to.deep.equal(['tooled']);
    expect((await invoke('svc__automation_jobs_get', { id: 'tooled' })).body.result.structured.job.state).to.be.oneOf(['Ready', 'Pending']);
    // Fire now is mutating: it needs an approval token, as every mutating tool does.
    expect((await invoke('svc__automation_jobs_trigger', { id: 'tooled' })).body.error.code).to.equal('tool_approval_required');
    const s = (await f.api.post('/api/sessions', { workspace: f.ws.id })).body.session;
    const approval = await f.api.post('/api/tools/svc__automation_jobs_trigger/approvals', { session_id: s.id, input: { id: 'tooled' } });
    expect(approval.status, JSON.stringify(approval.body)).to.equal(201);
    const fired = await f.api.post('/api/tools/svc__automation_jobs_trigger/invoke', { session_id: s.id, input: { id: 'tooled' }, approval_token: approval.body.approval.approval_token });
    expect(fired.status, JSON.stringify(fired.body)).to.equal(200);
    const runId = fired.body.result.structured.run.id;
    await eventually(async () => expect((await invoke('svc__automation_runs_get', { id: runId })).body.result.structured.run.status).to.equal('succeeded'), 20_000);
    expect((await invoke('svc__automation_jobs_history', { id: 'tooled' })).body.result.structured.runs.map((r: any) => r.id)).to.deep.equal([runId]);
    expect((await invoke('svc__automation_runs_list', { job_id: 'tooled' })).body.result.structured.runs).to.have.length(1);
    expect((await invoke('svc__automation_triggers_list', {})).body.result.structured.triggers).to.deep.equal([]);
    const missing = await invoke('svc__automation_jobs_get', { id: 'nope' });
    expect(missing.body.error.code).to.equal('tool_invalid_input');
  });
});
