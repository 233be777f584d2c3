import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';
import { svcctl } from './cli.ts';

describe('svcctl tasks and fire (child process, real service and Redis)', function () {
  this.timeout(180_000);
  const f = new ServiceFixture().install();
  let env: Record<string, string> = {};
  beforeEach(() => { env = { SVC_URL: f.service.url }; });

  const task = async (title: string) => {
    const res = await f.api.post('/api/tasks', { scope: 'workspace', workspace: f.ws.id, title });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.task as { id: string; status: string };
  };
  const json = (out: string) => JSON.parse(out);

  it('tasks list, get, start and cancel: the run, who holds its lease, and what changed', async () => {
    const a = await task('first');
    const b = await task('second');
    const list = await svcctl(['tasks', 'list', '-o', 'json'], env);
    expect(list.code, list.stderr).to.equal(0);
    expect(json(list.stdout).tasks.map((t: { id: string }) => t.id).sort()).to.deep.equal([a.id, b.id].sort());
    const text = await svcctl(['tasks', 'list', '-w', f.ws.id, '-o', 'text'], env);
    expect(text.stdout.split('\n')[0]).to.match(/^ID +STATUS +PRIORITY +WORKSPACE +TITLE +AGE$/);
    expect(text.stdout).to.match(new RegExp(`${a.id} +ready +\\S+ +${f.ws.id} +first`));

    const started = await svcctl(['tasks', 'start', a.id, '-o', 'json'], env);
    expect(started.code, started.stderr).to.equal(0);
    const run = json(started.stdout).run;
    expect(run).to.include({ task_id: a.id, status: 'queued', attempt: 1 });
    expect(json((await svcctl(['tasks', 'list', '--status', 'ready', '-o', 'json'], env)).stdout).tasks.map((t: { id: string }) => t.id)).to.include(b.id);

    // The operator claims the run: get shows who holds the lease and for how long.
    expect((await f.api.post(`/api/task-runs/${run.id}/claim`, {})).status).to.equal(200);
    const got = await svcctl(['tasks', 'get', a.id, '-o', 'json'], env);
    expect(got.code, got.stderr).to.equal(0);
    expect(json(got.stdout).task.id).to.equal(a.id);
    expect(json(got.stdout).runs.map((r: { id: string; status: string }) => [r.id, r.status])).to.deep.equal([[run.id, 'claimed']]);
    const gotText = await svcctl(['tasks', 'get', a.id, '-o', 'text'], env);
    expect(gotText.stdout).to.match(new RegExp(`${run.id} +claimed +1 +human/anonymous +[45]m `));

    const canceled = await svcctl(['tasks', 'cancel', a.id, '--reason', 'not needed', '-o', 'json'], env);
    expect(canceled.code, canceled.stderr).to.equal(0);
    expect(json(canceled.stdout).task).to.include({ id: a.id, status: 'canceled' });
    const runs = (await f.api.get(`/api/tasks/${a.id}/runs`)).body.runs;
    expect(runs.map((r: { status: string }) => r.status)).to.deep.equal(['canceled']);
    // The other task is untouched.
    expect((await f.api.get(`/api/tasks/${b.id}`)).body.task.status).to.equal('ready');
  });

  it('tasks: a missing task or a refused start is exit 1, bad flags exit 2, no service exit 3', async () => {
    const missing = await svcctl(['tasks', 'get', 'task-nope'], env);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.contain('404');
    const done = await task('done');
    expect((await f.api.post(`/api/tasks/${done.id}/cancel`, {})).status).to.equal(200);
    const refused = await svcctl(['tasks', 'start', done.id], env);
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.match(/POST \/api\/tasks\/\S+\/start: 4\d\d /);
    expect((await f.api.get(`/api/tasks/${done.id}/runs`)).body.runs).to.deep.equal([]);
    expect((await svcctl(['tasks', 'list', '--limit', 'many'], env)).code).to.equal(2);
    expect((await svcctl(['tasks', 'start'], env)).code).to.equal(2);
    expect((await svcctl(['tasks', 'list'], { SVC_URL: 'http://127.0.0.1:1' })).code).to.equal(3);
  });

  it('tasks list reads every page (more tasks than one request returns), or --limit of them', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 510; i += 30) {
      const batch = await Promise.all(Array.from({ length: Math.min(30, 510 - i) }, (_, n) => task(`t${i + n}`)));
      ids.push(...batch.map((t) => t.id));
    }
    const all = await svcctl(['tasks', 'list', '-o', 'json'], env);
    expect(all.code, all.stderr).to.equal(0);
    const listed = json(all.stdout).tasks.map((t: { id: string }) => t.id);
    expect(listed).to.have.length(510);
    expect(new Set(listed)).to.deep.equal(new Set(ids));
    expect(json((await svcctl(['tasks', 'list', '--limit', '7', '-o', 'json'], env)).stdout).tasks).to.have.length(7);
  });

  it('fire runs an automation job now and --wait follows its run to the end; a skipped run or a missing job is exit 1', async () => {
    const job = (scope: Record<string, string>, name: string) => f.api.put(`/api/resources/automation.job/${name}?wait=true`, {
      scope, expected_version: 0,
      spec: { name, agent_name: 'scripted', prompt: 'summarize the day', enabled: true, schedule: { mode: 'cron', expr: '0 2 * * *' } },
    });
    expect((await job({ kind: 'workspace', id: f.ws.id }, 'nightly')).status).to.equal(201);
    const fired = await svcctl(['fire', 'nightly', '--wait', '-o', 'json'], env);
    expect(fired.code, fired.stderr).to.equal(0);
    const run = json(fired.stdout).run;
    expect(run).to.include({ job_id: 'nightly', status: 'succeeded', workspace_id: f.ws.id });
    expect(run.session_id).to.match(/^sess-/);
    expect((await f.api.get(`/api/automation/runs/${run.id}`)).body.run.status).to.equal('succeeded');

    // A global job needs a workspace: without one its run is skipped (exit 1); with -w it runs there.
    expect((await job({ kind: 'global' }, 'everywhere')).status).to.equal(201);
    const queued = await svcctl(['fire', 'everywhere', '-o', 'json'], env);
    expect(queued.code, queued.stderr).to.equal(0);
    expect(json(queued.stdout).run.status).to.equal('queued');
    const skipped = await svcctl(['fire', 'everywhere', '--wait', '-o', 'text'], env);
    expect(skipped.code, skipped.stdout).to.equal(1);
    expect(skipped.stdout).to.match(/^\S+ skipped \(workspace_required/);
    const there = await svcctl(['fire', 'everywhere', '-w', f.ws.id, '--wait', '-o', 'text'], env);
    expect(there.code, there.stderr).to.equal(0);
    expect(there.stdout).to.match(/^\S+ succeeded session sess-\S+\n$/);

    const missing = await svcctl(['fire', 'no-such-job'], env);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.contain('404');
    expect((await svcctl(['fire', 'nightly', '--wait', '--timeout', 'soon'], env)).code).to.equal(2);
  });
});
