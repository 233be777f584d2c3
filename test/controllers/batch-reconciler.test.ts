import { expect } from 'chai';
import pino from 'pino';
import type { Redis } from 'ioredis';
import { BatchReconciler } from '../../controllers/batch-reconciler.ts';
import { RegistryController } from '../../controllers/registry-controller.ts';
import type { ResourceKey } from '../../controllers/types.ts';
import { Metrics } from '../../runtime/process/metrics.ts';
import type { ModelCatalog } from '../../runtime/models/catalog.ts';
import { ResourceStore } from '../../store/resource-store.ts';
import { eventually } from '../helpers/service.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { RedisServer } from '../helpers/redis-server.ts';

const body = (prompt: string, expected_version = 0) => ({ scope: { kind: 'global' }, spec: { name: 'helper', prompt }, expected_version });

describe('Batch reconciles of projection-only kinds (relay pages, real Redis)', () => {
  const f = new ServiceFixture({ workspace: false }).install();

  it('projects a burst of writes and writes each status without a BullMQ job, leaving no lease behind', async () => {
    const ids = Array.from({ length: 60 }, (_, i) => `b${i}`);
    await Promise.all(ids.map((id) => f.api.put(`/api/resources/agent/${id}`, body(`p-${id}`))));
    const admin = f.redis.client();
    // NOTE: the second burst waits for the first's statuses: a page holding v1 and v2 of a key reconciles it once.
    const observed = async (id: string) => JSON.parse((await admin.get(`svc:{r}:status:agent:${id}`)) ?? '{}').observed_version;
    await eventually(async () => expect(await Promise.all(ids.map(observed))).to.deep.equal(ids.map(() => 1)), 20_000, 100);
    await Promise.all(ids.slice(0, 20).map((id) => f.api.put(`/api/resources/agent/${id}`, body(`p2-${id}`, 1))));
    await eventually(async () => {
      const registry = await admin.hgetall('svc:{r}:registry:agent');
      for (const [i, id] of ids.entries()) {
        const entry = JSON.parse(registry[id]);
        expect(entry.version, id).to.equal(i < 20 ? 2 : 1);
        expect(entry.spec.prompt, id).to.equal(i < 20 ? `p2-${id}` : `p-${id}`);
        const status = JSON.parse((await admin.get(`svc:{r}:status:agent:${id}`))!);
        expect(status.observed_version, id).to.equal(i < 20 ? 2 : 1);
        expect(status.conditions.find((c: { type: string }) => c.type === 'Ready').status).to.equal('True');
      }
    }, 20_000, 100);
    // No agent reconcile went through the queue (the resync at start had no agent keys), none overlapped.
    expect(await admin.get('svc:{q:reconcile-agent}:reconcile-agent:id')).to.equal(null);
    expect(await admin.keys('svc:{r}:lock:reconciling:*')).to.deep.equal([]);
    expect(await admin.get('svc:{r}:lock:reconcile-overlaps')).to.equal(null);
    expect((await f.api.get("/metrics")).body).to.match(/svc_reconciles_total\{kind="agent",outcome="ready"\} 80\n/);
    admin.disconnect();
  });

  it('answers ?wait=true from the batch announcement, and a delete removes the entry and the status', async () => {
    const put = await f.api.put('/api/resources/agent/w1?wait=true', body('hi'));
    expect(put.status).to.equal(201);
    expect((await f.api.get('/api/resources/agent/w1/status')).body.status.observed_version).to.equal(1);
    const del = await f.api.delete('/api/resources/agent/w1', { expected_version: 1 });
    expect(del.status).to.equal(204);
    const admin = f.redis.client();
    await eventually(async () => {
      expect(await admin.hget('svc:{r}:registry:agent', 'w1')).to.equal(null);
      expect(await admin.get('svc:{r}:status:agent:w1')).to.equal(null);
    }, 10_000, 100);
    admin.disconnect();
  });

  it('reconciles again after Redis lost its data (the relay makes its group again): a ?wait=true write answers done', async function () {
    // NOTE: one Redis: a cluster client's FLUSHALL empties one node only, not a whole lost store.
    if (process.env.TEST_REDIS === 'cluster') this.skip();
    expect((await f.api.put('/api/resources/agent/before?wait=true', body('a'))).headers.get('x-svc-reconcile')).to.equal('done');
    const admin = f.redis.client();
    try {
      // NOTE: as a Redis restarted without persistence: the change log and every reader's group are gone.
      await admin.flushall();
      // NOTE: without the group made again the wait ends only at its time limit, answering pending.
      const put = await f.api.put('/api/resources/agent/after?wait=true&timeout_ms=20000', body('b'));
      expect(put.status).to.equal(201);
      expect(put.headers.get('x-svc-reconcile')).to.equal('done');
      expect(JSON.parse((await admin.get('svc:{r}:status:agent:after'))!).observed_version).to.equal(1);
      expect(await admin.hget('svc:{r}:registry:agent', 'after')).to.not.equal(null);
      expect(await admin.hget('svc:{r}:registry:agent', 'before'), 'a record lost with the data').to.equal(null);
    } finally {
      admin.disconnect();
    }
  });

  it('hands a key whose lease another reconcile holds to its queue, which reconciles it after the lease ends', async () => {
    const admin = f.redis.client();
    await admin.set('svc:{r}:lock:reconciling:agent:held', 'another-worker', 'PX', 60_000);
    await f.api.put('/api/resources/agent/held', body('a'));
    await f.api.put('/api/resources/agent/free', body('b'));
    await eventually(async () => expect(await admin.hget('svc:{r}:registry:agent', 'free')).to.not.equal(null), 10_000, 100);
    await eventually(async () => expect(Number(await admin.get('svc:{q:reconcile-agent}:reconcile-agent:id'))).to.be.greaterThan(0), 10_000, 100);
    expect(await admin.hget('svc:{r}:registry:agent', 'held')).to.equal(null);
    expect(await admin.get('svc:{r}:status:agent:held')).to.equal(null);
    expect(await admin.get('svc:{r}:lock:reconciling:agent:held')).to.equal('another-worker');
    await admin.del('svc:{r}:lock:reconciling:agent:held');
    await eventually(async () => expect(JSON.parse((await admin.get('svc:{r}:status:agent:held'))!).observed_version).to.equal(1), 10_000, 100);
    expect(await admin.get('svc:{r}:lock:reconcile-overlaps')).to.equal(null);
    admin.disconnect();
  });
});

