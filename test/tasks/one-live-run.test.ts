import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';
import { Client, startService } from '../helpers/service.ts';

/** An agent session of the fixture workspace calling the agent task routes (AUTH_MODE=none headers). */
async function agent(f: ServiceFixture) {
  const res = await f.api.post('/api/sessions', { workspace: f.ws.id });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  const s = res.body.session;
  const headers = { 'X-SVC-Session-ID': s.id, 'X-SVC-Agent': s.agent_name };
  return (path: string, body: unknown = {}) => f.api.call('POST', `/api/agent/tasks/${path}`, body, headers);
}

async function task(f: ServiceFixture, body: Record<string, unknown> = {}) {
  const res = await f.api.post('/api/tasks', { scope: 'workspace', workspace: f.ws.id, title: 't', ...body });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return res.body.task;
}

const runsOf = async (f: ServiceFixture, id: string) => (await f.api.get(`/api/tasks/${id}/runs`)).body.runs as { id: string; status: string; attempt: number }[];
const enqueued = async (f: ServiceFixture, id: string) =>
  (await f.service.bus!.latest(500)).filter((e) => e.type === 'task.run_enqueued' && (e.data as { task_id?: string }).task_id === id).length;

describe('One task, one live run (real Redis, real HTTP)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();

  it('auto_enqueue_on_ready, then start, then runs: one queued run; start and runs answer 409 naming it and store nothing', async () => {
    const t = await task(f, { auto_enqueue_on_ready: true });
    const [run] = await runsOf(f, t.id);
    for (const path of ['start', 'runs']) {
      const res = await f.api.post(`/api/tasks/${t.id}/${path}`, {});
      expect(res.status, path).to.equal(409);
      expect(res.body.diagnostic.code).to.equal('run_active');
      expect(res.body.diagnostic.evidence).to.deep.equal({ task_id: t.id, run_id: run.id, run_status: 'queued' });
      expect(res.body.error).to.include(run.id);
    }
    expect((await runsOf(f, t.id)).map((r) => r.id)).to.deep.equal([run.id]);
    expect(await enqueued(f, t.id)).to.equal(1);
    // a claimed run is live too
    const call = await agent(f);
    expect((await call('claim-next')).body.claim.run.id).to.equal(run.id);
    const again = await f.api.post(`/api/tasks/${t.id}/start`, {});
    expect(again.status).to.equal(409);
    expect(again.body.diagnostic.evidence).to.include({ run_id: run.id, run_status: 'claimed' });
    expect(await runsOf(f, t.id)).to.have.length(1);
  });

  it('many parallel starts over two api replicas leave exactly one live run; every other answer is 409 naming it', async () => {
    const other = await startService(f.redis.env, { DATA_DIR: f.dataDir, SVC_ROLES: 'api' });
    try {
      const replicas = [f.api, new Client(other.url)];
      for (let round = 0; round < 3; round++) {
        const t = await task(f);
        const answers = await Promise.all(Array.from({ length: 24 }, (_, n) => replicas[n % 2].post(`/api/tasks/${t.id}/${n % 3 ? 'start' : 'runs'}`, {})));
        const ok = answers.filter((a) => a.status === 201);
        expect(ok, JSON.stringify(answers.map((a) => a.status))).to.have.length(1);
        const winner = ok[0].body.run.id;
        for (const a of answers.filter((x) => x.status !== 201)) {
          expect(a.status).to.equal(409);
          expect(a.body.diagnostic.evidence.run_id).to.equal(winner);
        }
        const runs = await runsOf(f, t.id);
        expect(runs.map((r) => [r.id, r.status, r.attempt])).to.deep.equal([[winner, 'queued', 1]]);
      }
    } finally {
      await other.stop();
    }
  });

  it('two sessions cannot hold runs of one task at once, and a completed run completes the task', async () => {
    const t = await task(f, { auto_enqueue_on_ready: true });
    expect((await f.api.post(`/api/tasks/${t.id}/start`, {})).status).to.equal(409);
    const a = await agent(f);
    const b = await agent(f);
    const claim = (await a('claim-next')).body.claim;
    expect(claim.task.id).to.equal(t.id);
    expect((await b('claim-next')).status).to.equal(204);
    expect((await a(`${claim.run.id}/complete`, { result: { ok: true } })).status).to.equal(200);
    expect((await f.api.get(`/api/tasks/${t.id}`)).body.task.status).to.equal('completed');
    expect((await b('claim-next')).status).to.equal(204);
  });

  it('attempts stay unique and within max_attempts: a retry beside a live retry is 409, a run past max_attempts is 409', async () => {
    const t = await task(f, { max_attempts: 3, auto_enqueue_on_ready: true });
    const call = await agent(f);
    const fail = async () => {
      const c = (await call('claim-next')).body.claim;
      expect((await call(`${c.run.id}/fail`, { error: 'boom' })).status).to.equal(200);
      return c.run.id as string;
    };
    const first = await fail();
    // the automatic retry (attempt 2) is live: an operator retry of attempt 1 names it and stores nothing
    const [, second] = await runsOf(f, t.id);
    expect(second).to.include({ attempt: 2, status: 'queued' });
    const beside = await f.api.post(`/api/runs/${first}/retry`, {});
    expect(beside.status).to.equal(409);
    expect(beside.body.diagnostic.evidence).to.include({ run_id: second.id });
    await fail();
    const third = await fail();
    expect((await f.api.get(`/api/tasks/${t.id}`)).body.task.status).to.equal('failed');
    for (const res of [await f.api.post(`/api/runs/${third}/retry`, {}), await f.api.post(`/api/runs/${second.id}/retry`, {}), await f.api.post(`/api/tasks/${t.id}/start`, {}), await f.api.post(`/api/tasks/${t.id}/runs`, {})]) {
      expect(res.status).to.equal(409);
      expect(res.body.diagnostic.code).to.equal('attempts_exhausted');
      expect(res.body.diagnostic.evidence).to.deep.equal({ task_id: t.id, attempt: 4, max_attempts: 3 });
    }
    expect((await runsOf(f, t.id)).map((r) => r.attempt)).to.deep.equal([1, 2, 3]);
    // raising max_attempts lets it run again, as attempt 4
    await f.api.patch(`/api/tasks/${t.id}`, { max_attempts: 4 });
    const res = await f.api.post(`/api/tasks/${t.id}/start`, {});
    expect(res.status).to.equal(201);
    expect(res.body.run.attempt).to.equal(4);
  });

  it('the commit script refuses a plan that would add a second live run or reuse an attempt, and writes nothing', async () => {
    const t = await task(f, { auto_enqueue_on_ready: true });
    const store = f.service.tasks!.store;
    const [run] = await runsOf(f, t.id);
    const rev = Number(await store.get(store.keys.rev(t.id)));
    // NOTE: a plan built outside the service (as a buggy code path would): it reads the task's current revision.
    const plan = (id: string, attempt: number) => ({
      checks: [[t.id, rev]] as [string, number][],
      hset: [[store.keys.run(id), ['id', id, 'task_id', t.id, 'status', 'queued', 'attempt', String(attempt)]]] as [string, string[]][],
      zadd: [[store.keys.runs(t.id), Date.now(), id]] as [string, number, string][],
      enqueue: [[t.id, id, attempt, 3]] as [string, string, number, number][],
    });
    expect(await store.commit(plan('run_second', 2))).to.deep.equal({ kind: 'live', taskId: t.id, runId: run.id, status: 'queued' });
    await f.api.post(`/api/runs/${run.id}/fail`, { reason: 'stop' });
    const rev2 = Number(await store.get(store.keys.rev(t.id)));
    expect(await store.commit({ ...plan('run_dup', 1), checks: [[t.id, rev2]] })).to.deep.equal({ kind: 'attempt_taken', taskId: t.id, attempt: 1, runId: run.id });
    expect(await store.commit({ ...plan('run_far', 4), checks: [[t.id, rev2]] })).to.deep.equal({ kind: 'attempts', taskId: t.id, attempt: 4, maxAttempts: 3 });
    expect((await runsOf(f, t.id)).map((r) => r.id)).to.deep.equal([run.id]);
    expect(await store.readRuns(['run_second', 'run_dup', 'run_far'])).to.deep.equal([undefined, undefined, undefined]);
    expect(Number(await store.get(store.keys.rev(t.id)))).to.equal(rev2);
  });
});
