import type { Socket } from 'node:net';
import { Cluster, Redis, SentinelConnector, type ClusterNode, type Command, type RedisOptions } from 'ioredis';
import { atTurnEnd } from './turn.ts';

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
  /** How long a command of a 'command' connection waits for its answer at most (default COMMAND_DEADLINE_MS). */
  commandDeadlineMs?: number;
}

/**
 * COMMAND_DEADLINE_MS bounds the wait of each command of a 'command' connection (a WAIT: its own timeout more), so
 * a command ioredis never settles still ends, in RedisCommandTimeoutError (a 503), never in a request left hanging.
 * NOTE: far above what a command of this service takes (a script runs in under a millisecond; a failover's
 * reconnects and retries end within a few seconds); only a lost command or a wedged socket reaches it.
 */
export const COMMAND_DEADLINE_MS = 15_000;

/**
 * RedisCommandTimeoutError is a command that got no answer within its deadline. Its `code` is ETIMEDOUT, so the
 * API reads it as a Redis outage (api/errors.ts isRedisOutage): 503 dependency_unavailable, like a refused
 * connection. NOTE: the command may still have run (a write answered 503 "may have happened", as after a failover).
 */
export class RedisCommandTimeoutError extends Error {
  override readonly name = 'RedisCommandTimeoutError';
  readonly code = 'ETIMEDOUT';
  constructor(command: string, ms: number) {
    super(`Redis did not answer ${command.toUpperCase()} within ${ms} ms`);
  }
}