describe('One batch reconcile page (BatchReconciler on a real Redis)', () => {
  const redis = new RedisServer();
  let conn: Redis;
  let store: ResourceStore;
  const ids = Array.from({ length: 40 }, (_, i) => `page${i}`);
  const keys: ResourceKey[] = ids.map((id) => ({ kind: 'agent', id }));

  before(async () => {
    await redis.start();
    conn = redis.client();
    store = new ResourceStore({ redis: conn });
  });
  after(async () => {
    conn.disconnect();
    await redis.destroy();
  });
  beforeEach(async () => {
    await conn.flushall();
    await Promise.all(ids.map((id) => store.put({
      kind: 'agent', id, scope: { kind: 'global' }, owner: { kind: 'daemon', id: 'daemon-control' }, source: { kind: 'daemon', id: 'system' },
      spec: { name: id, prompt: 'p', model: 'm' }, expectedVersion: 0,
    })));
  });

  /** page reconciles the page's keys with an agent controller whose model check is `check`; it records what ran. */
  async function page(check: (spec: { name: string }) => Promise<void>) {
    const seen = { inFlight: 0, most: 0, hooks: [] as ResourceKey[][] };
    const controller = new RegistryController({
      kind: 'agent', store,
      warnings: async (spec) => {
        seen.most = Math.max(seen.most, ++seen.inFlight);
        try {
          await check(spec as { name: string });
        } finally {
          seen.inFlight--;
        }
        return [];
      },
      onChange: async (changed) => { seen.hooks.push(changed); },
    });
    const batch = new BatchReconciler({ store, controllers: [controller], metrics: new Metrics(), logger: pino({ level: 'silent' }) });
    return { ...seen, rest: await batch.reconcile(keys), get most() { return seen.most; } };
  }

  const sorted = (ks: ResourceKey[]) => ks.map((k) => k.id).sort();

  it('plans the keys of a page together (every model check in flight at once) and runs the change hook once for the page', async () => {
    // NOTE: each check yields to the event loop once, as a check that reads Redis does; planned one after another,
    // no two would be in flight.
    const res = await page(() => new Promise((r) => setImmediate(r)));
    expect(res.most).to.equal(ids.length);
    expect(res.rest).to.deep.equal([]);
    expect(res.hooks.map(sorted)).to.deep.equal([[...ids].sort()]);
    for (const id of ids) {
      expect(JSON.parse((await conn.get(`svc:{r}:status:agent:${id}`))!).observed_version, id).to.equal(1);
      expect(await store.observedRevision('agent', id), id).to.be.greaterThan(0);
    }
    expect(await conn.hlen('svc:{r}:registry:agent')).to.equal(ids.length);
    expect(await conn.keys('svc:{r}:lock:reconciling:*')).to.deep.equal([]);
  });

  it('hands back only the key whose plan threw, with no status, no entry and no lease of it left', async () => {
    const res = await page(async (spec) => {
      await new Promise((r) => setImmediate(r));
      if (spec.name === 'page7') throw new Error('catalog unreachable');
    });
    expect(res.rest).to.deep.equal([{ kind: 'agent', id: 'page7' }]);
    expect(res.hooks.map(sorted)).to.deep.equal([ids.filter((id) => id !== 'page7').sort()]);
    expect(await conn.get('svc:{r}:status:agent:page7')).to.equal(null);
    expect(await conn.hget('svc:{r}:registry:agent', 'page7')).to.equal(null);
    expect(await store.observedRevision('agent', 'page7')).to.equal(0);
    expect(JSON.parse((await conn.get('svc:{r}:status:agent:page8'))!).observed_version).to.equal(1);
    expect(await conn.keys('svc:{r}:lock:reconciling:*')).to.deep.equal([]);
  });
});

