// `make bench`, loops part: scheduling overhead per node on a 100-node chain of transform nodes (target p50 ≤ 5 ms),
// 1,000 concurrent runs of 10 transform nodes (nodes/s, Redis commands per node from INFO commandstats), and a fan-out
// of 64 run-agent nodes (wall time, peak RSS of the service's process tree: the service and its agent processes).
// Not a test: no assertions. The service runs as its own process (compiled when `make build` made dist/, else tsx).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { Keys } from '../../store/keys.ts';
import { LoopKeys } from '../../store/loop-store.ts';
import { childPids, rssKiB } from '../helpers/agent-processes.ts';
import { productionArgv, ServiceProcess } from '../helpers/process.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client } from '../helpers/service.ts';

const CHAIN = Number(process.env.BENCH_LOOP_CHAIN ?? 100);
const CHAINS = Number(process.env.BENCH_LOOP_CHAINS ?? 3);
const RUNS = Number(process.env.BENCH_LOOP_RUNS ?? 1000);
const WIDTH = Number(process.env.BENCH_LOOP_WIDTH ?? 64);
const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };
const TERMINAL = ['done', 'no-op', 'blocked', 'failed', 'exhausted', 'stalled'];

/** treeRss sums the RSS of a process and all its descendants, in KiB. */
function treeRss(pid: number): number {
  let total = rssKiB(pid);
  for (const c of childPids(pid)) total += treeRss(c);
  return total;
}

/** commandCalls reads `calls` of every command of INFO commandstats. */
async function commandCalls(r: Redis): Promise<Map<string, number>> {
  const info = await r.info('commandstats');
  return new Map([...info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].map((m) => [m[1], Number(m[2])]));
}

/** callsSince is the commands run since `before`: the total and the busiest few. */
async function callsSince(r: Redis, before: Map<string, number>): Promise<{ total: number; top: string }> {
  const now = await commandCalls(r);
  const delta = [...now].map(([k, v]) => [k, v - (before.get(k) ?? 0)] as const).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
  return { total: delta.reduce((a, [, v]) => a + v, 0), top: delta.slice(0, 6).map(([k, v]) => `${k} ${v}`).join(', ') };
}

