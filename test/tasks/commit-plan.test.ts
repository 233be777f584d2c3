import { expect } from 'chai';
import { Redis } from 'ioredis';
import pino from 'pino';
import { TaskStore } from '../../store/task-store.ts';
import { TaskService } from '../../runtime/tasks/service.ts';
import { Tx } from '../../runtime/tasks/tx.ts';
import { RedisServer } from '../helpers/redis-server.ts';

/** The hash fields a plan writes for `key` (undefined: the plan does not write that hash). */
const written = (plan: ReturnType<Tx['plan']>, key: string) => plan.hset!.find(([k]) => k === key)?.[1];

/** retitled is the plan of a transaction that renames task `id` (not committed), with the transaction. */
async function retitled(store: TaskStore, id: string, title: string) {
  const tx = new Tx(store);
  const l = await tx.load(id);
  l.task.title = title;
  tx.touch(l);
  await tx.reconcile();
  return { tx, plan: tx.plan() };
}

describe('Task commits write only the fields a transaction changed (real Redis)', function () {
  this.timeout(30_000);
  const redis = new RedisServer();
  let conn: Redis;
  let store: TaskStore;
  let tasks: TaskService;

  before(async () => {
    await redis.start();
    conn = new Redis(redis.url);
    store = new TaskStore(conn);
    tasks = new TaskService({ store, logger: pino({ level: 'silent' }) });
  });
  after(async () => {
    conn?.disconnect();
    await redis.destroy();
  });

  it('a changed task writes its changed fields, leaves its runs unwritten, and reads back whole', async () => {
    const t = await tasks.create({ scope: 'global', title: 'before', id: 'diff1', auto_enqueue_on_ready: true }, { name: 'test' });
    const [runId] = await store.runIdsOf(t.id);
    const taskBefore = await conn.hgetall(store.keys.task(t.id));
    const runBefore = await conn.hgetall(store.keys.run(runId));
    const rev = Number(await conn.get(store.keys.rev(t.id)));

    const { tx, plan } = await retitled(store, t.id, 'after');
    expect(written(plan, store.keys.task(t.id))).to.deep.equal(['title', 'after', 'updated_at', tx.nowIso]);
    expect(written(plan, store.keys.run(runId)), 'an unchanged run is not written').to.equal(undefined);
    expect(await store.commit(plan)).to.deep.equal({ kind: 'ok' });

    expect(await conn.hgetall(store.keys.task(t.id))).to.deep.equal({ ...taskBefore, title: 'after', updated_at: tx.nowIso });
    expect(await conn.hgetall(store.keys.run(runId))).to.deep.equal(runBefore);
    expect(Number(await conn.get(store.keys.rev(t.id)))).to.equal(rev + 1);
  });

  it('a run a transaction creates is written whole', async () => {
    const t = await tasks.create({ scope: 'global', title: 'x', id: 'diff2' }, { name: 'test' });
    expect(await store.runIdsOf(t.id)).to.deep.equal([]);
    const { run } = await tasks.runOp(t.id, 'start', {});
    const stored = await conn.hgetall(store.keys.run(String(run!.id)));
    expect(stored).to.include({ id: run!.id, task_id: t.id, status: 'queued', attempt: '1', claimed_by: 'null', metadata: '{}' });
    expect(Object.keys(stored)).to.include.members(['queued_at', 'queued_ms', 'lease_ms', 'origin', 'result', 'session_id']);
  });

  it('a plan refused for a changed revision writes nothing', async () => {
    const t = await tasks.create({ scope: 'global', title: 'x', id: 'diff3' }, { name: 'test' });
    const taskBefore = await conn.hgetall(store.keys.task(t.id));
    const { plan } = await retitled(store, t.id, 'changed');
    // NOTE: another writer commits first: the task's revision moves, so this plan must be refused whole.
    await conn.incr(store.keys.rev(t.id));
    expect(await store.commit(plan)).to.deep.equal({ kind: 'conflict' });
    expect(await conn.hgetall(store.keys.task(t.id))).to.deep.equal(taskBefore);
  });
});

describe('A completion after a claim in the same process starts from the claim\'s answer (real Redis)', function () {
  this.timeout(30_000);
  const redis = new RedisServer();
  const caller = { session_id: 'ses-claimer', workspace_id: '', agent_name: 'worker' };
  let conn: Redis;
  let store: TaskStore;
  let tasks: TaskService;
  /** The task reads (load-task-1.lua) the stores made, by what they named. */
  let loads: unknown[];

  before(async () => {
    await redis.start();
    conn = new Redis(redis.url);
    store = new TaskStore(conn);
    const load = store.load.bind(store);
    store.load = (by) => { loads.push(by); return load(by); };
    tasks = new TaskService({ store, logger: pino({ level: 'silent' }) });
  });
  beforeEach(() => { loads = []; });
  after(async () => {
    conn?.disconnect();
    await redis.destroy();
  });

  const claim = async (id: string) => {
    await tasks.create({ scope: 'global', title: id, id, auto_enqueue_on_ready: true }, { name: 'test' });
    const out = (await tasks.claimNext(caller, { workspace_id: '' })) as { claim: { run: { id: string } } };
    loads = [];
    return out.claim.run.id;
  };

  it('completes without reading the task again, and the run and task read back completed', async () => {
    const runId = await claim('snap1');
    await tasks.complete(caller, runId, { result: { ok: 1 } });
    expect(loads, 'no read of the claimed task').to.deep.equal([]);
    expect(await conn.hmget(store.keys.run(runId), 'status', 'result')).to.deep.equal(['completed', '{"ok":1}']);
    expect(await conn.hget(store.keys.task('snap1'), 'status')).to.equal('completed');
  });

  it('a task changed between the claim and the completion is read again, and the change is kept', async () => {
    const runId = await claim('snap2');
    await tasks.patch('snap2', { title: 'changed meanwhile' });
    loads = [];
    await tasks.complete(caller, runId, {});
    expect(loads, 'the rerun after the revision conflict reads it').to.deep.equal([{ runId }]);
    expect(await conn.hmget(store.keys.task('snap2'), 'title', 'status')).to.deep.equal(['changed meanwhile', 'completed']);
    expect(await conn.hget(store.keys.run(runId), 'status')).to.equal('completed');
  });

  it('another process (without the claim\'s answer) reads the task; a second write of the lease reads it too', async () => {
    const runId = await claim('snap3');
    const other = new TaskService({ store, logger: pino({ level: 'silent' }) });
    await other.heartbeat(caller, runId, {});
    expect(loads).to.deep.equal([{ runId }]);
    await tasks.heartbeat(caller, runId, { lease_seconds: 60 });
    expect(loads, 'the claim\'s answer is stale after the other process\'s write: read again').to.deep.equal([{ runId }, { runId }]);
    await tasks.complete(caller, runId, {});
    expect(loads, 'taken by the first write: the completion reads').to.have.length(3);
    expect(await conn.hget(store.keys.run(runId), 'status')).to.equal('completed');
  });
});