describe("The model check of a reconcile page (the service's model catalog, no settings file)", () => {
  const f = new ServiceFixture({ workspace: false }).install();

  it('reads the stored catalog once for checks made together and none again while nothing changed', async () => {
    const models: ModelCatalog = f.service.models!;
    // NOTE: the catalog's own store, to count its reads (the catalog keeps it private).
    const stored = (models as unknown as { o: { store: { revisionKey: string; snapshot: () => Promise<unknown> } } }).o.store;
    const snapshot = stored.snapshot.bind(stored);
    let reads = 0;
    stored.snapshot = () => { reads++; return snapshot(); };
    const admin = f.redis.client();
    const minute = () => Math.floor(Date.now() / 60_000);
    try {
      // NOTE: the catalog also rebuilds when the minute turns (rows age into stale): a try across one is made again.
      for (let attempt = 0; ; attempt++) {
        const at = minute();
        // NOTE: a stored catalog change (as a refresh makes), so the checks below find no build to reuse.
        await admin.incr(stored.revisionKey);
        reads = 0;
        const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => models.knows('', `model-${i}`)));
        const together = reads;
        expect(await models.knows('', 'one-more')).to.equal(false);
        if (minute() !== at && attempt === 0) continue;
        expect(answers).to.deep.equal(answers.map(() => false));
        expect(together).to.equal(1);
        expect(reads).to.equal(1);
        break;
      }
    } finally {
      stored.snapshot = snapshot;
      admin.disconnect();
    }
  });
});
