import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import pino from 'pino';
import { EventBus } from '../../store/event-bus.ts';
import { Keys } from '../../store/keys.ts';
import { TaskStore } from '../../store/task-store.ts';
import { runFrom } from '../../runtime/tasks/records.ts';
import { TaskService } from '../../runtime/tasks/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { ServiceProcess } from '../helpers/process.ts';
import { Client, eventually } from '../helpers/service.ts';
import { AgentHttp } from '../tasks/http.ts';

// NOTE: the scale (50 sessions × 4 processes × 5,000 runs) is the default; it takes about 30 s on a shared
// 2-core machine. TASKS_FAULT_RUNS / TASKS_FAULT_SESSIONS change it.
const RUNS = Number(process.env.TASKS_FAULT_RUNS ?? 5000);
const SESSIONS = Number(process.env.TASKS_FAULT_SESSIONS ?? 50);
const APIS = 4;

describe(`Tasks under a SIGKILL: ${SESSIONS} agent sessions over ${APIS} api+controller processes claim ${RUNS} runs`, function () {
  this.timeout(300_000);
  const redis = new RedisServer();
  const root = mkdtempSync(path.join(os.tmpdir(), 'svc-tasks-fault-'));
  const data = mkdtempSync(path.join(os.tmpdir(), 'svc-tasks-fault-data-'));
  const procs: ServiceProcess[] = [];
  let conn: Redis;

  before(async () => { await redis.start(); });
  after(async () => {
    for (const p of procs) await p.kill('SIGKILL');
    conn?.disconnect();
    await redis.destroy();
    rmSync(root, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  });

  it('completes every run exactly once and loses none; the killed process\'s leases expire and are re-run', async () => {
    const env = { REDIS_URL: redis.url, DATA_DIR: data };
    // one runtime process hosts the sessions (it is not killed); the api+controller processes serve and recover
    const runtime = await new ServiceProcess({ ...env, SVC_ROLES: 'runtime' }).start();
    procs.push(runtime);
    const apis = await Promise.all(Array.from({ length: APIS }, () => new ServiceProcess({ ...env, SVC_ROLES: 'api,controller' }).start()));
    procs.push(...apis);
    const admin = new Client(apis[1].url);
    const ws = (await admin.post('/api/workspaces', { root_dir: root })).body.workspace;
    const sessions: { id: string; agent_name: string }[] = [];
    for (let i = 0; i < SESSIONS; i++) {
      const s = await admin.post('/api/sessions', { workspace: ws.id });
      expect(s.status, JSON.stringify(s.body)).to.equal(201);
      sessions.push(s.body.session);
    }

    // Seed the runs in-process (the same service code, on the same Redis): one task with one queued run each.
    conn = new Redis(redis.url);
    const store = new TaskStore(conn);
    const tasks = new TaskService({ store, bus: new EventBus(conn, new Keys()), logger: pino({ level: 'silent' }) });
    for (let i = 0; i < RUNS; i += 50) {
      await Promise.all(Array.from({ length: Math.min(50, RUNS - i) }, (_, n) => tasks.create({ scope: 'workspace', workspace: ws.id, title: `t${i + n}`, id: `t${i + n}`, auto_enqueue_on_ready: true }, { name: 'seed' })));
    }

    // Claimers: session i talks to process i % APIS; those of the killed process die with it (their held lease is lost).
    const acked = new Map<string, number>();
    let killed = -1;
    let done = 0;
    const claimer = async (i: number) => {
      const proc = i % APIS;
      const client = new AgentHttp(apis[proc].url, { 'X-SVC-Session-ID': sessions[i].id, 'X-SVC-Agent': sessions[i].agent_name });
      try { await work(proc, client, i); } finally { client.close(); }
    };
    const work = async (proc: number, client: AgentHttp, i: number) => {
      const call = (p: string, body: unknown) => client.post(`/api/agent/tasks/${p}`, body);
      for (;;) {
        if (killed === proc) return;
        let res;
        try {
          res = await call('claim-next', { lease_seconds: 2 });
        } catch {
          if (killed === proc) return;
          throw new Error('a claim failed on a live process');
        }
        if (res.status === 204) {
          if (done >= RUNS) return;
          // NOTE: runs of a dead claimer come back after their lease expires: wait for them with a long-poll.
          try { res = await call('claim-next', { lease_seconds: 2, wait: true, wait_seconds: 3 }); } catch { return; }
          if (res.status === 204) {
            if ((await conn.zcard(store.keys.leases)) === 0 && (await conn.zcard(store.keys.queue(`ws:${ws.id}`))) === 0) return;
            continue;
          }
        }
        if (res.status === 409) { await new Promise((r) => setTimeout(r, 200)); continue; }
        expect(res.status, JSON.stringify(res.body)).to.equal(200);
        const runId = res.body.claim.run.id as string;
        if (Math.random() < 0.2) await new Promise((r) => setTimeout(r, 5));
        let c;
        try { c = await call(`${runId}/complete`, { result: { by: sessions[i].id } }); } catch { return; }
        if (c.status === 200) {
          acked.set(runId, (acked.get(runId) ?? 0) + 1);
          done++;
        } else expect(c.status, JSON.stringify(c.body)).to.equal(409);
      }
    };
    const started = Date.now();
    const workers = Array.from({ length: SESSIONS }, (_, i) => claimer(i));
    await eventually(async () => expect(done).to.be.greaterThan(RUNS / 3), 120_000, 20);
    killed = 0;
    await apis[0].kill('SIGKILL');
    await Promise.all(workers);
    const seconds = (Date.now() - started) / 1000;

    // Every run completed (read from Redis), none acknowledged twice, no run completed twice on the bus.
    const ids = await conn.zrange(store.keys.runs('t0'), 0, -1);
    expect(ids).to.have.length(1);
    const all: string[] = [];
    for (let i = 0; i < RUNS; i++) all.push(...(await conn.zrange(store.keys.runs(`t${i}`), 0, -1)));
    expect(all).to.have.length(RUNS);
    const runs = (await store.readRuns(all)).map((h) => runFrom(h!));
    const notDone = runs.filter((r) => r.status !== 'completed');
    expect(notDone.map((r) => `${r.id}:${r.status}`)).to.deep.equal([]);
    expect([...acked.values()].every((n) => n === 1)).to.equal(true);
    const events = await new EventBus(conn, new Keys()).latest(100_000);
    const completedEv = new Map<string, number>();
    for (const e of events) if (e.type === 'task.run_completed') completedEv.set(String(e.data.run_id), (completedEv.get(String(e.data.run_id)) ?? 0) + 1);
    expect([...completedEv.values()].filter((n) => n > 1)).to.deep.equal([]);
    const expired = events.filter((e) => e.type === 'task.run_lease_expired').length;
    console.log(`      ${RUNS} runs, ${SESSIONS} sessions, ${APIS} processes (one SIGKILLed): ${seconds.toFixed(1)} s, ${acked.size} acknowledged completions, ${expired} leases expired and re-run`);
    expect(expired, 'the killed claimers\' leases expired and were requeued').to.be.greaterThan(0);
    expect(await conn.zcard(store.keys.leases)).to.equal(0);
  });
});
