import { Cluster, Redis, type ClusterNode, type RedisOptions } from 'ioredis';

/**
 * RedisTopology says which Redis engine every process talks to: one Redis (`REDIS_URL`), a Redis Cluster
 * (`REDIS_CLUSTER_NODES`: seeds) or a Sentinel-managed master (`REDIS_SENTINELS` + `REDIS_SENTINEL_MASTER`).
 */
export type RedisTopology =
  | { mode: 'single'; url: string }
  | { mode: 'cluster'; nodes: { host: string; port: number }[] }
  | { mode: 'sentinel'; sentinels: { host: string; port: number }[]; master: string };

/** RedisSettings is the validated store configuration (runtime/process/config.ts reads it from the environment). */
export interface RedisSettings {
  topology: RedisTopology;
  /** Credentials and TLS for the data nodes (cluster and sentinel modes; one Redis takes them from its URL). */
  username?: string;
  password?: string;
  tls?: boolean;
  /** The sentinels' own password (REDIS_SENTINEL_PASSWORD), when they require one. */
  sentinelPassword?: string;
  /** Replicas that must confirm each acknowledged write (REDIS_MIN_REPLICAS_ACK; 0: the master's word is enough). */
  minReplicasAck: number;
  /** How long a write waits for those replicas (REDIS_REPLICA_ACK_TIMEOUT), in ms. */
  replicaAckTimeoutMs: number;
}

/** ConnectionRole is what a connection is for; it picks the retry behaviour. */
export type ConnectionRole =
  /** Commands of requests: a few retries while reconnecting, then the request fails (503), never hangs. */
  | 'command'
  /** BullMQ queues and workers: BullMQ requires `maxRetriesPerRequest: null` (its blocking calls wait forever). */
  | 'queue';

/**
 * parseHostList reads `host:port,host:port` or the URL form `redis://[user:pass@]host:port,...` (`rediss://` for
 * TLS; credentials and TLS of the first URL apply to every node); it returns undefined when an entry is malformed.
 */
export function parseHostList(raw: string): { hosts: { host: string; port: number }[]; username?: string; password?: string; tls?: boolean } | undefined {
  const hosts: { host: string; port: number }[] = [];
  let username: string | undefined;
  let password: string | undefined;
  let tls: boolean | undefined;
  for (const entry of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
    const withScheme = /^[a-z]+:\/\//.test(entry) ? entry : `redis://${entry}`;
    let u: URL;
    try { u = new URL(withScheme); } catch { return undefined; }
    if (!['redis:', 'rediss:'].includes(u.protocol) || !u.hostname || (u.pathname && u.pathname !== '/')) return undefined;
    const port = Number(u.port || '6379');
    if (!Number.isInteger(port) || port < 1 || port > 65535) return undefined;
    if (hosts.length === 0) {
      if (u.username) username = decodeURIComponent(u.username);
      if (u.password) password = decodeURIComponent(u.password);
      if (u.protocol === 'rediss:') tls = true;
    }
    hosts.push({ host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port });
  }
  return hosts.length ? { hosts, username, password, tls } : undefined;
}

/**
 * RedisConnections opens every ioredis connection a process uses, for the configured topology, so no other code
 * chooses between `Redis`, `Cluster` and Sentinel. NOTE: a `Cluster` is typed as `Redis` for its callers: both
 * carry the same command methods (ioredis' Commander), which is all the stores use; what differs (duplicate,
 * WAIT's target node) is handled here.
 */
export class RedisConnections {
  constructor(readonly settings: RedisSettings) {}

  get mode(): RedisTopology['mode'] { return this.settings.topology.mode; }

