import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../runtime/process/config.ts';
import { parseHostList } from '../../store/connections.ts';

describe('Store settings: one Redis, a Redis Cluster or a Sentinel set, validated at start-up', () => {
  const ok: { reason: string; given: Record<string, string>; want: Record<string, unknown> }[] = [
    { reason: 'nothing set is one Redis at the default URL', given: {}, want: { topology: { mode: 'single', url: 'redis://127.0.0.1:6379' }, minReplicasAck: 0, replicaAckTimeoutMs: 2000 } },
    { reason: 'seed nodes make a cluster', given: { REDIS_CLUSTER_NODES: '10.0.0.1:7000, 10.0.0.2:7001' },
      want: { topology: { mode: 'cluster', nodes: [{ host: '10.0.0.1', port: 7000 }, { host: '10.0.0.2', port: 7001 }] } } },
    { reason: 'the URL form carries credentials and TLS for every node', given: { REDIS_CLUSTER_NODES: 'rediss://app:s3cret@redis-0:6380,redis-1' },
      want: { topology: { mode: 'cluster', nodes: [{ host: 'redis-0', port: 6380 }, { host: 'redis-1', port: 6379 }] }, username: 'app', password: 's3cret', tls: true } },
    { reason: 'sentinels with a master name, and a replica acknowledgement', given: { REDIS_SENTINELS: 's0:26379,s1:26379,s2:26379', REDIS_SENTINEL_MASTER: 'svc', REDIS_MIN_REPLICAS_ACK: '1', REDIS_REPLICA_ACK_TIMEOUT: '500ms', REDIS_PASSWORD: 'pw' },
      want: { topology: { mode: 'sentinel', master: 'svc', sentinels: [{ host: 's0', port: 26379 }, { host: 's1', port: 26379 }, { host: 's2', port: 26379 }] }, minReplicasAck: 1, replicaAckTimeoutMs: 500, password: 'pw' } },
  ];
  for (const row of ok) {
    it(`accepts: ${row.reason}`, () => {
      expect(loadConfig(row.given).redis).to.deep.include(row.want);
    });
  }

  const bad: { reason: string; given: Record<string, string>; names: string[] }[] = [
    { reason: 'two ways to name the store at once', given: { REDIS_URL: 'redis://a:6379', REDIS_CLUSTER_NODES: 'b:7000' }, names: ['REDIS_URL, REDIS_CLUSTER_NODES'] },
    { reason: 'a sentinel set without its master name, and a master name alone', given: { REDIS_SENTINELS: 's0:26379' }, names: ['REDIS_SENTINEL_MASTER'] },
    { reason: 'a malformed seed list', given: { REDIS_CLUSTER_NODES: 'http://x:1,y:99999' }, names: ['REDIS_CLUSTER_NODES='] },
    { reason: 'a negative or huge replica count and a bad timeout', given: { REDIS_MIN_REPLICAS_ACK: '-1', REDIS_REPLICA_ACK_TIMEOUT: 'soon' }, names: ['REDIS_MIN_REPLICAS_ACK=', 'REDIS_REPLICA_ACK_TIMEOUT='] },
    { reason: 'REDIS_TLS that is not a boolean', given: { REDIS_CLUSTER_NODES: 'a:1', REDIS_TLS: 'yes' }, names: ['REDIS_TLS='] },
  ];
  for (const row of bad) {
    it(`refuses, naming the variable: ${row.reason}`, () => {
      let err: unknown;
      try { loadConfig(row.given); } catch (e) { err = e; }
      expect(err).to.be.instanceOf(ConfigError);
      for (const n of row.names) expect((err as Error).message).to.include(n);
    });
  }

  it('parseHostList refuses an empty list and a path after the host', () => {
    expect(parseHostList(' , ')).to.equal(undefined);
    expect(parseHostList('redis://a:1/2')).to.equal(undefined);
  });
});
