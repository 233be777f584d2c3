import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Memory } from '../../runtime/memory/index.ts';
import { MemoryService } from '../../runtime/memory/memory-service.ts';
import { EventBus } from '../../store/event-bus.ts';
import { Keys } from '../../store/keys.ts';
import { MemoryStore } from '../../store/memory-store.ts';
import { RedisServer } from '../helpers/redis-server.ts';

const PART = { scope: 'workspace', workspace_id: 'ws1' };
const W = (over: Record<string, unknown>) => ({ ...PART, type: 'project', ...over });

interface Step { reason: string; origin?: 'http' | 'extractor' | 'dreaming'; input: Record<string, unknown>; want: { op: string; rule: string } }

/** A sequence of writes into one partition that reaches every controller rule (each step sees the earlier ones). */
const STEPS: Step[] = [
  { reason: 'a fresh slot adds', input: W({ name: 'build tool', content: 'The project builds with make and node.' }), want: { op: 'add', rule: 'controller.fresh_slot' } },
  { reason: 'identical content (another name, case and spacing aside) is found by its body hash', input: W({ name: 'builder', content: 'the project  BUILDS with make and node.' }), want: { op: 'noop', rule: 'controller.exact_hash' } },
  { reason: 'the same filename is found by filename', input: W({ name: 'build tool', content: 'The project builds with bazel now.' }), want: { op: 'update', rule: 'controller.exact_slug_collision' } },
  { reason: 'an entity slot is found by its slot key', input: W({ name: 'ci one', entity: 'CI', attribute: 'runner', content: 'CI runs on Jenkins.' }), want: { op: 'add', rule: 'controller.fresh_slot' } },
  { reason: 'one slot match updates it', input: W({ name: 'ci two', entity: 'ci', attribute: 'Runner', content: 'CI runs on GitHub Actions.', metadata: { target_filename: 'runner_note' } }), want: { op: 'update', rule: 'controller.entity_slot_update' } },
  { reason: 'two staging memories', input: W({ name: 'staging a', content: 'Staging deploys are slow on Mondays.' }), want: { op: 'add', rule: 'controller.fresh_slot' } },
  { reason: 'a second one (one surface match is no ambiguity)', input: W({ name: 'staging b', content: 'Nightly deploys to staging use the canary.' }), want: { op: 'add', rule: 'controller.fresh_slot' } },
  { reason: 'surface matches (from the recall index) make an autonomous write ambiguous', origin: 'extractor', input: W({ name: 'staging c', content: 'Staging deploys run nightly from main.' }), want: { op: 'noop', rule: 'controller.ambiguous_targets' } },
  { reason: 'a direct write whose name is one of the matches\' is ambiguous too (names from the lookup index)', input: W({ name: 'Staging  A', content: 'Staging deploys run nightly from the release branch.', metadata: { target_filename: 'staging_note' } }), want: { op: 'noop', rule: 'controller.ambiguous_targets' } },
  { reason: 'a delete finds its target by filename', input: W({ name: 'build tool', content: '', metadata: { operation: 'delete' } }), want: { op: 'delete', rule: 'controller.delete_target' } },
  { reason: 'the deleted body is gone from the lookups', input: W({ name: 'build again', content: 'The project builds with bazel now.' }), want: { op: 'add', rule: 'controller.fresh_slot' } },
];

