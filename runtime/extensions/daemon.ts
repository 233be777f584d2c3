import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { JsonRpcPeer } from '../agents/json-rpc-peer.ts';

/** DaemonExit is how a daemon process ended; `error` says why it could not be started at all. */
export interface DaemonExit { code: number | null; signal: NodeJS.Signals | null; error?: string }

/** STDERR_TAIL bounds the stderr kept for `last_error`. */
const STDERR_TAIL = 2048;

/**
 * DaemonProcess is one running extension daemon: a child process in its own process group, spoken to with
 * JSON-RPC 2.0 over stdio (newline-delimited, the built-in agent's transport: runtime/agents/json-rpc-peer.ts).
 * `stop` sends SIGTERM to the group, waits up to the shutdown timeout, then SIGKILLs it, so the daemon and anything
 * it started are gone. NOTE: when the service itself is killed, the daemon's stdin closes; the daemon contract
 * (README "Extensions") is to exit then.
 */
export class DaemonProcess {
  readonly child: ChildProcess;
  readonly peer: JsonRpcPeer;
  readonly exited: Promise<DaemonExit>;
  readonly startedAt = Date.now();
  private stderrTail = '';

  constructor(argv: string[], o: { cwd: string; env: Record<string, string> }) {
    this.child = spawn(argv[0], argv.slice(1), { cwd: o.cwd, env: o.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => resolve({ code, signal }));
      // NOTE: a spawn failure (ENOENT) emits `error` and no `exit`.
      this.child.once('error', (err) => resolve({ code: -1, signal: null, error: spawnError(err as NodeJS.ErrnoException, argv[0], o) }));
    });
    this.child.stdin!.on('error', () => undefined);
    this.child.stderr!.on('data', (d: Buffer) => { this.stderrTail = (this.stderrTail + d.toString('utf8')).slice(-STDERR_TAIL); });
    this.peer = new JsonRpcPeer(this.child.stdout!, this.child.stdin!);
    void this.peer.run().catch(() => undefined);
  }

  get pid(): number { return this.child.pid ?? 0; }

  /** stderr is the last lines the daemon wrote to stderr (for `last_error`). */
  get stderr(): string { return this.stderrTail.trim().split('\n').slice(-3).join(' | ').slice(-500); }

  /** request calls a method and rejects after `timeoutMs`. */
  async request<R = any>(method: string, params: unknown, timeoutMs: number): Promise<R> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${method} took longer than ${timeoutMs} ms`)), timeoutMs); });
    try {
      return await Promise.race([this.peer.request<R>(method, params), timeout, this.exited.then((e) => { throw new Error(`the daemon exited (${describeExit(e)}) during ${method}`); })]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** stop ends the process group: SIGTERM, then SIGKILL after `timeoutMs`; resolves once the daemon has exited. */
  async stop(timeoutMs: number): Promise<DaemonExit> {
    if (this.child.exitCode !== null || this.child.signalCode !== null || !this.child.pid) return this.exited;
    this.signal('SIGTERM');
    const timer = setTimeout(() => this.signal('SIGKILL'), timeoutMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
      // NOTE: the group may hold processes the daemon started and did not end with it.
      this.signal('SIGKILL');
    }
  }

  private signal(sig: NodeJS.Signals): void {
    try {
      process.kill(-this.child.pid!, sig);
    } catch {
      try { this.child.kill(sig); } catch { /* gone */ }
    }
  }
}

/** describeExit says how a process ended, for `last_error`. */
export function describeExit(e: DaemonExit): string {
  return e.signal ? `killed by ${e.signal}` : e.code === -1 ? `could not be started${e.error ? `: ${e.error}` : ''}` : `exit code ${e.code}`;
}

/**
 * spawnError names what a failed spawn could not find or run: the command as resolved (against the working
 * directory when it is a path, through PATH otherwise), or the working directory when that is what is missing.
 */
function spawnError(err: NodeJS.ErrnoException, command: string, o: { cwd: string; env: Record<string, string> }): string {
  const resolved = command.includes('/') ? path.resolve(o.cwd, command) : '';
  if (err.code === 'ENOENT' && !existsSync(o.cwd)) return `the working directory ${o.cwd} does not exist (${err.code})`;
  if (err.code === 'ENOENT') return resolved ? `no such file: ${resolved} (${err.code})` : `"${command}" is not found in PATH (${o.env.PATH ?? 'unset'}) (${err.code})`;
  if (err.code === 'EACCES') return `${resolved || command} is not executable (${err.code})`;
  return `${err.message}${err.code ? ` (${err.code})` : ''}`;
}
