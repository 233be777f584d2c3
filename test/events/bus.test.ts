import { expect } from 'chai';
import pino from 'pino';
import { Redis } from 'ioredis';
import { EventBus, type BusEvent } from '../../store/event-bus.ts';
import { Keys } from '../../store/keys.ts';
import { StreamGroupReader } from '../../store/stream-group.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { eventually } from '../helpers/service.ts';

const quiet = pino({ level: 'silent' });

describe('event bus (real Redis)', function () {
  this.timeout(60_000);
  const server = new RedisServer();
  let redis: Redis;
  before(() => server.start());
  after(() => server.destroy());
  beforeEach(async () => {
    await server.flush();
    redis = new Redis(server.url);
  });
  afterEach(() => redis.quit());

  it('fills in each published event and keeps publication order; range resumes after an id', async () => {
    const bus = new EventBus(redis, new Keys());
    const [a, b] = await bus.publishMany([{ type: 'x.one', source: 't', workspace_id: 'ws-1' }, { type: 'x.two', source: 't' }]);
    expect(a).to.include({ type: 'x.one', scope: 'workspace', workspace_id: 'ws-1', outcome: 'info', session_id: '' });
    expect(b).to.include({ type: 'x.two', scope: 'global', workspace_id: '' });
    expect((await bus.latest(10)).map((e) => e.type)).to.deep.equal(['x.one', 'x.two']);
    expect((await bus.range(a.id, 10)).map((e) => e.id)).to.deep.equal([b.id]);
  });

  it('sends the publishMany calls of one turn as one script call: each call gets its own ids, its events adjacent, in call order', async () => {
    const bus = new EventBus(redis, new Keys());
    const scriptCalls = async () => Number(/cmdstat_evalsha:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);
    await bus.publish({ type: 'x.warm', source: 't' });
    const before = await scriptCalls();
    const [a, b, c] = await Promise.all([
      bus.publishMany([{ type: 'a.1', source: 't' }, { type: 'a.2', source: 't' }]),
      bus.publish({ type: 'b.1', source: 't' }),
      bus.publishMany([{ type: 'c.1', source: 't' }, { type: 'c.2', source: 't' }, { type: 'c.3', source: 't' }]),
    ]);
    expect(await scriptCalls() - before, 'one append for the three calls').to.equal(1);
    expect(a.map((e) => e.type)).to.deep.equal(['a.1', 'a.2']);
    expect(b.type).to.equal('b.1');
    expect(c.map((e) => e.type)).to.deep.equal(['c.1', 'c.2', 'c.3']);
    const stored = (await bus.latest(6)).map((e) => `${e.id} ${e.type}`);
    expect(stored).to.deep.equal([...a, b, ...c].map((e) => `${e.id} ${e.type}`));
    // Calls in separate turns are separate appends.
    await bus.publish({ type: 'd.1', source: 't' });
    await bus.publish({ type: 'd.2', source: 't' });
    expect(await scriptCalls() - before).to.equal(3);
  });

  it('a failed append fails every call it carried and stores none of their events', async () => {
    const bus = new EventBus(redis, new Keys());
    await redis.set(bus.key, 'not a stream');
    const calls = await Promise.allSettled([bus.publish({ type: 'a.1', source: 't' }), bus.publishMany([{ type: 'b.1', source: 't' }, { type: 'b.2', source: 't' }])]);
    expect(calls.map((r) => r.status)).to.deep.equal(['rejected', 'rejected']);
    expect(String((calls[0] as PromiseRejectedResult).reason)).to.include('WRONGTYPE');
    expect(await redis.get(bus.key)).to.equal('not a stream');
    // The next turn's calls are a new append.
    await redis.del(bus.key);
    expect((await bus.publish({ type: 'c.1', source: 't' })).type).to.equal('c.1');
    expect((await bus.latest(10)).map((e) => e.type)).to.deep.equal(['c.1']);
  });

  it('a reader group resumes where it stopped: an event published while no reader ran is handed over once, none twice', async () => {
    const bus = new EventBus(redis, new Keys());
    const seen: BusEvent[] = [];
    const reader = () => bus.reader('test', quiet, async (evs) => { seen.push(...evs); });
    const r1 = reader();
    await r1.start();
    await bus.publish({ type: 'x.first', source: 't' });
    await eventually(async () => expect(seen.map((e) => e.type)).to.deep.equal(['x.first']));
    await r1.stop();
    await bus.publish({ type: 'x.while_down', source: 't' });
    const r2 = reader();
    await r2.start();
    await eventually(async () => expect(seen.map((e) => e.type)).to.deep.equal(['x.first', 'x.while_down']));
    await r2.stop();
  });

  it('a reader with a type filter gets only those events, decodes no other, and still acknowledges every page', async () => {
    const bus = new EventBus(redis, new Keys());
    const seen: string[] = [];
    let calls = 0;
    const r = bus.reader('typed', quiet, async (evs) => { calls++; seen.push(...evs.map((e) => e.type)); }, () => (t) => t.startsWith('x.wanted'));
    await r.start();
    await bus.publish({ type: 'x.other', source: 't' });
    // an entry not written by publishMany (its type is not first) is decoded to learn its type
    await redis.xadd(bus.key, '*', 'e', JSON.stringify({ source: 't', type: 'x.wanted.raw', data: {} }));
    await bus.publishMany([{ type: 'x.wanted', source: 't', data: { type: 'x.other' } }, { type: 'x.other', source: 't' }]);
    const group = async () => {
      const row = ((await redis.xinfo('GROUPS', bus.key)) as unknown[][]).find((g) => g[1] === 'typed')!;
      return Object.fromEntries(Array.from({ length: row.length / 2 }, (_, i) => [row[2 * i], row[2 * i + 1]]));
    };
    await eventually(async () => expect(seen).to.deep.equal(['x.wanted.raw', 'x.wanted']));
    await eventually(async () => expect(await group()).to.include({ pending: 0, 'entries-read': 4 }));
    const before = calls;
    const other = await bus.publish({ type: 'x.other', source: 't' });
    await eventually(async () => expect(await group()).to.include({ pending: 0, 'last-delivered-id': other.id }));
    expect(calls, 'a page without a wanted event is not handed over').to.equal(before);
    expect(seen).to.have.length(2);
    await r.stop();
    // readAfter: only the wanted events, and the id to read after next (the page's last entry, wanted or not)
    const conn = new Redis(server.url);
    const page = await bus.readAfter(conn, '0-0', 100, 500, (t) => t === 'x.wanted');
    const all = await bus.latest(10);
    expect(page.events.map((e) => e.type)).to.deep.equal(['x.wanted']);
    expect(page.last).to.equal(all.at(-1)!.id);
    expect(await bus.readAfter(conn, page.last, 10)).to.deep.equal({ events: [], last: page.last });
    conn.disconnect();
  });

  it('acknowledges a handled page with its next read, and what it handled last when it stops', async () => {
    const bus = new EventBus(redis, new Keys());
    const handled: string[] = [];
    const r = bus.reader('acks', quiet, async (events) => { handled.push(...events.map((e) => e.id)); });
    await r.start();
    const first = await bus.publish({ type: 'x.one', source: 't' });
    await eventually(async () => expect(handled).to.deep.equal([first.id]), 5000, 1);
    // NOTE: the reader rests GATHER_MS after a page; it is stopped within that rest, before its next read.
    await r.stop();
    expect((await redis.xpending(bus.key, 'acks'))[0], 'pending after the stop').to.equal(0);
    const r2 = bus.reader('acks', quiet, async (events) => { handled.push(...events.map((e) => e.id)); });
    await r2.start();
    const second = await bus.publish({ type: 'x.two', source: 't' });
    await eventually(async () => expect(handled).to.deep.equal([first.id, second.id]), 5000);
    const third = await bus.publish({ type: 'x.three', source: 't' });
    await eventually(async () => expect(handled).to.deep.equal([first.id, second.id, third.id]), 5000);
    // the last page is acknowledged by the reader's next read, while it runs
    await eventually(async () => expect((await redis.xpending(bus.key, 'acks'))[0]).to.equal(0), 5000);
    await r2.stop();
  });

  it('a page whose handler fails is not acknowledged and is handed over again', async function () {
    // Redelivery waits for the entry to idle CLAIM_IDLE_MS (10 s) and the next claim round (every 2 s).
    this.timeout(30_000);
    const bus = new EventBus(redis, new Keys());
    const failures: string[] = [];
    const logger = pino({ level: 'error' }, { write: (line: string) => { failures.push(JSON.parse(line).msg); } });
    let calls = 0;
    const r = bus.reader('flaky', logger, async () => { calls++; if (calls === 1) throw new Error('boom'); });
    await r.start();
    await bus.publish({ type: 'x.retry', source: 't' });
    // NOTE: wait for the failure itself: XREADGROUP marks the entry pending before the handler runs.
    await eventually(async () => expect(failures).to.deep.equal(['stream reader failed; retrying']), 5000);
    expect(calls).to.equal(1);
    expect((await redis.xpending(bus.key, 'flaky'))[0]).to.equal(1);
    await eventually(async () => expect(calls).to.equal(2), 20_000);
    await eventually(async () => expect((await redis.xpending(bus.key, 'flaky'))[0]).to.equal(0), 5000);
    expect(calls).to.equal(2);
    await r.stop();
  });

  it('after Redis drops the connection, hands the pages read just before the drop over again, and no older page', async () => {
    // NOTE: a handler's effect (here a marker key) written just before the drop is what a failover or a restart may
    // lose while the entry's acknowledgement lands; the test deletes the markers to stand for that loss.
    const handled: string[] = [];
    const r = new StreamGroupReader({
      redis, stream: 'st', group: 'g', logger: quiet, replayMs: 1500,
      handle: async (entries) => { for (const [id] of entries) { handled.push(id); await redis.set(`{done}:${id}`, '1'); } },
    });
    await r.start();
    const old = (await redis.xadd('st', '*', 'n', 'old'))!;
    await eventually(async () => expect(handled).to.deep.equal([old]));
    await new Promise((ok) => setTimeout(ok, 2000));
    const recent = (await redis.xadd('st', '*', 'n', 'recent'))!;
    await eventually(async () => expect(handled).to.deep.equal([old, recent]));
    await eventually(async () => expect((await redis.xpending('st', 'g'))[0]).to.equal(0));
    await redis.del(`{done}:${old}`, `{done}:${recent}`);
    await server.restart();
    await eventually(async () => expect(await redis.get(`{done}:${recent}`)).to.equal('1'), 20_000);
    expect(handled).to.deep.equal([old, recent, recent]);
    expect(await redis.get(`{done}:${old}`)).to.equal(null);
    // Only once: a later drop with nothing read since hands nothing over.
    await server.restart();
    await eventually(async () => expect(await redis.ping()).to.equal('PONG'), 20_000);
    const after = (await redis.xadd('st', '*', 'n', 'after'))!;
    await eventually(async () => expect(handled).to.deep.equal([old, recent, recent, after]), 20_000);
    await r.stop();
  });
});

