import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { RegistryCache } from '../../controllers/registry-controller.ts';
import { ReconcileWaiter } from '../../runtime/resources/reconcile-waiter.ts';
import { member } from '../../store/keys.ts';
import { RegistryWatch } from '../../store/registry-watch.ts';
import { ResourceStore } from '../../store/resource-store.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { eventually } from '../helpers/service.ts';

describe('RegistryWatch: cached registries and ?wait=true (real Redis)', () => {
  const server = new RedisServer();
  let redis: Redis;
  let store: ResourceStore;
  let waiter: ReconcileWaiter;

  before(async () => { await server.start(); });
  after(async () => { await server.destroy(); });
  beforeEach(async () => {
    await server.flush();
    redis = server.client();
    store = new ResourceStore({ redis });
    store.registryWatch = new RegistryWatch(redis, store.keys.registryChannel);
    await store.registryWatch.start();
    waiter = new ReconcileWaiter(store);
  });
  afterEach(async () => {
    await waiter.stop();
    store.registryWatch?.stop();
    redis.disconnect();
  });

  /** projectUnannounced writes what a reconcile writes, as if its change message were still on its way. */
  const projectUnannounced = async (id: string, revision: number) => {
    await redis.multi()
      .hset(store.keys.registry('tool'), id, JSON.stringify({ id, spec: { a: revision } }))
      .incr(store.keys.registryRevision('tool'))
      .hset(store.keys.observed, member('tool', id), revision)
      .exec();
  };

  it('a wait that saw its reconcile makes the next cached read include the projection, though its change message has not arrived', async () => {
    const cache = new RegistryCache(store);
    expect((await cache.read(['tool'])).entries.tool).to.deep.equal([]);
    await projectUnannounced('t1', 1);
    // the cache trusts what it read while no change was announced: this is what a wait must not leave behind
    expect((await cache.read(['tool'])).entries.tool).to.deep.equal([]);
    expect(await waiter.wait('tool', 't1', 1, 1000)).to.equal(true);
    expect((await cache.read(['tool'])).entries.tool.map((e) => e.id)).to.deep.equal(['t1']);
  });

  it('a wait that timed out leaves the cache trusted, and an announced change is read at once', async () => {
    const cache = new RegistryCache(store);
    await cache.read(['tool']);
    await projectUnannounced('t1', 1);
    expect(await waiter.wait('tool', 't1', 2, 100)).to.equal(false);
    expect((await cache.read(['tool'])).entries.tool).to.deep.equal([]);
    await redis.publish(store.keys.registryChannel, store.keys.registryRevision('tool'));
    await eventually(async () => expect((await cache.read(['tool'])).entries.tool.map((e) => e.id)).to.deep.equal(['t1']), 5000, 10);
  });
});
