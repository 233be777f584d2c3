import type { Socket } from 'node:net';
import { expect } from 'chai';
import type { Cluster, Redis } from 'ioredis';
import { isCluster, RedisConnections } from '../../store/connections.ts';
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