describe('event bus: what the service publishes (real service, real agents)', function () {
  this.timeout(120_000);
  const f = new ServiceFixture().install();
  const types = async () => (await f.service.bus!.latest(200)).map((e) => e.type);

  it('publishes resource changes and a session\'s lifecycle, turns and stop, with the session\'s workspace and agent', async () => {
    const put = await f.api.put('/api/resources/agent/bus-agent', { scope: { kind: 'global' }, spec: { name: 'bus-agent', prompt: 'p' }, expected_version: 0 });
    expect(put.status, JSON.stringify(put.body)).to.equal(201);
    await eventually(async () => expect(await types()).to.include('resource.applied'));
    const s = (await f.api.post('/api/sessions', { workspace: f.ws.id })).body.session;
    const prompt = await fetch(`${f.service.url}/api/workspaces/${f.ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'hello' }) });
    await prompt.text();
    expect((await f.api.post(`/api/sessions/${s.id}/stop`, {})).status).to.be.oneOf([200, 202, 204]);
    await eventually(async () => expect(await types()).to.include('session.post_stop'));
    const mine = (await f.service.bus!.latest(200)).filter((e) => e.session_id === s.id);
    // The gated points (session.pre_*, input.pre_submit) are published by the hook gate before they act.
    expect(mine.map((e) => e.type)).to.deep.equal(['session.pre_create', 'session.post_create', 'input.pre_submit', 'turn.start', 'turn.end', 'session.pre_stop', 'session.post_stop']);
    for (const e of mine) expect(e).to.include({ workspace_id: f.ws.id, agent_name: s.agent_name, scope: 'workspace', source: 'sessions' });
    expect(mine[4].outcome).to.equal('success');
    const applied = (await f.service.bus!.latest(200)).find((e) => e.type === 'resource.applied')!;
    expect(applied.data).to.include({ kind: 'agent', id: 'bus-agent', version: 1 });
  });
});
