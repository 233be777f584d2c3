import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './redis-server.ts';

/** MASTER_NAME is the name the test sentinels monitor (REDIS_SENTINEL_MASTER). */
export const MASTER_NAME = 'svcmaster';

interface Node { port: number; dir: string; proc?: ChildProcess }

/**
 * RedisSentinelSet is a private Sentinel deployment for one test file: a master, one replica and three sentinels
 * (`redis-server --sentinel`, the program Debian's redis-sentinel package runs), on free ports in a temp dir.
 * A test kills the master (`killMaster`) and brings it back (`restartOldMaster`: the sentinels then make it a
 * replica of the promoted one).
 */
export class RedisSentinelSet {
  readonly dir = mkdtempSync(path.join(os.tmpdir(), 'svc-redis-sentinel-'));
  readonly data: Node[] = [];
  readonly sentinels: Node[] = [];
  /** The port of the master the set started with. */
  firstMaster = 0;

  /** env points a service at the sentinels. */
  get env(): Record<string, string> {
    return { REDIS_SENTINELS: this.sentinels.map((s) => `127.0.0.1:${s.port}`).join(','), REDIS_SENTINEL_MASTER: MASTER_NAME };
  }

  async start(): Promise<this> {
    for (let i = 0; i < 2; i++) this.data.push({ port: await freePort(), dir: path.join(this.dir, `data${i}`) });
    this.firstMaster = this.data[0].port;
    for (const n of this.data) mkdirSync(n.dir);
    this.startData(this.data[0]);
    this.startData(this.data[1], this.firstMaster);
    for (const n of this.data) await waitAnswer(n.port);
    await waitFor(async () => String(await ask(this.data[0].port, 'INFO', 'replication')).includes('connected_slaves:1'), 'replica link');
    for (let i = 0; i < 3; i++) {
      const s: Node = { port: await freePort(), dir: path.join(this.dir, `sentinel${i}`) };
      mkdirSync(s.dir);
      // NOTE: a 1 s down-after keeps the test short; production keeps Redis's 30 s default or a few seconds.
      writeFileSync(path.join(s.dir, 'sentinel.conf'), [
        `port ${s.port}`, 'bind 127.0.0.1', `dir ${s.dir}`,
        `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${this.firstMaster} 2`,
        `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
        `sentinel failover-timeout ${MASTER_NAME} 10000`,
        `sentinel parallel-syncs ${MASTER_NAME} 1`, '',
      ].join('\n'));
      s.proc = spawn('redis-server', [path.join(s.dir, 'sentinel.conf'), '--sentinel', '--loglevel', 'warning'], { stdio: 'ignore' });
      this.sentinels.push(s);
    }
    for (const s of this.sentinels) {
      await waitFor(async () => String(await ask(s.port, 'SENTINEL', 'REPLICAS', MASTER_NAME)).includes(String(this.data[1].port)), `sentinel ${s.port}`);
    }
    return this;
  }

  private startData(n: Node, replicaOf?: number): void {
    n.proc = spawn('redis-server', [
      '--port', String(n.port), '--bind', '127.0.0.1', '--dir', n.dir, '--appendonly', 'yes', '--appendfsync', 'everysec',
      '--save', '', '--daemonize', 'no', '--loglevel', 'warning',
      // NOTE: Redis waits 5 s before a full resync by default (to serve several replicas with one transfer); the
      // restarted old master is the only one, and the test waits for it.
      '--repl-diskless-sync-delay', '0',
      ...(replicaOf ? ['--replicaof', '127.0.0.1', String(replicaOf)] : []),
    ], { stdio: 'ignore' });
  }

  /** masterPort asks a sentinel which port the master has now. */
  async masterPort(): Promise<number> {
    const addr = (await ask(this.sentinels[0].port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME)) as string[] | undefined;
    return Number(addr?.[1] ?? 0);
  }

  /** killMaster SIGKILLs the first master's process. */
  async killMaster(): Promise<void> {
    await kill(this.data[0].proc, 'SIGKILL');
  }

  /** restartOldMaster starts the killed master again on its data; the sentinels turn it into a replica. */
  async restartOldMaster(): Promise<void> {
    this.startData(this.data[0]);
    await waitAnswer(this.data[0].port);
  }

  /**
   * describe says, for a failing assertion, what each data node is (role, master, its service connections) and
   * which master each sentinel names, e.g. to see a service process still on the old master.
   */
  async describe(): Promise<string> {
    const nodes = await Promise.all(this.data.map(async (n) => {
      const info = String(await ask(n.port, 'INFO', 'replication') ?? '');
      const field = (name: string) => new RegExp(`^${name}:(.*)$`, 'm').exec(info)?.[1]?.trim();
      const names = String(await ask(n.port, 'CLIENT', 'LIST') ?? '').split('\n').map((l) => /\bname=(\S*)/.exec(l)?.[1] ?? '').filter(Boolean);
      const role = field('role') ? `${field('role')}${field('master_port') ? ` of ${field('master_port')} (link ${field('master_link_status')})` : ''}` : 'down';
      // NOTE: a service process names its command connection `svc` (runtime/process/service.ts).
      return `${n.port}${n.port === this.firstMaster ? ' (first master)' : ''}: ${role}; ${names.filter((x) => x === 'svc').length} svc connections, ${names.length} named clients`;
    }));
    const views = await Promise.all(this.sentinels.map(async (s) => ((await ask(s.port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME)) as string[] | undefined)?.[1] ?? '?'));
    return `${nodes.join('; ')}; the sentinels name ${views.join(', ')} as master`;
  }

  async destroy(): Promise<void> {
    for (const n of [...this.sentinels, ...this.data]) await kill(n.proc, 'SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function kill(p: ChildProcess | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!p || p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => { p.once('exit', () => resolve()); p.kill(signal); });
}

/** ask sends one command to one node and returns its answer (undefined when it does not answer). */
export async function ask(port: number, ...args: string[]): Promise<unknown> {
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

async function waitAnswer(port: number): Promise<void> {
  await waitFor(async () => (await ask(port, 'PING')) === 'PONG', `redis-server on ${port}`);
}

async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} not ready`);
}
