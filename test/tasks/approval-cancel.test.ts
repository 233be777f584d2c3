import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';

async function task(f: ServiceFixture, body: Record<string, unknown> = {}, parent?: string) {
  const res = await f.api.post(parent ? `/api/tasks/${parent}/children` : '/api/tasks', { scope: 'workspace', workspace: f.ws.id, title: 't', ...body });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return res.body.task;
}

const get = async (f: ServiceFixture, id: string) => (await f.api.get(`/api/tasks/${id}`)).body.task;
const runsOf = async (f: ServiceFixture, id: string) => (await f.api.get(`/api/tasks/${id}/runs`)).body.runs as { id: string; status: string }[];

describe('Approval decisions and cancel propagation (real Redis, real HTTP)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();

  it('approving a rejected task is 409 and enqueues nothing; an approval decision is made once, from pending', async () => {
    const t = await task(f, { approval_policy: 'manual' });
    expect((await f.api.post(`/api/tasks/${t.id}/reject`, {})).status).to.equal(200);
    const res = await f.api.post(`/api/tasks/${t.id}/approve`, {});
    expect(res.status).to.equal(409);
    expect(res.body.diagnostic).to.deep.include({ code: 'invalid_transition' });
    expect(res.body.diagnostic.evidence).to.deep.equal({ approval_state: 'rejected' });
    expect(await get(f, t.id)).to.include({ approval_state: 'rejected', status: 'blocked' });
    expect(await runsOf(f, t.id)).to.deep.equal([]);
    // a pending one is approved once; a second approve is 409 too
    const p = await task(f, { approval_policy: 'manual' });
    expect((await f.api.post(`/api/tasks/${p.id}/approve`, {})).status).to.equal(201);
    expect((await f.api.post(`/api/tasks/${p.id}/approve`, {})).status).to.equal(409);
    expect(await runsOf(f, p.id)).to.have.length(1);
  });

  it('cancelling a parent cancels its unfinished descendants and their runs, and leaves finished ones as they are', async () => {
    const parent = await task(f, { title: 'parent' });
    const child = await task(f, { title: 'child', auto_enqueue_on_ready: true }, parent.id);
    const grandchild = await task(f, { title: 'grandchild', auto_enqueue_on_ready: true }, child.id);
    const done = await task(f, { title: 'done', auto_enqueue_on_ready: true }, parent.id);
    const [doneRun] = await runsOf(f, done.id);
    // finish `done` through an operator claim and complete
    expect((await f.api.post(`/api/task-runs/${doneRun.id}/claim`, {})).status).to.equal(200);
    expect((await f.api.post(`/api/task-runs/${doneRun.id}/complete`, {})).status).to.equal(200);
    const other = await task(f, { title: 'unrelated', auto_enqueue_on_ready: true });

    const res = await f.api.post(`/api/tasks/${parent.id}/cancel`, { reason: 'plan changed' });
    expect(res.status).to.equal(200);
    expect(res.body.task.status).to.equal('canceled');
    for (const id of [child.id, grandchild.id]) {
      expect((await get(f, id)).status, id).to.equal('canceled');
      expect((await runsOf(f, id)).map((r) => r.status), id).to.deep.equal(['canceled']);
    }
    expect((await get(f, done.id)).status).to.equal('completed');
    expect((await runsOf(f, done.id)).map((r) => r.status)).to.deep.equal(['completed']);
    expect((await get(f, other.id)).status).to.equal('ready');
    const events = (await f.service.bus!.latest(500)).filter((e) => e.type === 'task.canceled').map((e) => e.data as { task_id: string; propagated_from_task_id?: string });
    expect(events.map((d) => [d.task_id, d.propagated_from_task_id]).sort()).to.deep.equal([[parent.id, undefined], [child.id, parent.id], [grandchild.id, parent.id]].sort());
    // nothing of the canceled tree can be claimed; the unrelated task's run can
    expect((await f.api.get('/api/scheduler')).body.scheduler.queued).to.equal(1);
  });
});
