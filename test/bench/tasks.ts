// `make bench`, tasks part: claims/s (and the ratio to a bare Redis ZPOPMIN loop), lease-expiry-to-requeue p99,
// long-poll wake-up p99. Not a test: no assertions.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import pino from 'pino';
import { EventBus } from '../../store/event-bus.ts';
import { Keys } from '../../store/keys.ts';
import { SessionStore } from '../../store/session-store.ts';
import { SessionKeys } from '../../runtime/sessions/keys.ts';
import { TaskStore } from '../../store/task-store.ts';
import { maxScoreFor } from '../../runtime/tasks/records.ts';
import { TaskService } from '../../runtime/tasks/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { ServiceProcess, startBare } from '../helpers/process.ts';
import { Load, serviceArgv, settle, Window } from './probe.ts';
import { Client } from '../helpers/service.ts';
import { AgentHttp } from '../tasks/http.ts';

const CLAIMERS = Number(process.env.BENCH_CLAIMERS ?? 50);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const EXPIRIES = Number(process.env.BENCH_EXPIRIES ?? 200);
const WAKES = Number(process.env.BENCH_WAKES ?? 100);
const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };

async function seed(tasks: TaskService, ws: string, n: number, prefix: string) {
  for (let i = 0; i < n; i += 100) {
    await Promise.all(Array.from({ length: Math.min(100, n - i) }, (_, k) => tasks.create({ scope: 'workspace', workspace: ws, title: 'b', id: `${prefix}${i + k}`, auto_enqueue_on_ready: true }, { name: 'bench' })));
  }
}

