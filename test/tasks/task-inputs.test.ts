import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';

const taskCount = async (f: ServiceFixture) => ((await f.service.tasks!.store.listTaskIds(0, 1000)) as string[]).length;

describe('Task inputs that are refused (real Redis, real HTTP)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();

  it('refuses a task in a workspace that does not exist with 422 naming the field, and stores nothing', async () => {
    for (const [field, ref] of [['workspace', 'ws_nope'], ['workspace_id', 'ws_nope'], ['workspace', '/no/such/root']]) {
      const res = await f.api.post('/api/tasks', { scope: 'workspace', [field]: ref, title: 't', auto_enqueue_on_ready: true });
      expect(res.status, `${field}=${ref}`).to.equal(422);
      expect(res.body.diagnostic.code).to.equal('workspace_not_found');
      expect(Object.keys(res.body.diagnostic.evidence)).to.deep.equal([field]);
    }
    expect(await taskCount(f)).to.equal(0);
    expect((await f.api.get('/api/scheduler')).body.scheduler.queued).to.equal(0);
  });

  it('finds a workspace by id, name or path, on create and in the list filter, and stores its id', async () => {
    const { id, name, root_dir } = f.ws;
    const made = [];
    for (const ref of [id, name, root_dir, `${root_dir}/`]) {
      const res = await f.api.post('/api/tasks', { scope: 'workspace', workspace: ref, title: ref });
      expect(res.status, ref).to.equal(201);
      expect(res.body.task.workspace_id).to.equal(id);
      made.push(res.body.task.id);
    }
    await f.api.post('/api/tasks', { scope: 'global', title: 'g' });
    for (const ref of [id, name, root_dir]) {
      const res = await f.api.get(`/api/tasks?workspace=${encodeURIComponent(ref)}`);
      expect(res.status, ref).to.equal(200);
      expect(res.body.tasks.map((t: { id: string }) => t.id).sort(), ref).to.deep.equal([...made].sort());
    }
    const none = await f.api.get('/api/tasks?workspace=ws_nope');
    expect(none.status).to.equal(422);
    expect(none.body.diagnostic.evidence).to.have.property('workspace');
  });

  it('PATCH refuses a field it cannot change (status, a typo) with 422 naming each, and changes nothing', async () => {
    const t = (await f.api.post('/api/tasks', { scope: 'global', title: 'before' })).body.task;
    // An unknown field is refused first (field validation, as kube-apiserver's decode step), then a known one PATCH
    // cannot change.
    const typo = await f.api.patch(`/api/tasks/${t.id}`, { title: 'after', status: 'completed', titel: 'x' });
    expect(typo.status).to.equal(422);
    expect(typo.body.diagnostic).to.include({ code: 'unknown_field' });
    expect(Object.keys(typo.body.diagnostic.evidence)).to.deep.equal(['titel']);
    const res = await f.api.patch(`/api/tasks/${t.id}`, { title: 'after', status: 'completed' });
    expect(res.status).to.equal(422);
    expect(Object.keys(res.body.diagnostic.evidence)).to.deep.equal(['status']);
    const now = (await f.api.get(`/api/tasks/${t.id}`)).body.task;
    expect(now).to.include({ title: 'before', status: 'ready', updated_at: t.updated_at });
    // the fields that never change after create stay 400 immutable_field
    expect((await f.api.patch(`/api/tasks/${t.id}`, { scope: 'workspace' })).body.diagnostic.code).to.equal('immutable_field');
  });

  it('GET /api/tasks refuses an unknown status and any limit outside 1..500 (abc as -1) with 422 naming the parameter', async () => {
    await f.api.post('/api/tasks', { scope: 'global', title: 't' });
    for (const q of ['status=bogus', 'limit=abc', 'limit=-1', 'limit=1.5', 'limit=501']) {
      const res = await f.api.get(`/api/tasks?${q}`);
      expect(res.status, q).to.equal(422);
      expect(res.body.diagnostic.code, q).to.equal('invalid_query');
      expect(Object.keys(res.body.diagnostic.evidence), q).to.deep.equal([q.split('=')[0]]);
    }
    expect((await f.api.get('/api/tasks?status=ready&limit=1')).body.tasks).to.have.length(1);
    expect((await f.api.get('/api/scheduler/backlog?limit=abc')).status).to.equal(422);
  });
});
