// What a benchmark reads around a measured window: a process's CPU from /proc, its Redis's CPU and per-command call
// counts from INFO, and the argv that makes a service write a V8 CPU profile (BENCH_PROFILE=<dir>). Not a test.
import { mkdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { productionArgv } from '../helpers/process.ts';

const TICK = 100; // USER_HZ on Linux

/** cpuMs is the user+system CPU a process has used, in ms (/proc/<pid>/stat fields 14 and 15). */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / TICK;
}

/** syscalls are the read- and write-family system calls a process has made (/proc/<pid>/io syscr, syscw). */
export function syscalls(pid: number): [number, number] {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  const get = (k: string) => Number(new RegExp(`${k}: (\\d+)`).exec(io)![1]);
  return [get('syscr'), get('syscw')];
}

/**
 * Load measures a stretch of load from outside the service: how many of the machine's cores were busy (/proc/stat)
 * and the CPU of this benchmark process (its clients) per operation. NOTE: on two shared cores the service, its
 * Redis and the clients compete; a rate that stops growing while the service's CPU per operation falls is bound by
 * the rest, which these show.
 */
export class Load {
  private readonly m0 = machineTicks();
  private readonly c0 = process.cpuUsage();

  end(ops: number): { busyCores: number; clientUs: number } {
    const m1 = machineTicks();
    const c = process.cpuUsage(this.c0);
    const cores = os.cpus().length;
    return { busyCores: (cores * (m1.busy - this.m0.busy)) / (m1.total - this.m0.total), clientUs: (c.user + c.system) / ops };
  }
}

/** machineTicks sums /proc/stat's first line: every tick, and the ticks neither idle nor waiting for I/O. */
function machineTicks(): { busy: number; total: number } {
  const t = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = t.reduce((a, b) => a + b, 0);
  return { busy: total - t[3] - t[4], total };
}

/** redisCpuMs is used_cpu_user + used_cpu_sys of a Redis server, in ms (INFO cpu). */
export async function redisCpuMs(r: Redis): Promise<number> {
  const info = await r.info('cpu');
  const get = (k: string) => Number(new RegExp(`${k}:([\\d.]+)`).exec(info)![1]);
  return (get('used_cpu_sys') + get('used_cpu_user')) * 1000;
}

/** commandStats is Redis's INFO commandstats as {command: [calls, usec]}. */
export async function commandStats(r: Redis): Promise<Map<string, [number, number]>> {
  const out = new Map<string, [number, number]>();
  for (const line of (await r.info('commandstats')).split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim());
    if (m) out.set(m[1], [Number(m[2]), Number(m[3])]);
  }
  return out;
}

/** Window measures one stretch of load: the CPU of the service process and of its Redis, and Redis calls per op. */
export class Window {
  private c0 = 0;
  private r0 = 0;
  private s0 = new Map<string, [number, number]>();
  private io0: [number, number] = [0, 0];

  constructor(private readonly pid: number, private readonly redis: Redis) {}

  /** the window's bounds on the monotonic clock V8's CPU profiles use (µs), to cut a profile to the window */
  t0 = 0n;
  t1 = 0n;

  async start(): Promise<this> {
    this.t0 = process.hrtime.bigint() / 1000n;
    this.c0 = cpuMs(this.pid);
    this.io0 = syscalls(this.pid);
    this.r0 = await redisCpuMs(this.redis);
    this.s0 = await commandStats(this.redis);
    return this;
  }

  /** end answers CPU per operation (µs) of the service and of Redis, and the Redis commands per operation. */
  // NOTE: syscalls per op too: on a VM with page-table isolation each costs several µs, and a rate swings with the
  // machine where a count does not (e.g. Redis commands written one per write() or batched).
  async end(ops: number): Promise<{ svcUs: number; redisUs: number; calls: string; syscalls: string }> {
    this.t1 = process.hrtime.bigint() / 1000n;
    if (process.env.BENCH_PROFILE) console.log(`profile window (µs, monotonic): ${this.t0} ${this.t1}`);
    const svc = cpuMs(this.pid) - this.c0;
    const [r1, w1] = syscalls(this.pid);
    const red = (await redisCpuMs(this.redis)) - this.r0;
    const s1 = await commandStats(this.redis);
    const rows = [...s1].map(([cmd, [calls, usec]]) => {
      const [c0, u0] = this.s0.get(cmd) ?? [0, 0];
      return { cmd, calls: (calls - c0) / ops, usec: (usec - u0) / ops };
    }).filter((x) => x.calls >= 0.05 || x.usec >= 0.5).sort((a, b) => b.usec - a.usec);
    return {
      svcUs: (svc * 1000) / ops, redisUs: (red * 1000) / ops,
      // NOTE: a command sent once per page (calls under 0.05 per op) is shown when its time is not negligible.
      calls: rows.map((x) => `${x.cmd} ${x.calls.toFixed(x.calls < 0.05 ? 3 : 2)} (${x.usec.toFixed(0)} µs)`).join(', '),
      syscalls: `read ${((r1 - this.io0[0]) / ops).toFixed(1)}, write ${((w1 - this.io0[1]) / ops).toFixed(1)}`,
    };
  }
}

/**
 * serviceArgv runs the service as production does (productionArgv: the compiled dist/runtime/main.js when `make
 * build` made it, which `make bench` does first; else, or with BENCH_TSX=1, the sources under tsx), writing a V8
 * CPU profile into BENCH_PROFILE/<name> when that is set (written when the process exits after SIGTERM, not
 * after SIGKILL). NOTE: under tsx every closure pays esbuild's keepNames helper and each built-in agent process
 * compiles its sources at start, so figures under tsx are not production figures.
 */
export function serviceArgv(name: string): string[] {
  const dir = process.env.BENCH_PROFILE;
  if (!dir) return productionArgv();
  const out = path.resolve(dir, name);
  mkdirSync(out, { recursive: true });
  return ['--cpu-prof', `--cpu-prof-dir=${out}`, ...productionArgv()];
}

/** settle waits until a process has gone quiet (under 10 ms of CPU in 300 ms), at most `maxMs`, e.g. after a seed. */
export async function settle(pid: number, maxMs = 60_000): Promise<void> {
  const deadline = Date.now() + maxMs;
  let prev = cpuMs(pid);
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 300));
    const cur = cpuMs(pid);
    if (cur - prev <= 10) return;
    prev = cur;
  }
}
