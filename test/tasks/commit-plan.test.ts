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
