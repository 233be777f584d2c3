import type { Socket } from 'node:net';
import { expect } from 'chai';
import type { Cluster, Redis } from 'ioredis';
import { isCluster, RedisConnections } from '../../store/connections.ts';
import { EventBus } from '../../store/event-bus.ts';
import { Keys } from '../../store/keys.ts';
import { atTurnEnd } from '../../store/turn.ts';
import { RedisCluster, testRedis } from '../helpers/redis-cluster.ts';
import { eventually } from '../helpers/service.ts';

describe('Redis connections: the commands of one event-loop turn leave in one write', function () {
  this.timeout(60_000);
  const redis = testRedis();
  let conn: Redis;

  before(async () => {
    await redis.start();
    const topology = redis instanceof RedisCluster
      ? { mode: 'cluster' as const, nodes: redis.ports.map((port) => ({ host: '127.0.0.1', port })) }
      : { mode: 'single' as const, url: redis.url };
    conn = new RedisConnections({ topology, minReplicasAck: 0, replicaAckTimeoutMs: 1000 }).open('coalesce', 'command');
    conn.on('error', () => undefined);
  });
  after(async () => {
    conn.disconnect();
    await redis.destroy();
  });

  // The sockets the connection writes on now: one Redis's, or each Cluster master's. Keys below share a hash tag, so
  // on a cluster they go to one master.
  const sockets = (): Socket[] => (isCluster(conn) ? (conn as unknown as Cluster).nodes('master').map((n) => n.stream) : [conn.stream]).filter(Boolean);
  const holding = () => sockets().filter((s) => s.writableCorked > 0 && s.writableLength > 0);

  it('holds a turn\'s commands on the socket until the turn ends, then answers each in order', async () => {
    await conn.set('{c}warm', '1');
    const writes = ['a', 'b', 'c'].map((v) => conn.set(`{c}k`, v).then(() => conn.get('{c}k')));
    const sets = [conn.set('{c}x', '1'), conn.incr('{c}n'), conn.incr('{c}n'), conn.incr('{c}n')];
    // Sent in this turn: still on the socket, nothing written yet.
    expect(holding(), 'a socket holding the turn\'s commands').to.have.length(1);
    expect(await Promise.all(sets)).to.deep.equal(['OK', 1, 2, 3]);
    expect(await Promise.all(writes)).to.deep.equal(['c', 'c', 'c']);
    // The turn ended: nothing is held, and a command of a later turn leaves too.
    expect(sockets().every((s) => s.writableCorked === 0 && s.writableLength === 0)).to.equal(true);
    expect(await conn.get('{c}x')).to.equal('1');
  });

  it("sends the bus's batched append of a turn with the turn's other writes, not a turn later", async () => {
    const bus = new EventBus(conn, new Keys());
    await bus.publish({ type: 'test.warm', source: 'test' });
    // The set corks the socket first; the publish's append is scheduled for the turn's end after that.
    const set = conn.set('{c}y', '1');
    const published = bus.publish({ type: 'test.turn', source: 'test' });
    const heldAfterTurn = await new Promise<number>((resolve) => setImmediate(() => resolve(sockets().filter((s) => s.writableCorked > 0 || s.writableLength > 0).length)));
    expect(heldAfterTurn, 'sockets still holding writes once the turn ended').to.equal(0);
    expect(await set).to.equal('OK');
    expect((await published).type).to.equal('test.turn');
  });

  it('coalesces on the socket of a reconnect too', async () => {
    const before = sockets();
    conn.disconnect(true);
    await eventually(async () => expect(await conn.ping()).to.equal('PONG'), 20_000, 100);
    await conn.set('{c}warm', '2');
    expect(sockets().some((s) => before.includes(s)), 'a socket of the connection before the reconnect').to.equal(false);
    const sets = [conn.incr('{c}m'), conn.incr('{c}m')];
    expect(holding()).to.have.length(1);
    expect(await Promise.all(sets)).to.deep.equal([1, 2]);
  });

  it('settles the held commands of a socket that closes before the turn ends (answered after the reconnect or rejected, never left waiting)', async () => {
    await conn.set('{c}warm', '3');
    const sent = [conn.incr('{c}d'), conn.incr('{c}d')].map((p) => p.then((v) => ({ v }), (err: Error) => ({ err: err.message })));
    const [held] = holding();
    expect(held, 'a socket holding the turn\'s commands').to.not.equal(undefined);
    held.destroy();
    const outcomes = await Promise.all(sent);
    for (const o of outcomes) expect(o).to.satisfy((x: { v?: number; err?: string }) => typeof x.v === 'number' || typeof x.err === 'string');
    // Whatever the socket carried, the connection works again and counts on from what Redis stored.
    await eventually(async () => expect(await conn.ping()).to.equal('PONG'), 20_000, 100);
    const stored = Number(await conn.get('{c}d') ?? 0);
    expect(await conn.incr('{c}d')).to.equal(stored + 1);
  });
});

describe('atTurnEnd: the deferred work of one event-loop turn, in one pass', () => {
  it('runs a turn\'s callbacks in order after its I/O, one added meanwhile in the same pass, and the rest after a failing one', async () => {
    const ran: string[] = [];
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => { uncaught.push(err); };
    // NOTE: mocha's own handler would fail the test on the callback's rethrown error; this test expects it.
    const mochaHandlers = process.listeners('uncaughtException');
    process.removeAllListeners('uncaughtException');
    process.on('uncaughtException', onUncaught);
    try {
      atTurnEnd(() => ran.push('a'));
      atTurnEnd(() => { ran.push('b'); atTurnEnd(() => ran.push('added')); throw new Error('b failed'); });
      atTurnEnd(() => ran.push('c'));
      // An immediate scheduled after the first callback runs after the whole pass, the added one included.
      await new Promise<void>((resolve) => setImmediate(() => { ran.push('next immediate'); resolve(); }));
      expect(ran).to.deep.equal(['a', 'b', 'c', 'added', 'next immediate']);
      expect(uncaught.map((e) => (e as Error).message)).to.deep.equal(['b failed']);
      // The next turn starts a new pass.
      await new Promise<void>((resolve) => atTurnEnd(resolve));
    } finally {
      process.removeListener('uncaughtException', onUncaught);
      for (const h of mochaHandlers) process.on('uncaughtException', h);
    }
  });
});