  /** open creates a connection named `name` (CLIENT SETNAME) for `role`; `lazy` defers connecting to `connect()`. */
  open(name: string, role: ConnectionRole, lazy = false): Redis {
    const t = this.settings.topology;
    const base: RedisOptions = {
      connectionName: name, lazyConnect: lazy,
      maxRetriesPerRequest: role === 'queue' ? null : 3,
      ...(this.settings.username ? { username: this.settings.username } : {}),
      ...(this.settings.password ? { password: this.settings.password } : {}),
      ...(this.settings.tls ? { tls: {} } : {}),
    };
    if (t.mode === 'single') return new Redis(t.url, { connectionName: name, lazyConnect: lazy, maxRetriesPerRequest: base.maxRetriesPerRequest });
    if (t.mode === 'sentinel') {
      return new Redis({
        ...base, sentinels: t.sentinels, name: t.master, role: 'master',
        ...(this.settings.sentinelPassword ? { sentinelPassword: this.settings.sentinelPassword } : {}),
        ...(this.settings.tls ? { enableTLSForSentinelMode: true } : {}),
        // NOTE: the sentinels announce a failover (+switch-master) at once; without this a connection learns of it
        // only when its socket to the dead master fails, which after a SIGKILL can take a TCP timeout.
        failoverDetector: true,
        // NOTE: a demoted master answers READONLY; reconnecting asks the sentinels for the new master.
        reconnectOnError: (err) => (/^READONLY/.test(err.message) ? 2 : false),
      });
    }
    return closable(new Cluster(t.nodes as ClusterNode[], {
      lazyConnect: lazy,
      redisOptions: base,
      // NOTE: BullMQ's blocking commands and a request's retries both follow MOVED/ASK after a resharding or a
      // failover; reads go to masters so a write is always read back (replicas lag).
      scaleReads: 'master',
      maxRedirections: 16,
      retryDelayOnFailover: 200,
      retryDelayOnClusterDown: 300,
      retryDelayOnTryAgain: 200,
      slotsRefreshTimeout: 2000,
      enableOfflineQueue: true,
    })) as unknown as Redis;
  }

  /**
   * waitForReplicas blocks until `minReplicasAck` replicas confirmed every write this process sent on `redis`
   * so far (WAIT), on every master it may have written to; it returns the fewest replicas any master reached, or
   * undefined when no acknowledgement is asked for.
   */
  async waitForReplicas(redis: Redis): Promise<{ acked: number; wanted: number } | undefined> {
    const wanted = this.settings.minReplicasAck;
    if (!wanted) return undefined;
    const timeout = this.settings.replicaAckTimeoutMs;
    // NOTE: WAIT counts the writes of the connection it is sent on; a Cluster keeps one connection per master, so
    // each master is asked about what this process wrote there (a master it did not write to answers at once).
    const targets: Redis[] = isCluster(redis) ? (redis as unknown as Cluster).nodes('master') : [redis];
    const counts = await Promise.all(targets.map((node) => node.call('WAIT', wanted, timeout) as Promise<number>));
    return { acked: Math.min(...counts), wanted };
  }
}

/**
 * closable makes a closed Cluster refuse commands, as one Redis connection does ("Connection is closed."). NOTE:
 * ioredis' Cluster stays in status `close` after `disconnect()` or `quit()` and queues later commands offline
 * for ever, so a reader stopped by disconnecting its connection (the pattern of every blocking reader here) would
 * hang on its next command instead of seeing the close.
 */
function closable(c: Cluster): Cluster {
  let closed = false;
  const disconnect = c.disconnect.bind(c);
  const quit = c.quit.bind(c);
  const send = c.sendCommand.bind(c);
  c.disconnect = (reconnect = false) => { if (!reconnect) closed = true; return disconnect(reconnect); };
  c.quit = ((...args: Parameters<Cluster['quit']>) => { const done = quit(...args); closed = true; return done; }) as Cluster['quit'];
  c.sendCommand = ((command: Parameters<Cluster['sendCommand']>[0], ...rest: unknown[]) => {
    if (!closed) return (send as (...a: unknown[]) => unknown)(command, ...rest);
    command.reject(new Error('Connection is closed.'));
    return command.promise;
  }) as Cluster['sendCommand'];
  return c;
}

/** isCluster tells a Cluster connection from one Redis (or a Sentinel-managed one). */
export function isCluster(redis: Redis): boolean {
  return (redis as unknown as { isCluster?: boolean }).isCluster === true;
}

/**
 * duplicateConnection opens another connection like `redis` for a blocking reader (XREAD BLOCK, BRPOP,
 * SUBSCRIBE), which must not share the command connection. NOTE: ioredis reports connection errors as `error`
 * events and crashes a process on an unhandled one; the reader sees the failure on its command and retries, and
 * the service's main connection logs the outage once, so this one stays quiet. `name` is its CLIENT SETNAME.
 */
export function duplicateConnection(redis: Redis, name?: string): Redis {
  // NOTE: a name shows in CLIENT LIST, so an operator (or a test) can count the readers of one kind.
  let conn: Redis;
  if (isCluster(redis)) {
    const c = redis as unknown as Cluster;
    conn = closable(c.duplicate(undefined, name ? { redisOptions: { ...c.options.redisOptions, connectionName: name } } : {})) as unknown as Redis;
  } else {
    conn = redis.duplicate(name ? { connectionName: name } : undefined);
  }
  conn.on('error', () => undefined);
  return conn;
}
