// The write path: validated creates (PUT, expected_version 0) against every role in one process, the api
// role alone, the bare node:http JSON server, and that server storing each body with one small Redis script, in
// alternating rounds with the same autocannon client; prints requests/s, ratios to the bare server, and CPU per
// request of the service and of its Redis. Not a test.
//   node --import tsx test/bench/write-path.ts   (env BENCH_SECONDS, BENCH_ROUNDS, BENCH_CONNECTIONS)
// The service runs as production does, compiled (`make build`: dist/runtime/main.js), when dist/ exists; BENCH_TSX=1
// runs the sources under tsx instead (about 15% more CPU per request: tsx keeps function names with a helper call).
// BENCH_BASELINE=<another checkout> adds that checkout's service (all roles, api only) to the same rounds, for a
// before/after on the same load (e.g. `git archive <commit> | tar -x -C /tmp/base`, with node_modules linked).
import path from 'node:path';
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { RedisServer } from '../helpers/redis-server.ts';
import { productionArgv, ServiceProcess, startBare } from '../helpers/process.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const spec = (i: number) => ({ name: `agent-${i}`, prompt: 'You help with the benchmark.', tools: ['svc__read'], model: 'm' });
const TICK = 100; // USER_HZ on Linux

/** cpuMs is the user+system CPU a process has used, in ms (/proc/<pid>/stat fields 14 and 15). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / TICK;
}

/** redisCpuMs is used_cpu_user + used_cpu_sys of a Redis server, in ms (INFO cpu). */
async function redisCpuMs(r: Redis): Promise<number> {
  const info = await r.info('cpu');
  const get = (k: string) => Number(new RegExp(`${k}:([\\d.]+)`).exec(info)![1]);
  return (get('used_cpu_sys') + get('used_cpu_user')) * 1000;
}

let seq = 0;
async function run(base: string, connections = CONNECTIONS, query = '') {
  const tag = `r${seq++}x`;
  let n = 0;
  const result = await autocannon({
    url: base, connections, duration: DURATION, pipelining: 1,
    requests: [{
      method: 'PUT',
      setupRequest: (req) => {
        const i = n++;
        return { ...req, path: `/api/resources/agent/${tag}${i}${query}`, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ scope: { kind: 'global' }, spec: spec(i), expected_version: 0 }) };
      },
    }],
  });
  return { ok: result['2xx'], rps: result['2xx'] / DURATION, bad: result.non2xx + result.errors, p50: result.latency.p50, p99: result.latency.p99 };
}

interface Target { name: string; url: string; pid: number; redis?: Redis; rps: number[]; svcUs: number[]; redisUs: number[]; bad: number }

async function measure(t: Target) {
  const c0 = cpuMs(t.pid);
  const r0 = t.redis ? await redisCpuMs(t.redis) : 0;
  const res = await run(t.url);
  // NOTE: the relay and the reconcile workers of the all-roles process finish the round's backlog after the
  // load stops; that work belongs to the round, so CPU is read once the process has gone quiet.
  let prev = cpuMs(t.pid);
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 200));
    const cur = cpuMs(t.pid);
    if (cur - prev <= 10) break;
    prev = cur;
  }
  const c1 = cpuMs(t.pid);
  const r1 = t.redis ? await redisCpuMs(t.redis) : 0;
  t.rps.push(res.rps);
  t.svcUs.push(((c1 - c0) * 1000) / Math.max(1, res.ok));
  t.redisUs.push(((r1 - r0) * 1000) / Math.max(1, res.ok));
  t.bad += res.bad;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const baseline = process.env.BENCH_BASELINE;
  const targets: Target[] = [];
  const cleanup: (() => Promise<unknown>)[] = [];
  const bareServer = async (env: Record<string, string>) => {
    const { url, pid, stop } = await startBare(env);
    cleanup.push(async () => stop());
    return { url, pid };
  };
  const service = async (name: string, env: Record<string, string>, root?: string) => {
    const redis = await new RedisServer().start();
    const svc = await new ServiceProcess({ REDIS_URL: redis.url, LOG_LEVEL: 'warn', ...env }, productionArgv(root)).start();
    console.log(`${name}: node ${productionArgv(root).join(' ')}`);
    const client = redis.client();
    cleanup.push(async () => { client.disconnect(); await svc.kill('SIGTERM'); await redis.destroy(); });
    targets.push({ name, url: svc.url, pid: svc.proc!.pid!, redis: client, rps: [], svcUs: [], redisUs: [], bad: 0 });
    return svc;
  };
  const all = await service('all roles', {});
  await service('api only', { SVC_ROLES: 'api' });
  if (baseline) {
    await service('all roles (baseline)', {}, path.resolve(baseline));
    await service('api only (baseline)', { SVC_ROLES: 'api' }, path.resolve(baseline));
  }
  // NOTE: the floor of a persisted write: the bare server plus one small Redis script per request.
  const floorRedis = await new RedisServer().start();
  const floorClient = floorRedis.client();
  const floor = await bareServer({ REDIS_URL: floorRedis.url });
  cleanup.push(async () => { floorClient.disconnect(); await floorRedis.destroy(); });
  targets.push({ name: 'bare + 1 Redis script', ...floor, redis: floorClient, rps: [], svcUs: [], redisUs: [], bad: 0 });
  // NOTE: last, as every ratio's denominator.
  targets.push({ name: 'bare', ...(await bareServer({})), rps: [], svcUs: [], redisUs: [], bad: 0 });
  try {
    // NOTE: a short warm-up each, so the first round does not pay JIT and script loading.
    for (const t of targets) await run(t.url);
    for (let r = 0; r < ROUNDS; r++) for (const t of targets) await measure(t);
    const b = median(targets.at(-1)!.rps);
    for (const t of targets) {
      const m = median(t.rps);
      console.log(`${t.name.padEnd(24)} ${m.toFixed(0).padStart(6)}/s (${t.rps.map((x) => x.toFixed(0)).join(', ')}) ratio ${(m / b).toFixed(3)}  svc CPU ${median(t.svcUs).toFixed(0)} µs/req` +
        (t.redis ? `, redis CPU ${median(t.redisUs).toFixed(0)} µs/req` : '') + `, ${t.bad} non-2xx/errors`);
    }
    const w = await run(all.url, 10, '?wait=true');
    console.log(`all roles PUT ?wait=true, 10 writers: p50 ${w.p50} ms, p99 ${w.p99} ms (${w.rps.toFixed(0)}/s)`);
  } finally {
    for (const c of cleanup) await c();
  }
}

await main();
process.exit(0);
