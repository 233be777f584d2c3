import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { RedisServer } from './redis-server.ts';

const run = promisify(execFile);

/** portFree is true when nothing listens on `port` on loopback. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * clusterPort picks a port whose cluster-bus twin (port + 10000, Redis Cluster's fixed offset) is free too; the
 * OS's ephemeral ports would put the twin past 65535.
 */
async function clusterPort(taken: Set<number>): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 25_000);
    if (taken.has(port)) continue;
    if ((await portFree(port)) && (await portFree(port + 10_000))) { taken.add(port); return port; }
  }
}

/**
 * RedisCluster is a private 3-master Redis Cluster for one test file: `redis-server --cluster-enabled yes` on free
 * ports in a temp dir, joined by `redis-cli --cluster create`, ready when every node reports `cluster_state:ok`.
 * It offers what RedisServer offers to the suites (`env`, `client()`, `flush()`, `restart()`, `destroy()`).
 */
export class RedisCluster {
  private readonly procs: ChildProcess[] = [];
  readonly dir = mkdtempSync(path.join(os.tmpdir(), 'svc-redis-cluster-'));
  ports: number[] = [];

  constructor(readonly masters = 3) {}

  /** nodes is the seed list REDIS_CLUSTER_NODES takes. */
  get nodes(): string {
    return this.ports.map((p) => `127.0.0.1:${p}`).join(',');
  }

  /** env points a service at this cluster. */
  get env(): Record<string, string> {
    return { REDIS_CLUSTER_NODES: this.nodes };
  }

  async start(): Promise<this> {
    const taken = new Set<number>();
    for (let i = 0; i < this.masters; i++) this.ports.push(await clusterPort(taken));
    for (const port of this.ports) mkdirSync(path.join(this.dir, String(port)));
    await this.spawnNodes();
    await run('redis-cli', ['--cluster', 'create', ...this.ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes']);
    await this.clusterOk();
    return this;
  }

  /**
   * restart stops the node that holds `key` (SIGTERM: it writes its AOF) and starts it again on its port, data and
   * identity, while the others keep serving (the Cluster connection stays up: only that node's connection drops).
   */
  async restart(key: string): Promise<void> {
    const slot = Number(await ask(this.ports[0], 'CLUSTER', 'KEYSLOT', key));
    const slots = (await ask(this.ports[0], 'CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
    const port = slots.find(([from, to]) => slot >= from && slot <= to)![2][1];
    const i = this.ports.indexOf(port);
    const p = this.procs[i];
    await new Promise<void>((resolve) => { p.once('exit', () => resolve()); p.kill('SIGTERM'); });
    this.procs[i] = this.spawnNode(port);
    await waitFor(async () => (await ask(port, 'PING')) === 'PONG', `redis-server on ${port}`);
    await this.clusterOk();
  }

  private spawnNode(port: number): ChildProcess {
    return spawn('redis-server', [
      '--port', String(port), '--bind', '127.0.0.1', '--dir', path.join(this.dir, String(port)), '--cluster-enabled', 'yes',
      '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000', '--appendonly', 'yes',
      '--appendfsync', 'everysec', '--save', '', '--daemonize', 'no', '--loglevel', 'warning',
    ], { stdio: 'ignore' });
  }

  private async spawnNodes(): Promise<void> {
    for (const port of this.ports) this.procs.push(this.spawnNode(port));
    for (const port of this.ports) await waitFor(async () => (await ask(port, 'PING')) === 'PONG', `redis-server on ${port}`);
  }

  private async clusterOk(): Promise<void> {
    for (const port of this.ports) await waitFor(async () => String(await ask(port, 'CLUSTER', 'INFO')).includes('cluster_state:ok'), `cluster state on ${port}`);
  }

  private kill(signal: NodeJS.Signals): Promise<unknown> {
    return Promise.all(this.procs.map((p) => (p.exitCode !== null ? undefined : new Promise<void>((resolve) => { p.once('exit', () => resolve()); p.kill(signal); }))));
  }

  /** client opens a Cluster connection (the caller closes it). */
  client(): Redis {
    return new Cluster(this.ports.map((port) => ({ host: '127.0.0.1', port })), { redisOptions: { maxRetriesPerRequest: null } }) as unknown as Redis;
  }

  /** flush empties every master. */
  async flush(): Promise<void> {
    for (const port of this.ports) await ask(port, 'FLUSHALL');
  }

  /** destroy kills every node and removes their data. */
  async destroy(): Promise<void> {
    await this.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** ask sends one command to one node and returns its answer. */
async function ask(port: number, ...args: string[]): Promise<unknown> {
  const r = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000 });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return await r.call(args[0], ...args.slice(1));
  } catch {
    return undefined;
  } finally {
    r.disconnect();
  }
}

async function waitFor(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what} not ready`);
}

/** TestRedis is what the suites need of their store: one Redis, or a cluster when TEST_REDIS=cluster. */
export type TestRedis = RedisServer | RedisCluster;

/**
 * testRedis is the store of a suite: a RedisServer, or a RedisCluster when the run sets TEST_REDIS=cluster (how
 * `make test` runs the suites listed in test/cluster.mocharc.cjs against a 3-master cluster).
 */
export function testRedis(): TestRedis {
  return process.env.TEST_REDIS === 'cluster' ? new RedisCluster() : new RedisServer();
}