async function main() {
  const redis = await new RedisServer().start();
  const root = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-loops-'));
  const data = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-loops-data-'));
  const svc = await new ServiceProcess({ REDIS_URL: redis.url, DATA_DIR: data, LOG_LEVEL: 'error', LOOP_CONCURRENCY: '64' }, productionArgv()).start();
  const api = new Client(svc.url);
  const conn = new Redis(redis.url);
  const keys = new LoopKeys(new Keys().prefix);
  const statuses = async (ids: string[]) => {
    const pipe = conn.pipeline();
    for (const id of ids) pipe.hget(keys.run(id), 'status');
    return ((await pipe.exec()) ?? []).map(([, s]) => String(s ?? ''));
  };
  const waitAll = async (ids: string[], timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const st = await statuses(ids);
      const left = st.filter((s) => !TERMINAL.includes(s)).length;
      if (!left) return st;
      if (Date.now() > deadline) throw new Error(`${left} of ${ids.length} runs still live`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const define = async (ws: string, def: Record<string, unknown>) => {
    const res = await api.post(`/api/workspaces/${ws}/loops`, { definition: def });
    if (res.status !== 201) throw new Error(`define: ${res.status} ${JSON.stringify(res.body)}`);
  };
  const startRun = async (ws: string, name: string, inputs: Record<string, unknown> = {}) => {
    const res = await api.post(`/api/workspaces/${ws}/loops/${name}/run`, { inputs });
    if (res.status !== 201) throw new Error(`start: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.run.id as string;
  };
  const transform = (id: string, deps: string[]) => ({ id, kind: 'transform', depends_on: deps, params: { output: { n: id } } });
  try {
    const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace.id as string;

    // 1. Scheduling overhead: the time between one node's end and the next one's end in a chain of transforms
    // (a transform itself does no work, so this is the engine's own cost: job, CAS start, CAS end, plan, enqueue).
    await define(ws, { meta: { name: 'chain' }, graph: { nodes: Array.from({ length: CHAIN }, (_, i) => transform(`n${i}`, i ? [`n${i - 1}`] : [])) } });
    await waitAll([await startRun(ws, 'chain')], 60_000);
    const gaps: number[] = [];
    let chainWall = 0;
    for (let c = 0; c < CHAINS; c++) {
      const id = await startRun(ws, 'chain');
      await waitAll([id], 120_000);
      const rows = (await conn.xrange(keys.events(id), '-', '+')) as [string, string[]][];
      const ends = rows.map(([, f]) => ({ kind: f[f.indexOf('k') + 1], at: Date.parse(f[f.indexOf('t') + 1]) })).filter((e) => e.kind === 'node_succeeded').map((e) => e.at);
      for (let i = 1; i < ends.length; i++) gaps.push(ends[i] - ends[i - 1]);
      chainWall += ends.at(-1)! - ends[0];
    }
    console.log(`Loops: ${CHAIN}-node transform chain, scheduling overhead per node p50 ${pct(gaps, 50)} ms, p99 ${pct(gaps, 99)} ms, mean ${(chainWall / (CHAINS * (CHAIN - 1))).toFixed(2)} ms (${CHAINS} chains; target p50 ≤ 5 ms)`);

    // 2. Throughput: RUNS runs of 10 transform nodes started at once.
    await define(ws, { meta: { name: 'ten' }, graph: { nodes: Array.from({ length: 10 }, (_, i) => transform(`n${i}`, i ? [`n${i - 1}`] : [])) } });
    const calls0 = await commandCalls(conn);
    const t0 = Date.now();
    const ids: string[] = [];
    for (let i = 0; i < RUNS; i += 50) ids.push(...(await Promise.all(Array.from({ length: Math.min(50, RUNS - i) }, () => startRun(ws, 'ten')))));
    const started = Date.now() - t0;
    const st = await waitAll(ids, 600_000);
    const wall = (Date.now() - t0) / 1000;
    const { total: calls, top } = await callsSince(conn, calls0);
    const done = st.filter((s) => s === 'done').length;
    console.log(`Loops: ${RUNS} concurrent runs × 10 transform nodes: ${done} done in ${wall.toFixed(1)} s (starts took ${(started / 1000).toFixed(1)} s), ${Math.round((RUNS * 10) / wall)} nodes/s, ${(calls / (RUNS * 10)).toFixed(1)} Redis commands per node (INFO commandstats, starts and reads included; busiest: ${top})`);

    // 3. Fan-out of WIDTH run-agent nodes (the scripted agent): wall time and the process tree's peak RSS.
    await define(ws, {
      meta: { name: 'fan' }, inputs: { items: { type: 'array', required: true } },
      graph: { nodes: [
        { id: 'split', kind: 'fan-out', collection: '{{ .inputs.items }}', max_fan_out: WIDTH },
        { id: 'work', kind: 'run-agent', depends_on: ['split'], prompt: 'review {{ .item }}\n/usage 100 20' },
        { id: 'gather', kind: 'collect', depends_on: ['work'] },
      ] },
    });
    const baseRss = treeRss(svc.proc!.pid!);
    let peak = baseRss;
    const sampler = setInterval(() => { peak = Math.max(peak, treeRss(svc.proc!.pid!)); }, 100);
    const f0 = Date.now();
    const fan = await startRun(ws, 'fan', { items: Array.from({ length: WIDTH }, (_, i) => `file-${i}`) });
    const [fanStatus] = await waitAll([fan], 300_000);
    const fanWall = (Date.now() - f0) / 1000;
    clearInterval(sampler);
    const agents = new Set<number>();
    const tokens = Number(await conn.hget(keys.run(fan), 'tokens_used'));
    for (const c of childPids(svc.proc!.pid!)) agents.add(c);
    console.log(`Loops: fan-out of ${WIDTH} run-agent nodes: ${fanStatus} in ${fanWall.toFixed(1)} s, ${tokens} tokens counted, peak RSS of the process tree ${(peak / 1024).toFixed(0)} MiB (${(baseRss / 1024).toFixed(0)} MiB before; ${agents.size} agent processes after)`);
  } finally {
    conn.disconnect();
    await svc.kill('SIGTERM');
    await redis.stop();
    rmSync(root, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  }
}

await main();