describe('Memory controller lookups: a write reads the partition\'s lookup index and the recall index, not the partition (real Redis)', function () {
  this.timeout(30_000);
  const redis = new RedisServer();
  let conn: Redis;
  const keys = new Keys('svc:');
  let memory: Memory;
  let scanning: MemoryService;
  let store: MemoryStore;

  before(async () => {
    await redis.start();
    conn = redis.client();
  });
  after(async () => {
    conn.disconnect();
    await redis.destroy();
  });
  beforeEach(async () => {
    await conn.flushall();
    memory = new Memory({ redis: conn, keys, bus: new EventBus(conn, keys), policy: { maxWritesPerMin: 10_000 } });
    await memory.start();
    store = memory.store;
    // the same rules on the same Redis, reading the whole partition (what a process without a recall index does)
    scanning = new MemoryService({ store: new MemoryStore(conn, keys), policy: { maxWritesPerMin: 10_000 } });
  });
  afterEach(async () => memory.stop());

  it('decides every rule as a read of the whole partition would, without reading the partition', async () => {
    let scans = 0;
    const read = store.partitionMemories.bind(store);
    store.partitionMemories = async (p: string) => { scans++; return read(p); };
    for (const s of STEPS) {
      const origin = s.origin ?? 'http';
      const expected = await scanning.write(s.input, { origin, dryRun: true });
      const before = scans;
      const got = await memory.write(s.input, { origin });
      expect(scans, s.reason).to.equal(before);
      expect([got.decision.op, got.decision.rule_trace[0].name], s.reason).to.deep.equal([s.want.op, s.want.rule]);
      expect({ op: got.decision.op, rules: got.decision.rule_trace, file: got.decision.target_filename, targets: got.decision.targets }, s.reason)
        .to.deep.equal({ op: expected.decision.op, rules: expected.decision.rule_trace, file: expected.decision.target_filename, targets: expected.decision.targets });
    }
  });

  it('keeps the lookups right through a revert: the restored body is found again, the replaced one is not', async () => {
    const a = await memory.write(W({ name: 'cache', content: 'The cache is Redis seven.' }), { origin: 'http' });
    const u = await memory.write(W({ name: 'cache', content: 'The cache is Valkey eight.' }), { origin: 'http' });
    expect(u.decision.op).to.equal('update');
    await memory.service.revert(u.decision.id, {});
    const again = await memory.write(W({ name: 'other', content: 'the cache is redis seven.' }), { origin: 'http' });
    expect([again.decision.op, again.decision.rule_trace[0].name, again.decision.target_filename]).to.deep.equal(['noop', 'controller.exact_hash', a.decision.target_filename]);
    const gone = await memory.write(W({ name: 'other', content: 'The cache is Valkey eight.' }), { origin: 'http', dryRun: true });
    expect(gone.decision.op).to.equal('add');
  });

  it('builds the lookups of a partition written before they were kept, once, then decides by them', async () => {
    for (const [name, content, injection] of [['one', 'Alpha bravo charlie.', true], ['two', 'Delta echo foxtrot.', false]] as const) {
      await memory.write(W({ name, content, injection }), { origin: 'http' });
    }
    // as an older version left it: memories without lookup index, injection set or built mark
    await conn.del('svc:{mem}:x:w:ws1', 'svc:{mem}:i:w:ws1', 'svc:{mem}:xparts');
    const noop = await memory.write(W({ name: 'three', content: 'alpha BRAVO charlie.' }), { origin: 'http' });
    expect([noop.decision.op, noop.decision.target_filename]).to.deep.equal(['noop', 'project_one.md']);
    expect(await conn.sismember('svc:{mem}:xparts', 'w:ws1')).to.equal(1);
    expect(await conn.smembers('svc:{mem}:i:w:ws1')).to.deep.equal(['project_one.md']);
    expect((await store.injectionMemories(['w:ws1'])).memories.map((m) => m.name)).to.deep.equal(['one']);
  });

  it('refuses to apply into a partition whose lookups are not built, changing nothing', async () => {
    await memory.write(W({ name: 'one', content: 'Alpha bravo charlie.' }), { origin: 'http' });
    await conn.srem('svc:{mem}:xparts', 'w:ws1');
    const before = await conn.hgetall('svc:{mem}:m:w:ws1');
    const probe = await scanning.write(W({ name: 'two', content: 'Kilo lima mike.' }), { origin: 'http', dryRun: true });
    const res = await store.apply({ partition: 'w:ws1', filename: 'project_two.md', expected: '', change: 'none', decision: { ...probe.decision, prior: null, post: null } as never, idempotencyKey: '', reverts: '' });
    expect(res).to.deep.equal({ ok: false, reason: 'unindexed' });
    expect(await conn.hgetall('svc:{mem}:m:w:ws1')).to.deep.equal(before);
  });
});
