// `make bench`, automation part: firing lag of scheduled jobs. Not a test: no assertions.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { RedisServer } from '../helpers/redis-server.ts';
import { productionArgv, ServiceProcess } from '../helpers/process.ts';
import { Client } from '../helpers/service.ts';
import { serviceArgv, Window } from './probe.ts';

const JOBS = Number(process.env.BENCH_JOBS ?? 100);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const WARMUP_MS = 5_000;
const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };

/**
 * floor runs the same firings without the service (test/bench/bare-automation.ts, in its own process on its own
 * Redis, the same compiled scripted agent): BullMQ job schedulers, a worker, `session/new` and a prompt on pooled
 * agent processes. Its CPU is the bare process's and its Redis's, as the service's figure is the service's and its.
 */
async function floor() {
  const server = await new RedisServer().start();
  const root = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-bare-auto-'));
  // NOTE: the agent the service runs: compiled next to a compiled service, from sources under tsx otherwise.
  const [main] = productionArgv();
  const agent = main.endsWith('.js') ? [path.join(path.dirname(main), 'agents/scripted.js')] : ['--import', import.meta.resolve('tsx'), path.resolve('runtime/agents/scripted.ts')];
  const proc = spawn(process.execPath, ['--import', 'tsx', path.resolve('test/bench/bare-automation.ts')], {
    env: { ...process.env, REDIS_URL: server.url, JOBS: String(JOBS), AGENT_ARGV: JSON.stringify(agent), WORKSPACE: root, STATE_DIR: path.join(root, '.scripted') },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  try {
    await lines.next();
    const began = Date.now();
    await new Promise((r) => setTimeout(r, WARMUP_MS));
    const probe = server.client();
    const win = await new Window(proc.pid!, probe).start();
    await new Promise((r) => setTimeout(r, SECONDS * 1000 - WARMUP_MS));
    proc.stdin!.write('report\n');
    const ticks = (JSON.parse((await lines.next()).value) as [number, number, number][]).filter(([due]) => due >= began + WARMUP_MS);
    const per = await win.end(Math.max(1, ticks.length));
    probe.disconnect();
    return { ticks, per };
  } finally {
    proc.kill('SIGKILL');
    await once(proc, 'exit').catch(() => undefined);
    await server.destroy();
    rmSync(root, { recursive: true, force: true });
  }
}

/**
 * JOBS automation jobs `every 1s` on one service (every role in one process, the scripted agent): for each tick,
 * the lag from its scheduled time to the run's start (the worker took it) and to its session started
 * (`automation.job.post_fire` on the bus), after a warm-up.
 */
async function main() {
  const redis = await new RedisServer().start();
  const root = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-auto-'));
  const data = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-auto-data-'));
  const svc = await new ServiceProcess({ REDIS_URL: redis.url, DATA_DIR: data, LOG_LEVEL: 'error' }, serviceArgv('automation')).start();
  const api = new Client(svc.url);
  try {
    const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
    const began = Date.now();
    await Promise.all(Array.from({ length: JOBS }, (_, i) => api.put(`/api/resources/automation.job/bench-${i}`, {
      scope: { kind: 'workspace', id: ws.id }, expected_version: 0,
      spec: { name: `bench-${i}`, agent_name: 'scripted', prompt: 'tick', enabled: true, schedule: { mode: 'every', interval: '1s' }, fire_limit: { max: 100_000, window: '1h' } },
    })));
    await new Promise((r) => setTimeout(r, WARMUP_MS));
    const probe = redis.client();
    const win = await new Window(svc.proc!.pid!, probe).start();
    const winStart = Date.now();
    await new Promise((r) => setTimeout(r, SECONDS * 1000 - WARMUP_MS));
    const winEnd = Date.now();
    const firedInWindow = async () => (await probe.xrange('svc:{bus}:events', '-', '+')).filter(([, f]) => f[1].includes('"automation.job.post_fire"') && Date.parse(JSON.parse(f[1]).timestamp) >= winStart && Date.parse(JSON.parse(f[1]).timestamp) < winEnd).length;
    const per = await win.end(Math.max(1, await firedInWindow()));
    probe.disconnect();
    await Promise.all(Array.from({ length: JOBS }, (_, i) => api.put(`/api/resources/automation.job/bench-${i}`, {
      scope: { kind: 'workspace', id: ws.id }, expected_version: 1,
      spec: { name: `bench-${i}`, agent_name: 'scripted', prompt: 'tick', enabled: false, schedule: { mode: 'every', interval: '1s' }, fire_limit: { max: 100_000, window: '1h' } },
    })));
    await new Promise((r) => setTimeout(r, 3000));
    const c = redis.client();
    const rows = await c.xrange('svc:{bus}:events', '-', '+');
    c.disconnect();
    const events = rows.map(([, f]) => JSON.parse(f[1]));
    const from = began + WARMUP_MS;
    const started = events.filter((e) => e.type === 'automation.job.pre_fire' && Date.parse(e.data.scheduled_at) >= from);
    const sessions = events.filter((e) => e.type === 'automation.job.post_fire' && Date.parse(e.data.scheduled_at) >= from);
    const runLag = started.map((e) => Date.parse(e.timestamp) - Date.parse(e.data.scheduled_at));
    const sessionLag = sessions.map((e) => Date.parse(e.timestamp) - Date.parse(e.data.scheduled_at));
    // NOTE: where the lag goes, per firing, from the bus's own timestamps: the worker's wait, the run's gate and
    // records, the session start (session.pre_create → session.post_create), and the rest up to post_fire.
    const at = (type: string, key: (e: { session_id: string; data: Record<string, string> }) => string) => new Map(events.filter((e) => e.type === type).map((e) => [key(e), Date.parse(e.timestamp)]));
    const preFire = at('automation.job.pre_fire', (e) => e.data.run_id);
    const preCreate = at('session.pre_create', (e) => e.session_id);
    const postCreate = at('session.post_create', (e) => e.session_id);
    const stages = sessions.flatMap((e) => {
      const [f, c0, c1] = [preFire.get(e.data.run_id), preCreate.get(e.session_id), postCreate.get(e.session_id)];
      return f && c0 && c1 ? [[f - Date.parse(e.data.scheduled_at), c0 - f, c1 - c0, Date.parse(e.timestamp) - c1]] : [];
    });
    const stage = (i: number) => `p50 ${pct(stages.map((s) => s[i]), 50)} / p99 ${pct(stages.map((s) => s[i]), 99)} ms`;
    const completed = events.filter((e) => e.type === 'automation.run.completed').length;
    const failed = events.filter((e) => e.type === 'automation.run.failed').length;
    const window = (SECONDS * 1000 - WARMUP_MS) / 1000;
    console.log(`automation: ${JOBS} jobs every 1s for ${SECONDS}s (lags after a ${WARMUP_MS / 1000}s warm-up; ${os.cpus().length} cores)`);
    console.log(`  ticks fired          ${sessions.length} (${(sessions.length / window).toFixed(0)}/s; ideal ${JOBS}/s); runs completed ${completed}, failed ${failed}`);
    console.log(`  scheduled → run start      p50 ${pct(runLag, 50)} ms  p99 ${pct(runLag, 99)} ms  max ${Math.max(...runLag)} ms`);
    console.log(`  CPU per firing (service, every role; Redis): ${per.svcUs.toFixed(0)} µs; ${per.redisUs.toFixed(0)} µs; Redis commands per firing: ${per.calls}; system calls per firing: ${per.syscalls}`);
    console.log(`  scheduled → session started p50 ${pct(sessionLag, 50)} ms  p99 ${pct(sessionLag, 99)} ms  max ${Math.max(...sessionLag)} ms  (target p99 ≤ 250 ms)`);
    console.log(`  where it goes (${stages.length} firings): worker took it ${stage(0)}; → session.pre_create ${stage(1)}; session start (pre_create → post_create) ${stage(2)}; → post_fire ${stage(3)}`);
  } finally {
    await svc.kill(process.env.BENCH_PROFILE ? 'SIGTERM' : 'SIGKILL');
    await redis.destroy();
    rmSync(root, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  }
  const bare = await floor();
  const run = bare.ticks.map((t) => t[1]);
  const session = bare.ticks.map((t) => t[2]);
  console.log(`  floor without the service (test/bench/bare-automation.ts: BullMQ schedulers, worker, session/new + prompt on pooled scripted agents), same ${SECONDS}s:`);
  console.log(`    ticks ${bare.ticks.length} (${(bare.ticks.length / ((SECONDS * 1000 - WARMUP_MS) / 1000)).toFixed(0)}/s); scheduled → worker p50 ${pct(run, 50)} ms p99 ${pct(run, 99)} ms; → session started p50 ${pct(session, 50)} ms p99 ${pct(session, 99)} ms`);
  console.log(`    CPU per firing (bare process; Redis): ${bare.per.svcUs.toFixed(0)} µs; ${bare.per.redisUs.toFixed(0)} µs; Redis commands per firing: ${bare.per.calls}; system calls per firing: ${bare.per.syscalls}`);
}

await main();
