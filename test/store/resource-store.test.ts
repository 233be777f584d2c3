import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { ResourceStore } from '../../store/resource-store.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import type { PutRequest } from '../../store/types.ts';

const owner = { kind: 'daemon', id: 'daemon-control' };
const source = { kind: 'daemon', id: 'system' };
const put = (over: Partial<PutRequest> = {}): PutRequest => ({
  kind: 'tool', id: 't1', scope: { kind: 'global' }, owner, source, spec: { a: 1 }, expectedVersion: 0, ...over,
});

describe('ResourceStore (real Redis)', () => {
  const server = new RedisServer();
  let redis: Redis;
  let store: ResourceStore;

  before(async () => { await server.start(); });
  after(async () => { redis?.disconnect(); await server.destroy(); });
  beforeEach(async () => {
    await server.flush();
    redis?.disconnect();
    redis = server.client();
    store = new ResourceStore({ redis });
  });

  it('creates at version 1 with expected_version 0 and logs one change at revision 1', async () => {
    const res = await store.put(put());
    expect(res).to.include({ created: true, changed: true, revision: 1 });
    expect(res.record).to.include({ kind: 'tool', id: 't1', version: 1 });
    expect(res.record.created_at).to.equal(res.record.updated_at);
    const changes = await store.changesAfter(0);
    expect(changes.map((c) => [c.revision, c.type, c.version])).to.deep.equal([[1, 'put', 1]]);
  });

  it('rejects a create over an existing record with 409 and leaves it unchanged', async () => {
    await store.put(put());
    const err = await store.put(put({ spec: { a: 2 } })).catch((e) => e);
    expect(err.status).to.equal(409);
    expect((await store.get('tool', 't1'))?.spec).to.deep.equal({ a: 1 });
    expect(await store.revision()).to.equal(1);
  });

  it('updates with the current version, keeps created_at and bumps version', async () => {
    const a = await store.put(put());
    const b = await store.put(put({ spec: { a: 2 }, expectedVersion: 1 }));
    expect(b).to.include({ created: false, changed: true });
    expect(b.record.version).to.equal(2);
    expect(b.record.created_at).to.equal(a.record.created_at);
  });

  it('rejects a stale version with 409 naming the current version, and writes nothing', async () => {
    await store.put(put());
    await store.put(put({ spec: { a: 2 }, expectedVersion: 1 }));
    const err = await store.put(put({ spec: { a: 3 }, expectedVersion: 1 })).catch((e) => e);
    expect(err.status).to.equal(409);
    expect(err.evidence.current_version).to.equal(2);
    expect((await store.get('tool', 't1'))?.spec).to.deep.equal({ a: 2 });
    expect(await store.revision()).to.equal(2);
  });

  it('answers 404 for expected_version > 0 on a missing record, and creates nothing', async () => {
    const err = await store.put(put({ expectedVersion: 3 })).catch((e) => e);
    expect(err.status).to.equal(404);
    expect(await store.get('tool', 't1')).to.equal(undefined);
  });

  it('keeps the version and logs nothing for a write that changes nothing (key order ignored)', async () => {
    await store.put(put({ spec: { a: 1, b: [1, 2] } }));
    const res = await store.put(put({ spec: { b: [1, 2], a: 1 }, expectedVersion: 1 }));
    expect(res).to.include({ changed: false, created: false, revision: 1 });
    expect(res.record.version).to.equal(1);
    expect(await store.revision()).to.equal(1);
    expect(await store.changesAfter(0)).to.have.length(1);
  });

  it('runs every check on a dry run and stores nothing', async () => {
    const res = await store.put(put({ dryRun: true }));
    expect(res.record.version).to.equal(1);
    expect(await store.get('tool', 't1')).to.equal(undefined);
    expect(await store.revision()).to.equal(0);
    await store.put(put());
    const err = await store.put(put({ dryRun: true })).catch((e) => e);
    expect(err.status).to.equal(409);
  });

  it('deletes at the current version, logs the deletion with the old record, and clears indexes', async () => {
    await store.put(put({ scope: { kind: 'global' } }));
    const stale = await store.delete('tool', 't1', 2).catch((e) => e);
    expect(stale.status).to.equal(409);
    const res = await store.delete('tool', 't1', 1);
    expect(res.revision).to.equal(2);
    expect(await store.get('tool', 't1')).to.equal(undefined);
    expect(await store.list()).to.deep.equal([]);
    expect(await store.list({ owner })).to.deep.equal([]);
    const [, del] = await store.changesAfter(0);
    expect(del).to.include({ type: 'delete', version: 1 });
    expect(del.record.id).to.equal('t1');
    expect((await store.delete('tool', 't1', 1).catch((e) => e)).status).to.equal(404);
  });

  it('lists in (kind, id) order with every filter, moving index entries when the scope changes', async () => {
    await redis.hset('svc:{r}:ws', 'w1', '{}');
    await store.put(put({ kind: 'tool', id: 'b' }));
    await store.put(put({ kind: 'tool', id: 'a', scope: { kind: 'workspace', id: 'w1' } }));
    await store.put(put({ kind: 'agent', id: 'z' }));
    await store.put(put({ kind: 'agent.soul', id: 'y', owner: { kind: 'bundle.activation', id: 'act1' } }));
    const ids = (rs: { kind: string; id: string }[]) => rs.map((r) => `${r.kind}/${r.id}`);
    expect(ids(await store.list())).to.deep.equal(['agent/z', 'agent.soul/y', 'tool/a', 'tool/b']);
    expect(ids(await store.list({ kind: 'tool' }))).to.deep.equal(['tool/a', 'tool/b']);
    expect(ids(await store.list({ scope: { kind: 'workspace', id: 'w1' } }))).to.deep.equal(['tool/a']);
    expect(ids(await store.list({ scope: { kind: 'global' }, kind: 'tool' }))).to.deep.equal(['tool/b']);
    expect(ids(await store.list({ owner: { kind: 'bundle.activation', id: 'act1' } }))).to.deep.equal(['agent.soul/y']);
    expect(ids(await store.list({ source, limit: 2 }))).to.deep.equal(['agent/z', 'agent.soul/y']);
    await store.put(put({ kind: 'tool', id: 'a', scope: { kind: 'global' }, expectedVersion: 1 }));
    expect(ids(await store.list({ scope: { kind: 'workspace', id: 'w1' } }))).to.deep.equal([]);
    expect(ids(await store.list({ scope: { kind: 'global' }, kind: 'tool' }))).to.deep.equal(['tool/a', 'tool/b']);
  });

  it('refuses a workspace scope naming a missing workspace (422) and stores nothing', async () => {
    const err = await store.put(put({ scope: { kind: 'workspace', id: 'nope' } })).catch((e) => e);
    expect(err.status).to.equal(422);
    expect(await store.get('tool', 't1')).to.equal(undefined);
  });

  it('refuses a write to a child owned by a bundle.activation from anyone else (409 naming the owner)', async () => {
    const act = { kind: 'bundle.activation', id: 'act1' };
    await store.put(put({ owner: act }));
    const err = await store.put(put({ spec: { a: 9 }, expectedVersion: 1 })).catch((e) => e);
    expect(err.status).to.equal(409);
    expect(err.evidence.owner).to.deep.equal(act);
    expect((await store.get('tool', 't1'))?.spec).to.deep.equal({ a: 1 });
    const ok = await store.put(put({ owner: act, spec: { a: 2 }, expectedVersion: 1 }));
    expect(ok.record.version).to.equal(2);
  });

  it('lets exactly one of 200 concurrent writers at the same version win', async () => {
    await store.put(put());
    const results = await Promise.allSettled(Array.from({ length: 200 }, (_, i) => store.put(put({ spec: { a: 100 + i }, expectedVersion: 1 }))));
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(won).to.have.length(1);
    expect(lost.every((r) => r.reason.status === 409)).to.equal(true);
    const rec = await store.get('tool', 't1');
    expect(rec?.version).to.equal(2);
    expect(rec?.spec).to.deep.equal((won[0] as PromiseFulfilledResult<{ record: { spec: unknown } }>).value.record.spec);
    expect(await store.revision()).to.equal(2);
  });

  it('writes a status without bumping the version, and removes it for a missing record', async () => {
    await store.put(put());
    const status = { observed_version: 1, conditions: [], last_reconciled_at: 'now', last_error: '' };
    await store.writeStatus('tool', 't1', status, 1);
    expect(await store.getStatus('tool', 't1')).to.deep.equal(status);
    expect((await store.get('tool', 't1'))?.version).to.equal(1);
    expect(await store.observedRevision('tool', 't1')).to.equal(1);
    await store.writeStatus('tool', 'missing', status, 5);
    expect(await store.getStatus('tool', 'missing')).to.equal(undefined);
  });
});
