import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './redis-server.ts';
import { testRedis } from './redis-cluster.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * productionArgv is what `node` runs for a benchmark's service: the compiled `dist/runtime/main.js` of `root` as
 * production runs it (`make build`), or the sources under tsx when there is no build or BENCH_TSX=1.
 */
export function productionArgv(dir = root): string[] {
  const main = path.join(dir, 'dist/runtime/main.js');
  return process.env.BENCH_TSX !== '1' && existsSync(main) ? [main] : ['--import', 'tsx', path.join(dir, 'runtime/main.ts')];
}

/**
 * compiledArgv is what production runs, `node dist/runtime/main.js`: a test of the compiled service fails, rather
 * than quietly running the sources, when there is no build (`make test` builds first; by hand, `make build`).
 */
export function compiledArgv(): string[] {
  const main = path.join(root, 'dist/runtime/main.js');
  if (!existsSync(main)) throw new Error(`${main} is missing: run \`make build\` first (make test builds it)`);
  return [main];
}

/**
 * startBare runs a benchmark's ceiling, the bare node:http JSON server (test/bench/bare-server.ts), in its own
 * process; with REDIS_URL in `env` it also stores each body with one Redis script.
 */
export async function startBare(env: Record<string, string> = {}): Promise<{ url: string; pid: number; stop: () => void }> {
  const port = await freePort();
  const proc = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'test/bench/bare-server.ts')], { env: { ...process.env, PORT: String(port), ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((r) => proc.stdout!.once('data', r));
  return { url: `http://127.0.0.1:${port}`, pid: proc.pid!, stop: () => proc.kill('SIGKILL') };
}

/** ServiceProcess runs the service as a real child process, so a test can SIGKILL it. */
export class ServiceProcess {
  proc?: ChildProcess;
  port = 0;
  stderr = '';

  /**
   * argv is what `node` runs: by default what production runs, the compiled dist/runtime/main.js (compiledArgv), so
   * every multi-process suite tests the build users run; a benchmark may choose (productionArgv).
   */
  constructor(private readonly env: Record<string, string>, private readonly argv: string[] = compiledArgv()) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** start spawns the service and waits until /readyz answers 200 (every role serves it). */
  async start(): Promise<this> {
    if (!this.port) this.port = await freePort();
    this.proc = spawn(process.execPath, this.argv, {
      cwd: root, stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, HOST: '127.0.0.1', PORT: String(this.port), LOG_LEVEL: 'warn', ...this.env },
    });
    this.proc.stderr!.on('data', (d) => { this.stderr = (this.stderr + d).slice(-20_000); });
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if (this.proc.exitCode !== null) throw new Error(`service exited with ${this.proc.exitCode}: ${this.stderr}`);
      try {
        if ((await fetch(`${this.url}/readyz`)).status === 200) return this;
      } catch { /* not listening yet */ }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`service did not become ready: ${this.stderr}`);
  }

  /** kill sends a signal and waits for the process to exit; it returns the exit code. */
  async kill(signal: NodeJS.Signals): Promise<number | null> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return p?.exitCode ?? null;
    return new Promise((resolve) => {
      p.once('exit', (code) => resolve(code));
      p.kill(signal);
    });
  }
}

/**
 * ProcessCluster is the one set-up of the multi-process suites: a real redis-server, a workspace directory (`root`)
 * and a shared `DATA_DIR` (`data`) for the suite, and service processes started by role; everything is killed and
 * removed after the suite. `install()` registers the mocha hooks inside a `describe`.
 */
export class ProcessCluster {
  /** One Redis, or a 3-master cluster under TEST_REDIS=cluster. */
  readonly redis = testRedis();
  readonly root: string;
  readonly data: string;
  readonly procs: ServiceProcess[] = [];

  constructor(name: string, private readonly env: Record<string, string> = {}) {
    this.root = mkdtempSync(path.join(os.tmpdir(), `svc-${name}-`));
    this.data = mkdtempSync(path.join(os.tmpdir(), `svc-${name}-data-`));
  }

  install(): this {
    before(() => this.redis.start());
    after(async () => {
      for (const p of this.procs) await p.kill('SIGKILL');
      await this.redis.destroy();
      rmSync(this.root, { recursive: true, force: true });
      rmSync(this.data, { recursive: true, force: true });
    });
    return this;
  }

  /** start runs a service process with the given roles (`''`: every role) and more environment. */
  async start(roles = '', env: Record<string, string> = {}): Promise<ServiceProcess> {
    const p = new ServiceProcess({ ...this.redis.env, DATA_DIR: this.data, ...(roles ? { SVC_ROLES: roles } : {}), ...this.env, ...env });
    this.procs.push(p);
    return p.start();
  }
}
