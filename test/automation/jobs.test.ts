import { expect } from 'chai';
import { CronExpressionParser } from 'cron-parser';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { putRecord, runsOf } from './helpers.ts';

describe('Automation jobs: schedules fire sessions', function () {
  this.timeout(120_000);
  const f = new ServiceFixture().install();
  const ws = () => ({ kind: 'workspace', id: f.ws.id });

  it('fires an `every 1s` job on schedule, each tick one run with its own prompted session, and stops when disabled', async () => {
    await putRecord(f.api, 'automation.job', 'tick', ws(), { name: 'tick', agent_name: 'scripted', prompt: 'hello from a job', enabled: true, schedule: { mode: 'every', interval: '1s' }, fire_limit: { max: 100, window: '1m' } });
    const runs = await eventually(async () => {
      const r = (await runsOf(f.api, 'jobs', 'tick')).filter((x) => x.status === 'succeeded');
      expect(r.length).to.be.at.least(3);
      return r;
    }, 30_000, 200);
    // Each run: its own session, prompted once with the job's prompt; ticks are distinct and a second apart.
    const ticks = runs.map((r) => Date.parse(r.scheduled_at));
    expect(new Set(ticks).size).to.equal(ticks.length);
    for (let i = 1; i < ticks.length; i++) expect(ticks[i] - ticks[i - 1]).to.be.at.least(1000);
    expect(new Set(runs.map((r) => r.session_id)).size).to.equal(runs.length);
    for (const run of runs.slice(0, 3)) {
      expect(run).to.include({ kind: 'job', job_id: 'tick', workspace_id: f.ws.id, agent_name: 'scripted', attempt: 1, reason: '' });
      const events = (await f.api.get(`/api/sessions/${run.session_id}/events`)).body.events;
      const prompts = events.filter((e: any) => e.type === 'user_message');
      expect(prompts.map((e: any) => e.content.text)).to.deep.equal(['hello from a job']);
      expect(events.some((e: any) => e.type === 'done')).to.equal(true);
      // The run's session is stopped once its turn ended (readable, resumable), so firings do not pile up live sessions.
      await eventually(async () => expect((await f.api.get(`/api/sessions/${run.session_id}`)).body.session.state).to.equal('stopped'));
    }
    const view = (await f.api.get('/api/automation/jobs/tick')).body.job;
    expect(view).to.include({ id: 'tick', enabled: true, state: 'Ready' });
    expect(Date.parse(view.next_fire_at)).to.be.greaterThan(Date.now() - 1500);

    // Disabled: the scheduler is removed; after the reconcile no new run is recorded.
    await putRecord(f.api, 'automation.job', 'tick', ws(), { name: 'tick', agent_name: 'scripted', prompt: 'hello from a job', enabled: false, schedule: { mode: 'every', interval: '1s' }, fire_limit: { max: 100, window: '1m' } }, 1);
    await eventually(async () => expect((await f.api.get('/api/resources/automation.job/tick/status')).body.status.observed_version).to.equal(2));
    await new Promise((r) => setTimeout(r, 1500));
    const settled = (await runsOf(f.api, 'jobs', 'tick')).length;
    await new Promise((r) => setTimeout(r, 3000));
    expect((await runsOf(f.api, 'jobs', 'tick')).length).to.equal(settled);
    expect((await f.api.get('/api/automation/jobs/tick')).body.job).to.include({ enabled: false, next_fire_at: null });
  });

  it('schedules a cron job at the next times cron-parser computes, in the job\'s timezone (UTC by default)', async () => {
    const cases = [
      { id: 'weekday-9', schedule: { mode: 'cron', expr: '0 9 * * 1-5' }, tz: 'UTC' },
      { id: 'tokyo-930', schedule: { mode: 'cron', expr: '30 9 * * *', timezone: 'Asia/Tokyo' }, tz: 'Asia/Tokyo' },
      { id: 'ny-every-5', schedule: { mode: 'cron', expr: '*/5 * * * *', timezone: 'America/New_York' }, tz: 'America/New_York' },
    ];
    for (const c of cases) await putRecord(f.api, 'automation.job', c.id, ws(), { name: c.id, agent_name: 'scripted', prompt: 'p', enabled: true, schedule: c.schedule });
    for (const c of cases) {
      const want = CronExpressionParser.parse(c.schedule.expr, { tz: c.tz, currentDate: new Date() }).next().toDate().toISOString();
      await eventually(async () => {
        const status = (await f.api.get(`/api/resources/automation.job/${c.id}/status`)).body.status;
        expect(status.next_fire_at, c.id).to.equal(want);
        expect((await f.api.get(`/api/automation/jobs/${c.id}`)).body.job.next_fire_at, c.id).to.equal(want);
      });
    }
    // Changing the schedule replaces the scheduler: the next fire time follows the new expression.
    await putRecord(f.api, 'automation.job', 'weekday-9', ws(), { name: 'weekday-9', agent_name: 'scripted', prompt: 'p', enabled: true, schedule: { mode: 'cron', expr: '15 3 * * *' } }, 1);
    const want = CronExpressionParser.parse('15 3 * * *', { tz: 'UTC' }).next().toDate().toISOString();
    await eventually(async () => expect((await f.api.get('/api/automation/jobs/weekday-9')).body.job.next_fire_at).to.equal(want));
    // An unknown time zone is refused at the write (422 naming the field).
    const bad = await f.api.put('/api/resources/automation.job/bad-tz', { scope: ws(), spec: { name: 'b', agent_name: 'scripted', prompt: 'p', schedule: { mode: 'cron', expr: '* * * * *', timezone: 'Mars/Olympus' } }, expected_version: 0 });
    expect(bad.status).to.equal(422);
    expect(bad.body.diagnostic.evidence).to.have.property('spec.schedule.timezone');
  });
});
