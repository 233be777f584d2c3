import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { putRecord, runsOf } from './helpers.ts';

const condition = (status: any, type: string) => status?.conditions?.find((c: any) => c.type === type);

describe('Automation jobs: CronJob controls (concurrency_policy, starting_deadline) and one-shots whose time passed', function () {
  this.timeout(120_000);
  const f = new ServiceFixture().install();
  const ws = () => ({ kind: 'workspace', id: f.ws.id });
  const slow = (name: string, extra: Record<string, unknown>) => putRecord(f.api, 'automation.job', name, ws(), {
    name, agent_name: 'scripted', prompt: '/sleep 2500', enabled: true, schedule: { mode: 'every', interval: '1s' }, fire_limit: { max: 1000, window: '1h' }, ...extra,
  });
  const disable = async (name: string) => {
    const rec = (await f.api.get(`/api/resources/automation.job/${name}`)).body.record;
    await putRecord(f.api, 'automation.job', name, ws(), { ...rec.spec, enabled: false }, rec.version);
  };
  const overlapping = (runs: any[]) => {
    const spans = runs.filter((r) => r.started_at && r.finished_at).map((r) => [Date.parse(r.started_at), Date.parse(r.finished_at)]).sort((a, b) => a[0] - b[0]);
    return spans.some((s, i) => i > 0 && s[0] < spans[i - 1][1]);
  };

  it('forbid: a tick that arrives while a run is live is skipped (concurrency_forbidden), so runs never overlap', async () => {
    await slow('forbid', { concurrency_policy: 'forbid' });
    const runs = await eventually(async () => {
      const r = await runsOf(f.api, 'jobs', 'forbid');
      expect(r.filter((x) => x.reason === 'concurrency_forbidden').length).to.be.at.least(2);
      expect(r.filter((x) => x.status === 'succeeded').length).to.be.at.least(2);
      return r;
    }, 60_000, 200);
    await disable('forbid');
    for (const r of runs.filter((x) => x.reason === 'concurrency_forbidden')) expect(r.status).to.equal('skipped');
    expect(overlapping(runs.filter((x) => x.status === 'succeeded'))).to.equal(false);
  });

  it('replace: a tick that arrives while a run is live fails that run (replaced) and stops its session', async () => {
    await slow('replace', { concurrency_policy: 'replace' });
    const replaced = await eventually(async () => {
      const r = (await runsOf(f.api, 'jobs', 'replace')).filter((x) => x.reason === 'replaced');
      expect(r.length).to.be.at.least(1);
      return r[0];
    }, 60_000, 200);
    await disable('replace');
    expect(replaced.status).to.equal('failed');
    expect(replaced.error).to.match(/replaced by run /);
    await eventually(async () => expect((await f.api.get(`/api/sessions/${replaced.session_id}`)).body.session.state).to.equal('stopped'), 20_000, 200);
  });

  it('a one-shot whose time passed fires once at once and says so; past its starting_deadline it never fires and says so', async () => {
    const past = new Date(Date.now() - 3_600_000).toISOString();
    await putRecord(f.api, 'automation.job', 'late', ws(), { name: 'late', agent_name: 'scripted', prompt: 'late', enabled: true, schedule: { mode: 'at', time: past } });
    await putRecord(f.api, 'automation.job', 'missed', ws(), { name: 'missed', agent_name: 'scripted', prompt: 'missed', enabled: true, schedule: { mode: 'at', time: past }, starting_deadline: '5m' });
    await eventually(async () => expect((await runsOf(f.api, 'jobs', 'late')).map((r) => r.status)).to.deep.equal(['succeeded']), 30_000, 200);
    const st = (await f.api.get('/api/resources/automation.job/missed/status')).body.status;
    expect(condition(st, 'Ready').message).to.match(/^missed: due at .*starting_deadline 5m/);
    expect(st.next_fire_at).to.equal(null);
    expect(await runsOf(f.api, 'jobs', 'missed')).to.deep.equal([]);
  });

  it('history_limit keeps only the newest runs in the job\'s history', async () => {
    await putRecord(f.api, 'automation.job', 'short', ws(), { name: 'short', agent_name: 'scripted', prompt: 'p', enabled: true, schedule: { mode: 'cron', expr: '0 0 1 1 *' }, history_limit: 2 });
    const fired: string[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await f.api.post('/api/automation/jobs/short/trigger', {});
      expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201, 202]);
      fired.push(res.body.run.id);
    }
    const runs = await runsOf(f.api, 'jobs', 'short');
    expect(runs.map((r) => r.id)).to.deep.equal(fired.slice(2));
  });

  it('refuses an unknown concurrency_policy and a starting_deadline that is not a duration with 422 naming each', async () => {
    const spec = { name: 'bad', agent_name: 'scripted', prompt: 'p', enabled: true, schedule: { mode: 'every', interval: '1h' } };
    for (const [field, value] of [['concurrency_policy', 'sometimes'], ['starting_deadline', 'soon']]) {
      const res = await f.api.put('/api/resources/automation.job/bad', { scope: ws(), expected_version: 0, spec: { ...spec, [field]: value } });
      expect(res.status, field).to.equal(422);
      expect(res.body.diagnostic.evidence).to.have.property(`spec.${field}`);
    }
    expect((await f.api.get('/api/resources/automation.job/bad')).status).to.equal(404);
  });
});