async function main() {
  const redis = await new RedisServer().start();
  const root = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-tasks-'));
  const data = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-tasks-data-'));
  const svc = await new ServiceProcess({ REDIS_URL: redis.url, DATA_DIR: data, LOG_LEVEL: 'error' }, serviceArgv('tasks')).start();
  const api = new Client(svc.url);
  const conn = new Redis(redis.url);
  const store = new TaskStore(conn);
  const keys = new Keys();
  const tasks = new TaskService({ store, bus: new EventBus(conn, keys), logger: pino({ level: 'silent' }) });
  let agents: AgentHttp[] = [];
  try {
    const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
    const sessions: { id: string; agent_name: string }[] = [];
    for (let i = 0; i < CLAIMERS; i++) sessions.push((await api.post('/api/sessions', { workspace: ws.id })).body.session);
    // NOTE: the claimers call as agents do, with their session's bearer token. The bench's pooled agents keep theirs
    // inside the runtime, so it gives each session a token the way the runtime does: the token's key and the
    // session's token_hash.
    const sessionKeys = new SessionKeys(keys);
    const sessionStore = new SessionStore(conn as ConstructorParameters<typeof SessionStore>[0], keys);
    agents = await Promise.all(sessions.map(async (s) => {
      const token = `svc_st_bench${randomBytes(16).toString('hex')}`;
      const hash = createHash('sha256').update(token).digest('hex');
      await conn.set(sessionKeys.token(hash), s.id);
      await sessionStore.patch(s.id, { token_hash: hash });
      return new AgentHttp(svc.url, { Authorization: `Bearer ${token}` });
    }));

    // 1. claims/s through the API: 50 claimers, each claim-next then complete (one lease per session).
    await seed(tasks, ws.id, 30_000, 'c');
    // NOTE: the service's bus readers work through the seed's events first; that is not the pairs' work.
    await settle(svc.proc!.pid!);
    let claims = 0;
    let stop = false;
    const claimLoop = async (a: AgentHttp) => {
      while (!stop) {
        const c = await a.post('/api/agent/tasks/claim-next', {});
        if (c.status !== 200) throw new Error(`claim ${c.status} ${JSON.stringify(c.body)}`);
        claims++;
        await a.post(`/api/agent/tasks/${c.body.claim.run.id}/complete`, {});
      }
    };
    // NOTE: a short warm-up, so the measured window does not pay JIT and script loading.
    const warm = agents.map(claimLoop);
    await new Promise((r) => setTimeout(r, 1000));
    stop = true;
    await Promise.all(warm);
    stop = false;
    claims = 0;
    const win = await new Window(svc.proc!.pid!, conn).start();
    const load = new Load();
    const t0 = Date.now();
    const loops = agents.map(claimLoop);
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    stop = true;
    await Promise.all(loops);
    const loaded = load.end(claims);
    const apiClaims = claims / ((Date.now() - t0) / 1000);
    // NOTE: the bus readers (hooks, triggers, notifications) finish the window's events after the load stops; that
    // work belongs to the pairs, so CPU is read once the service has gone quiet.
    await settle(svc.proc!.pid!, 10_000);
    const perPair = await win.end(claims);

    // 1a. one claimer alone: what an agent polling for work meets (the round trips of its two requests), at a load
    // far from saturating the machine, where this VM's swings move the figures least.
    const solo = async (a: AgentHttp, claimed: (body: any) => string) => {
      const times: number[] = [];
      const t = Date.now();
      while (Date.now() - t < SECONDS * 1000) {
        const s0 = performance.now();
        const c = await a.post('/api/agent/tasks/claim-next', {});
        if (c.status >= 300) throw new Error(`claim ${c.status} ${JSON.stringify(c.body)}`);
        await a.post(`/api/agent/tasks/${claimed(c.body)}/complete`, {});
        times.push(performance.now() - s0);
      }
      return { rate: times.length / ((Date.now() - t) / 1000), times };
    };
    const soloWin = await new Window(svc.proc!.pid!, conn).start();
    const one = await solo(agents[0], (b) => b.claim.run.id);
    await settle(svc.proc!.pid!, 10_000);
    const onePair = await soloWin.end(one.times.length);

    // 1b. the floor of a pair without the service: the same client and loops against a bare node:http server that
    // stores each body with one small Redis script (two requests per pair).
    const floorRedis = await new RedisServer().start();
    const bare = await startBare({ REDIS_URL: floorRedis.url });
    const bareAgents = Array.from({ length: CLAIMERS }, () => new AgentHttp(bare.url));
    let barePairs = 0;
    stop = false;
    const bareLoop = async (a: AgentHttp) => {
      while (!stop) {
        await a.post('/api/agent/tasks/claim-next', {});
        await a.post('/api/agent/tasks/x/complete', {});
        barePairs++;
      }
    };
    const tb = Date.now();
    const bl = bareAgents.map(bareLoop);
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    stop = true;
    await Promise.all(bl);
    const bareRate = barePairs / ((Date.now() - tb) / 1000);
    const bareOne = await solo(bareAgents[0], () => 'x');
    for (const a of bareAgents) a.close();
    bare.stop();
    await floorRedis.destroy();
    console.log(`Tasks (one service process, every role; ${CLAIMERS} concurrent claimers; ${os.cpus().length} cores):`);
    console.log(`  claims/s through the API (claim-next + complete per claim, keep-alive node:http): ${apiClaims.toFixed(0)}`);
    console.log(`  CPU per pair: service ${perPair.svcUs.toFixed(0)} µs, Redis ${perPair.redisUs.toFixed(0)} µs`);
    console.log(`  Redis commands per pair (calls, µs inside Redis): ${perPair.calls}`);
    console.log(`  service system calls per pair: ${perPair.syscalls}`);
    console.log(`  during the load: ${loaded.busyCores.toFixed(2)} of ${os.cpus().length} cores busy; the claimers (this process) ${loaded.clientUs.toFixed(0)} µs of CPU per pair`);
    console.log(`  floor: bare node:http + 1 Redis script per request, same client: ${bareRate.toFixed(0)} pairs/s; ratio API / floor ${(apiClaims / bareRate).toFixed(3)}`);
    console.log(`  one claimer alone: ${one.rate.toFixed(0)} pairs/s, a pair p50 ${pct(one.times, 50).toFixed(2)} ms, p99 ${pct(one.times, 99).toFixed(2)} ms; CPU per pair: service ${onePair.svcUs.toFixed(0)} µs, Redis ${onePair.redisUs.toFixed(0)} µs (floor, one claimer: ${bareOne.rate.toFixed(0)} pairs/s, p50 ${pct(bareOne.times, 50).toFixed(2)} ms)`);
    if (process.env.BENCH_TASKS_API_ONLY === '1') return;

    // 2. the claim script alone (same client process, ioredis, 50 concurrent loops), then a bare ZPOPMIN loop.
    await conn.del(store.keys.queue(`ws:${ws.id}`));
    await seed(tasks, ws.id, 30_000, 'l');
    let scriptClaims = 0;
    stop = false;
    let sid = 0;
    const scriptLoop = async () => {
      while (!stop) {
        const out = await store.claim({ queue: store.keys.queue(`ws:${ws.id}`), nowMs: Date.now(), sessionId: `bench-${sid++}`, capabilities: [], channel: '', maxScore: maxScoreFor(undefined), leaseMs: 3_600_000, tokenHash: 'sha256:x', idemKey: '', claimedBy: '{}', scanLimit: 500 });
        if (out.kind === 'none') { stop = true; break; }
        if (out.kind !== 'ok') throw new Error(`script claim: ${out.kind}`);
        scriptClaims++;
      }
    };
    const t1 = Date.now();
    const sl = Promise.all(Array.from({ length: CLAIMERS }, scriptLoop));
    await Promise.race([sl, new Promise((r) => setTimeout(r, SECONDS * 1000))]);
    stop = true;
    await sl;
    const scriptRate = scriptClaims / ((Date.now() - t1) / 1000);

    const zkey = 'bench:{tasks}:zpop';
    for (let i = 0; i < 400_000; i += 10_000) await conn.zadd(zkey, ...Array.from({ length: 10_000 }, (_, k) => [i + k, `m${i + k}`]).flat());
    let pops = 0;
    stop = false;
    const popLoop = async () => { while (!stop) { await conn.zpopmin(zkey); pops++; } };
    const t2 = Date.now();
    const pl = Array.from({ length: CLAIMERS }, popLoop);
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    stop = true;
    await Promise.all(pl);
    const popRate = pops / ((Date.now() - t2) / 1000);

    // 3. lease expiry → requeue: EXPIRIES runs claimed with a 1 s lease by as many (fake) holders; the service's
    // controller requeues them; latency = task.run_lease_expired event time − lease deadline.
    await conn.del(store.keys.queue(`ws:${ws.id}`));
    await seed(tasks, ws.id, EXPIRIES, 'e');
    const deadlines = new Map<string, number>();
    for (let i = 0; i < EXPIRIES; i++) {
      const now = Date.now() + (i % 20) * 50;
      const out = await store.claim({ queue: store.keys.queue(`ws:${ws.id}`), nowMs: now, sessionId: `exp-${i}`, capabilities: [], channel: '', maxScore: '+inf', leaseMs: 1000, tokenHash: 'sha256:x', idemKey: '', claimedBy: '{}', scanLimit: 500 });
      if (out.kind === 'ok') deadlines.set(out.runId, now + 1000);
    }
    await new Promise((r) => setTimeout(r, 4000));
    const events = await new EventBus(conn, keys).latest(5000);
    const lags = events.filter((e) => e.type === 'task.run_lease_expired' && deadlines.has(String(e.data.run_id))).map((e) => Date.parse(e.timestamp) - deadlines.get(String(e.data.run_id))!);

    // 4. long-poll wake-up: a claimer waits (wait:true); a run is enqueued; time from the enqueue to the claim.
    await conn.del(store.keys.queue(`ws:${ws.id}`));
    const wakes: number[] = [];
    for (let i = 0; i < WAKES; i++) {
      const a = agents[i % agents.length];
      const waiting = a.post('/api/agent/tasks/claim-next', { wait: true, wait_seconds: 10 });
      await new Promise((r) => setTimeout(r, 30));
      const start = performance.now();
      await tasks.create({ scope: 'workspace', workspace: ws.id, title: 'w', id: `w${i}`, auto_enqueue_on_ready: true }, { name: 'bench' });
      const enqueued = performance.now();
      const res = await waiting;
      const end = performance.now();
      if (res.status !== 200) throw new Error(`wake claim ${res.status}`);
      wakes.push(end - enqueued < 0 ? 0 : end - start);
      await a.post(`/api/agent/tasks/${res.body.claim.run.id}/complete`, {});
    }

    console.log(`  claim script alone (ioredis, 50 loops):      ${scriptRate.toFixed(0)} claims/s`);
    console.log(`  bare Redis ZPOPMIN loop (same client):       ${popRate.toFixed(0)} pops/s`);
    console.log(`  ratio API claims / ZPOPMIN: ${(apiClaims / popRate).toFixed(3)}; claim script / ZPOPMIN: ${(scriptRate / popRate).toFixed(3)}`);
    console.log(`  lease expiry → requeue (${lags.length}/${EXPIRIES} leases): p50 ${pct(lags, 50)} ms, p99 ${pct(lags, 99)} ms, max ${Math.max(...lags)} ms (target p99 ≤ 2000)`);
    console.log(`  long-poll wake-up after enqueue (${wakes.length} wakes, enqueue commit included): p50 ${pct(wakes, 50).toFixed(1)} ms, p99 ${pct(wakes, 99).toFixed(1)} ms (target p99 ≤ 20)`);
  } finally {
    for (const a of agents) a.close();
    conn.disconnect();
    await svc.kill(process.env.BENCH_PROFILE ? 'SIGTERM' : 'SIGKILL');
    await redis.destroy();
    rmSync(root, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  }
}

main().catch((err) => { console.error(err); process.exit(1); });
