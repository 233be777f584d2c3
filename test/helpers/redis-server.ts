import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { redisAnswers } from '../../store/redis-ping.ts';

/** freePort asks the OS for a free TCP port on loopback. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * RedisServer is a private `redis-server` for one test file: its own port and temp dir (AOF on), which a
 * test can kill and restart on the same data.
 */
export class RedisServer {
  private proc?: ChildProcess;
  readonly dir = mkdtempSync(path.join(os.tmpdir(), 'svc-redis-'));
  port = 0;

  /** fsync is the AOF's appendfsync: Redis's default `everysec`, or `always` as `make run`'s embedded Redis. */
  constructor(private readonly fsync: 'always' | 'everysec' = 'everysec') {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** env points a service at this server. */
  get env(): Record<string, string> {
    return { REDIS_URL: this.url };
  }

  async start(): Promise<this> {
    if (!this.port) this.port = await freePort();
    this.proc = spawn('redis-server', [
      '--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--appendonly', 'yes',
      '--appendfsync', this.fsync, '--save', '', '--daemonize', 'no', '--loglevel', 'warning',
    ], { stdio: 'ignore' });
    for (let i = 0; i < 100; i++) {
      if (await this.answers()) return this;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`redis-server on ${this.port} did not start`);
  }

  private answers(): Promise<boolean> {
    return redisAnswers(this.url);
  }

  /** client opens a new connection to this server (the caller closes it). */
  client(): Redis {
    return new Redis(this.url, { maxRetriesPerRequest: null });
  }

  async flush(): Promise<void> {
    const r = this.client();
    await r.flushall();
    r.disconnect();
  }

  /** stop kills the server and waits for it to exit. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill(signal);
    });
  }

  /**
   * restart stops the server (SIGTERM: it writes its AOF) and starts it again on its port and data. `key` is
   * RedisCluster's (the node to restart); one server holds every key.
   */
  async restart(_key?: string): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** destroy stops the server and removes its data. */
  async destroy(): Promise<void> {
    await this.stop('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }
}