/** ConnectionRole is what a connection is for; it picks the retry behaviour. */
export type ConnectionRole =
  /**
   * Commands of requests: a few retries while reconnecting, then the request fails (503), never hangs; each command
   * also has a deadline (COMMAND_DEADLINE_MS). NOTE: the deadline is this connection's own: a duplicate (a blocking
   * reader's, duplicateConnection) or a connection BullMQ makes does not inherit it.
   */
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
    const conn = this.connect(name, role, lazy);
    // NOTE: not BullMQ's connection: with it coalesced too its worker took a due firing about 20 ms later at p50 (in
    // each of 6 runs of the automation bench), while the command connection carries most of the writes it saved.
    if (role !== 'command') return conn;
    coalesceTurns(conn);
    return withDeadlines(conn, this.settings.commandDeadlineMs ?? COMMAND_DEADLINE_MS);
  }

  private connect(name: string, role: ConnectionRole, lazy: boolean): Redis {
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
      guardFailoverDetector();
      return new Redis({
        ...base, sentinels: t.sentinels, name: t.master, role: 'master',
        ...(this.settings.sentinelPassword ? { sentinelPassword: this.settings.sentinelPassword } : {}),
        ...(this.settings.tls ? { enableTLSForSentinelMode: true } : {}),
        // NOTE: the sentinels announce a failover (+switch-master) at once; without this a connection learns of it
        // only when its socket to the dead master fails, which after a SIGKILL can take a TCP timeout. ioredis' own
        // reaction to the announcement can end a connection for good: guardFailoverDetector replaces it.
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
   * mark notes the socket each master connection of `redis` writes on now. NOTE: taken before a request's first
   * write, it lets waitForReplicas tell that a connection was replaced since (a reconnect between the request's
   * last write and its WAIT): a WAIT on the new socket counts none of the writes the old one carried.
   */
  mark(redis: Redis): SocketMark {
    return new Map(masters(redis).map((node) => [node, node.status === 'ready' ? node.stream : undefined]));
  }

  /**
   * waitForReplicas blocks until `minReplicasAck` replicas confirmed every write this process sent on `redis`
   * so far (WAIT), on every master it may have written to; it returns the fewest replicas any master reached, or
   * undefined when no acknowledgement is asked for. With `since`, a master whose socket changed after that mark
   * counts as no replica: the writes it is asked about may have left on the old socket.
   */
  async waitForReplicas(redis: Redis, since?: SocketMark): Promise<{ acked: number; wanted: number } | undefined> {
    const wanted = this.settings.minReplicasAck;
    if (!wanted) return undefined;
    const timeout = this.settings.replicaAckTimeoutMs;
    const counts = await Promise.all(masters(redis).map((node) => waitOnSocket(node, wanted, timeout, since?.get(node))));
    return { acked: Math.min(...counts), wanted };
  }
}

/** SocketMark is the socket each master connection wrote on at one moment (RedisConnections.mark). */
export type SocketMark = Map<Redis, Socket | undefined>;

/**
 * masters are the connections WAIT is sent on. NOTE: WAIT counts the writes of the connection it is sent on; a
 * Cluster keeps one connection per master, so each master is asked about what this process wrote there (a master
 * it did not write to answers at once).
 */
function masters(redis: Redis): Redis[] {
  return isCluster(redis) ? (redis as unknown as Cluster).nodes('master') : [redis];
}

/**
 * waitOnSocket sends WAIT on `node` and returns its count, or 0 when the count says nothing about the writes sent
 * before: WAIT counts the writes of the socket it runs on, and the socket that carried them is gone when the
 * connection is not ready (it is reconnecting) or was replaced before WAIT's answer (ioredis sends the commands in
 * flight again after a reconnect). NOTE: after a failover such a WAIT ran on a fresh socket to the promoted master,
 * which had no writes of it to wait for, and answered at once with its replica count: a write the old master took
 * and never replicated was acknowledged (201) and lost (a sentinel test read it back 404). A node never connected
 * (status `wait`: a Cluster master this process did not write to) carried no writes.
 */
async function waitOnSocket(node: Redis, wanted: number, timeoutMs: number, marked?: Socket): Promise<number> {
  if (node.status !== 'ready' && node.status !== 'wait') return 0;
  const socket = node.status === 'ready' ? node.stream : undefined;
  if (marked && socket !== marked) return 0;
  const count = (await node.call('WAIT', wanted, timeoutMs)) as number;
  return socket && node.stream !== socket ? 0 : count;
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

/** coalesceTurns makes each turn's commands on `conn` leave in one write (coalesceWrites), on every node of a Cluster. */
export function coalesceTurns(conn: Redis): void {
  if (isCluster(conn)) conn.on('+node', (node: Redis) => coalesceWrites(node));
  else coalesceWrites(conn);
}

/**
 * coalesceWrites makes the commands `redis` sends in one event-loop turn leave in one system call: its socket is
 * corked at the turn's first write and uncorked when the turn ends (atTurnEnd). NOTE: under load a turn handles
 * many requests and replies, and each sent its commands in a write of its own; on loopback TCP a write also runs the
 * receiving side's network stack (about 28 µs of this process's CPU on a 2-core machine with page-table isolation),
 * and Redis then reads them one by one too. The bytes, their order and ioredis' command queue are unchanged, so
 * unlike ioredis' autopipelining (which regroups commands into pipelines, whose replies a dropped connection can cut
 * off, a known ioredis limitation) no command's fate depends on another's. A command waits at most for the turn's end.
 */
function coalesceWrites(redis: Redis): void {
  let patched: Socket | undefined;
  const patch = () => {
    const socket = redis.stream;
    if (!socket || socket === patched) return;
    patched = socket;
    const write = socket.write;
    socket.write = function (this: Socket, ...args: unknown[]) {
      // NOTE: nothing else corks these sockets, so a corked one is this turn's.
      if (!socket.writableCorked) {
        socket.cork();
        atTurnEnd(() => socket.uncork());
      }
      return (write as (...a: unknown[]) => boolean).apply(this, args);
    } as Socket['write'];
  };
  // NOTE: each connect (a reconnect too) brings a new socket; the handshake's first commands leave before the event.
  redis.on('connect', patch);
  patch();
}

/** isCluster tells a Cluster connection from one Redis (or a Sentinel-managed one). */
export function isCluster(redis: Redis): boolean {
  return (redis as unknown as { isCluster?: boolean }).isCluster === true;
}

/**
 * onReconnect calls `fn` each time `redis` is ready again after a dropped connection (a failover, a restarted
 * Redis), and for a Cluster each time one of its node connections ends or starts (a restarted node, a promoted
 * replica: the Cluster itself stays ready); it returns the function that stops it. NOTE: the Redis it reconnected
 * to may lack writes the old one answered (a failover's unreplicated tail, the AOF's last second before a restart),
 * while what this process did after them went to the new one.
 */
export function onReconnect(redis: Redis, fn: () => void): () => void {
  return on(redis, isCluster(redis) ? ['ready', '-node', '+node'] : ['ready'], fn);
}

/** onDisconnect calls `fn` each time `redis` loses its connection (for a Cluster: one of its nodes' connections). */
export function onDisconnect(redis: Redis, fn: () => void): () => void {
  return on(redis, isCluster(redis) ? ['close', '-node'] : ['close'], fn);
}

/** The callbacks of onReconnect and onDisconnect, by connection and event: one listener each (every reader adds one). */
const watchers = new WeakMap<Redis, Map<string, Set<() => void>>>();

function on(redis: Redis, events: string[], fn: () => void): () => void {
  let byEvent = watchers.get(redis);
  if (!byEvent) watchers.set(redis, (byEvent = new Map()));
  for (const e of events) {
    let fns = byEvent.get(e);
    if (!fns) {
      const all = (fns = new Set());
      byEvent.set(e, all);
      redis.on(e, () => { for (const f of all) f(); });
    }
    fns.add(fn);
  }
  return () => { for (const e of events) byEvent.get(e)!.delete(fn); };
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

/**
 * quietQueue keeps a BullMQ Queue's `error` events off stderr: a Queue re-emits each error of its connection, and
 * one with no listener prints it raw (console.error), on every reconnect attempt of an outage. Its connection is the
 * service's queue connection, whose own listener logs the outage (once per window: runtime/process/repeated-errors.ts);
 * a command the Queue sends still fails to its caller.
 */
export function quietQueue<Q extends { on(event: 'error', listener: (err: Error) => void): unknown }>(queue: Q): Q {
  queue.on('error', () => undefined);
  return queue;
}

/**
 * withDeadlines gives every command sent on `conn` a deadline of `ms` (a WAIT: its timeout more; blocking reads and
 * subscriptions none): past it the command is rejected with RedisCommandTimeoutError. NOTE: ioredis can leave a
 * command unsettled for ever: a pipeline or MULTI whose replies a dropped connection cut off (a known ioredis limitation), a
 * command written while a connection was handshaking and dropped by the next connect (resetCommandQueue), or
 * commands held for a resend (prevCommandQueue) when the connection ends; the request awaiting it would hang.
 * ioredis' `commandTimeout` would do the same but fail with an error the API cannot tell from a bug (a 500), and
 * every duplicate of the connection (a blocking reader's) would inherit it; this wrapper is the connection's own.
 * The timer is ioredis' own slot for a command's timeout, so ioredis clears it when the command settles.
 */
function withDeadlines(conn: Redis, ms: number): Redis {
  const own = Object.prototype.hasOwnProperty.call(conn, 'sendCommand') ? conn.sendCommand : undefined;
  // NOTE: every argument is passed on: a Cluster's sendCommand takes a third (the node a pipeline runs on).
  conn.sendCommand = function (this: Redis, command: Command, ...rest: unknown[]) {
    // NOTE: not the handshake of a (re)connect (CLIENT SETNAME, the ready check's INFO): ioredis would turn its
    // timeout into "Ready check failed" for every queued command (a 500); those commands have their own deadlines.
    if (!(this.status === 'connect' && HANDSHAKE.has(String(command.name).toLowerCase()))) armDeadline(command as unknown as DeadlineCommand, ms);
    // NOTE: the prototype's sendCommand is looked up at each call, so a later patch of it (a test's slot guard) applies.
    return ((own ?? Object.getPrototypeOf(conn).sendCommand) as (c: Command, ...r: unknown[]) => unknown).call(this, command, ...rest);
  } as Redis['sendCommand'];
  return conn;
}

/** The parts of an ioredis Command that armDeadline uses (`_commandTimeoutTimer`: the slot ioredis clears when it settles). */
interface DeadlineCommand { name: string; args: unknown[]; isResolved?: boolean; reject(err: Error): void; _commandTimeoutTimer?: NodeJS.Timeout }

/** HANDSHAKE are the commands ioredis sends on a new connection before it is ready (its HANDSHAKE_COMMANDS). */
const HANDSHAKE = new Set(['auth', 'select', 'client', 'readonly', 'info', 'hello']);

/** UNBOUNDED are the commands that wait by design (a blocking read, a subscription): none is bounded. */
const UNBOUNDED = new Set(['blpop', 'brpop', 'brpoplpush', 'blmove', 'bzpopmin', 'bzpopmax', 'bzmpop', 'blmpop', 'xread', 'xreadgroup', 'subscribe', 'psubscribe', 'ssubscribe', 'monitor']);

function armDeadline(command: DeadlineCommand, ms: number): void {
  // NOTE: a command sent again after a reconnect keeps its first deadline (the timer is set until it settles).
  if (command._commandTimeoutTimer) return;
  const name = String(command.name).toLowerCase();
  if (UNBOUNDED.has(name)) return;
  let deadline = ms;
  if (name === 'wait') {
    const waitMs = Number(command.args[1]);
    if (!(waitMs > 0)) return;
    deadline += waitMs;
  }
  command._commandTimeoutTimer = setTimeout(() => {
    if (!command.isResolved) command.reject(new RedisCommandTimeoutError(name, deadline));
  }, deadline);
}

/** The parts of ioredis' SentinelConnector and FailoverDetector that guardFailoverDetector uses. */
interface FailoverDetectorInternals { sentinels?: { client: Redis }[]; cleanup(): void; disconnect(): void }
interface SentinelConnectorInternals {
  stream?: Socket;
  failoverDetector?: FailoverDetectorInternals | null;
  options: { name?: string; disconnectTimeout?: number };
  initFailoverDetector(): Promise<void>;
}

let failoverGuarded = false;

/**
 * guardFailoverDetector changes what a sentinel connection does on +switch-master (failoverDetector: true): it
 * drops the socket the detector was made for, if still open and not already to the promoted master, and nothing
 * else. NOTE: ioredis' detector calls its connector's disconnect(), which also marks the connector as no longer
 * connecting. After a SIGKILL the socket to the dead master closed at once and the connection is reconnecting,
 * still with that socket's detector: an announcement that arrives while the reconnect asks a sentinel for the
 * master then fails the reconnect ("Connection is closed.", SentinelConnector connectToNext) and ioredis ends the
 * connection for good (status `end`, Redis _connect): from then on every command fails at once (a process
 * answering 503 until restarted), and commands it held to resend after a reconnect (prevCommandQueue, which that
 * path does not flush) are never settled (requests hang). Reproduced with a sentinel lookup slowed to 1.5 s: ended 3 of 3 times; with this,
 * the connection writes again on the promoted master. It also leaves alone a connection already on the promoted
 * master (a slower sentinel announces the same failover later: dropping it would lose the replies of its
 * commands, which ioredis would then send again) and announcements about other masters. It patches ioredis'
 * prototype once, so BullMQ's connections (duplicates of the 'queue' one) have it too.
 */
function guardFailoverDetector(): void {
  if (failoverGuarded) return;
  failoverGuarded = true;
  const proto = SentinelConnector.prototype as unknown as SentinelConnectorInternals;
  const init = proto.initFailoverDetector;
  if (typeof init !== 'function') return;
  proto.initFailoverDetector = function (this: SentinelConnectorInternals) {
    // NOTE: ioredis calls this on the new socket's `connect`; the detector is made before its first await.
    const socket = this.stream;
    const done = init.call(this);
    const detector = this.failoverDetector;
    if (!socket || !detector || !Array.isArray(detector.sentinels)) return done;
    const master = this.options.name;
    const grace = this.options.disconnectTimeout ?? 2000;
    let dropped = false;
    detector.disconnect = () => undefined;
    const onMessage = (channel: string, message: string) => {
      if (dropped || channel !== '+switch-master') return;
      // "<master name> <old ip> <old port> <new ip> <new port>"
      const [name, , , host, port] = String(message).split(' ');
      if (master && name !== master) return;
      if (socket.remoteAddress === host && socket.remotePort === Number(port)) return;
      dropped = true;
      detector.cleanup();
      if (socket.destroyed) return;
      // NOTE: as ioredis' disconnect: end (the answers already on their way still arrive), destroy after a grace.
      const timer = setTimeout(() => socket.destroy(), grace);
      socket.once('close', () => clearTimeout(timer));
      socket.end();
    };
    for (const { client } of detector.sentinels) client.on('message', onMessage);
    return done;
  };
}
