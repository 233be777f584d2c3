// PUT ?wait=true latency against its floor, the same create without the wait: an idle run (one writer, one write
// after another) and a run of 10 concurrent writers, each BENCH_RUNS times on one service (every role). Prints p50
// and p99 of each. Not a test: no assertions.
//   node --import tsx test/bench/wait-write.ts   (env BENCH_RUNS, BENCH_WRITES, BENCH_SECONDS; BENCH_TSX=1: the sources;
//   BENCH_FSYNC=always: Redis fsyncs every write, as `make bench`'s first service and `make run`'s embedded Redis)
import autocannon from 'autocannon';
import type { Redis } from 'ioredis';
import { RedisServer } from '../helpers/redis-server.ts';
import { productionArgv, ServiceProcess } from '../helpers/process.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const WRITES = Number(process.env.BENCH_WRITES ?? 300);
const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
// NOTE: agents are reconciled in the relay's pages (BatchReconciler); BENCH_KIND=hook.binding measures a kind whose
// reconciles go through its BullMQ queue (ReconcileWorker).
const KIND = process.env.BENCH_KIND ?? 'agent';
const spec = (i: number) => KIND === 'hook.binding' ? { name: `h${i}`, event: 'session.post_stop' } : { name: `agent-${i}`, prompt: 'You help with the benchmark.', tools: ['svc__read'], model: 'm' };
const body = (i: number) => JSON.stringify({ scope: { kind: 'global' }, spec: spec(i), expected_version: 0 });

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))];
const fmt = (xs: number[]) => `p50 ${quantile(xs, 0.5).toFixed(1)} ms, p99 ${quantile(xs, 0.99).toFixed(1)} ms, max ${Math.max(...xs).toFixed(1)} ms`;

let seq = 0;

/** idle writes WRITES records one after another and returns each write's latency in ms. */
async function idle(base: string, query: string): Promise<number[]> {
  const tag = `i${seq++}x`;
  const out: number[] = [];
  for (let i = 0; i < WRITES; i++) {
    const t0 = performance.now();
    const res = await fetch(`${base}/api/resources/${KIND}/${tag}${i}${query}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: body(i) });
    await res.arrayBuffer();
    out.push(performance.now() - t0);
    if (res.status !== 201 || (query && res.headers.get('x-svc-reconcile') !== 'done')) throw new Error(`write ${i}: ${res.status} ${res.headers.get('x-svc-reconcile')}`);
  }
  return out;
}

/** writers runs 10 concurrent writers for DURATION seconds (autocannon). */
async function writers(base: string, query: string) {
  const tag = `w${seq++}x`;
  let n = 0;
  const r = await autocannon({
    url: base, connections: 10, duration: DURATION, pipelining: 1,
    requests: [{ method: 'PUT', setupRequest: (req) => { const i = n++; return { ...req, path: `/api/resources/${KIND}/${tag}${i}${query}`, headers: { 'content-type': 'application/json' }, body: body(i) }; } }],
  });
  return `p50 ${r.latency.p50} ms, p99 ${r.latency.p99} ms, max ${r.latency.max} ms (${(r['2xx'] / DURATION).toFixed(0)}/s, ${r.non2xx + r.errors} non-2xx/errors)`;
}

/** relayLag is how many change-log entries the change relay has not read yet (XINFO GROUPS `lag`, Redis 7). */
async function relayLag(client: Redis): Promise<string> {
  const groups = (await client.xinfo('GROUPS', 'svc:{r}:changes')) as unknown[][];
  const relay = groups.map((g) => Object.fromEntries(Array.from({ length: g.length / 2 }, (_, i) => [g[2 * i], g[2 * i + 1]]))).find((g) => g.name === 'relay');
  return String(relay?.lag ?? '?');
}

const redis = await new RedisServer(process.env.BENCH_FSYNC === 'always' ? 'always' : 'everysec').start();
const svc = await new ServiceProcess({ REDIS_URL: redis.url, LOG_LEVEL: 'warn' }, productionArgv()).start();
console.log(`service: node ${productionArgv().join(' ')}; kind ${KIND}`);
const client = redis.client();
try {
  // NOTE: a warm-up, so the first run does not pay JIT and script loading.
  await idle(svc.url, '?wait=true');
  for (let r = 1; r <= RUNS; r++) {
    console.log(`run ${r}: idle ${WRITES} writes: wait ${fmt(await idle(svc.url, '?wait=true'))}; plain ${fmt(await idle(svc.url, ''))}`);
    const wait = await writers(svc.url, '?wait=true');
    const plain = await writers(svc.url, '');
    // NOTE: what the relay has left to read when the plain writers stop is what the next ?wait=true write waits behind.
    console.log(`run ${r}: 10 writers: wait ${wait}; plain ${plain}; relay behind by ${await relayLag(client)} changes`);
  }
} finally {
  client.disconnect();
  await svc.kill('SIGTERM');
  await redis.destroy();
}
process.exit(0);
