// `make bench`, session density part: prints figures from one run on this machine. Not a test: no assertions.
// Runs the compiled service (`make build`: node dist/runtime/main.js), as production does, so the built-in agent
// processes start without a TypeScript loader. Usage: node --import tsx test/bench/density.ts [N sessions, default 1000]
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { client, methods, ndJsonStream, PROTOCOL_VERSION } from '@agentclientprotocol/sdk';
import { childPids, rssKiB } from '../helpers/agent-processes.ts';
import { KeepAliveClient } from '../helpers/keep-alive.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { ServiceProcess } from '../helpers/process.ts';

const N = Number(process.argv[2] ?? 1000);
const WAKE = 100;
const DIST_MAIN = 'dist/runtime/main.js';
const DIST_AGENT = 'dist/runtime/agents/scripted.js';
const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };
const ms = (x: number) => `${x.toFixed(1)} ms`;
const mib = (kib: number) => `${(kib / 1024).toFixed(0)} MiB`;

/** tree is a process and all its descendants (agents run in their own process groups, but stay children). */
function tree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) out.push(...childPids(out[i]));
  return out;
}

/** agentRss starts one agent process the given way, completes the ACP handshake and one session, and reads its RSS. */
async function agentRss(args: string[]): Promise<number> {
  const agent = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const conn = client({ name: 'bench' }).onNotification(methods.client.session.update, () => undefined)
    .connect(ndJsonStream(Writable.toWeb(agent.stdin!) as WritableStream<Uint8Array>, Readable.toWeb(agent.stdout!) as ReadableStream<Uint8Array>));
  await conn.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} });
  const { sessionId } = await conn.agent.request(methods.agent.session.new, { cwd: os.tmpdir(), mcpServers: [] });
  await conn.agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'hello' }] });
  const kib = rssKiB(agent.pid!);
  agent.kill('SIGKILL');
  return kib;
}

async function withService<T>(env: Record<string, string>, run: (svc: ServiceProcess, api: KeepAliveClient, wsId: string) => Promise<T>): Promise<T> {
  const redis = await new RedisServer().start();
  const root = mkdtempSync(path.join(os.tmpdir(), 'svc-density-ws-'));
  const data = mkdtempSync(path.join(os.tmpdir(), 'svc-density-data-'));
  const svc = await new ServiceProcess({ REDIS_URL: redis.url, DATA_DIR: data, ...env }, [DIST_MAIN]).start();
  const api = new KeepAliveClient(svc.url);
  try {
    const ws = JSON.parse((await api.request('POST', '/api/workspaces', { root_dir: root })).body).workspace;
    return await run(svc, api, ws.id);
  } finally {
    api.close();
    await svc.kill('SIGTERM');
    await redis.destroy();
    rmSync(root, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  }
}

async function main() {
  if (!existsSync(DIST_MAIN)) throw new Error(`${DIST_MAIN} is missing: run \`make build\` first`);
  const create = async (api: KeepAliveClient, wsId: string) => {
    const res = await api.request('POST', '/api/sessions', { workspace: wsId });
    const s = JSON.parse(res.body).session;
    if (res.status !== 201 || s?.state !== 'active') throw new Error(`create failed: ${res.status} ${res.body.slice(0, 300)}`);
    return s as { id: string; created_at: string; updated_at: string };
  };
  const turn = async (api: KeepAliveClient, wsId: string, id: string, message: string) => {
    const res = await api.request('POST', `/api/workspaces/${wsId}/sessions/${id}/prompt`, { message });
    if (!res.body.includes('[DONE]') || !res.body.includes(message)) throw new Error(`prompt did not finish: ${res.body.slice(0, 300)}`);
  };

  // Reference: one agent process, under tsx (sources) and compiled (dist).
  const tsxKiB = await agentRss(['--import', 'tsx', 'runtime/agents/scripted.ts']);
  const distKiB = await agentRss([DIST_AGENT]);
  console.log(`One built-in agent process: ${mib(tsxKiB)} RSS under tsx, ${mib(distKiB)} compiled (${(tsxKiB / distKiB).toFixed(2)}x)`);

  // 1-3. N sessions on one runtime: total RSS, create latency on a warm process, prompt overhead.
  await withService({ SESSION_IDLE_SUSPEND: 'off' }, async (svc, api, wsId) => {
    const pid = svc.proc!.pid!;
    const baseKiB = rssKiB(pid);
    const warm: number[] = [];
    const cold: number[] = [];
    const hostWarm: number[] = [];
    const ids: string[] = [];
    const t0 = performance.now();
    for (let i = 0; i < N; i++) {
      const procs = childPids(pid).length;
      const s = performance.now();
      const made = await create(api, wsId);
      const took = performance.now() - s;
      ids.push(made.id);
      const started = childPids(pid).length > procs;
      (started ? cold : warm).push(took);
      if (!started) hostWarm.push(Date.parse(made.updated_at) - Date.parse(made.created_at));
    }
    const total = (performance.now() - t0) / 1000;
    await new Promise((r) => setTimeout(r, 1000));
    const pids = tree(pid);
    const agents = pids.length - 1;
    const serviceKiB = rssKiB(pid);
    const agentsKiB = pids.slice(1).reduce((sum, p) => sum + rssKiB(p), 0);
    console.log(`${N} idle sessions of the default agent on one runtime: ${agents} agent processes; total RSS ${mib(serviceKiB + agentsKiB)} (service ${mib(serviceKiB)}, ${mib(baseKiB)} before; agents ${mib(agentsKiB)}) = ${((serviceKiB + agentsKiB) / N / 1024).toFixed(2)} MiB per session; one process per session would need about ${mib(N * distKiB + serviceKiB)}`);
    console.log(`Create (sequential, ${total.toFixed(1)} s in all): warm process p50 ${ms(pct(warm, 50))}, p99 ${ms(pct(warm, 99))} over ${warm.length} (in the runtime, created_at -> active p50 ${ms(pct(hostWarm, 50))}, p99 ${ms(pct(hostWarm, 99))}); creates that started a process p50 ${ms(pct(cold, 50))} over ${cold.length}`);

    // Prompt overhead: the whole stack over a direct ACP call to the same (compiled) agent, 100 turns each.
    const direct: number[] = [];
    const agent = spawn(process.execPath, [DIST_AGENT], { stdio: ['pipe', 'pipe', 'inherit'] });
    const conn = client({ name: 'bench' }).onNotification(methods.client.session.update, () => undefined)
      .connect(ndJsonStream(Writable.toWeb(agent.stdin!) as WritableStream<Uint8Array>, Readable.toWeb(agent.stdout!) as ReadableStream<Uint8Array>));
    await conn.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} });
    const { sessionId } = await conn.agent.request(methods.agent.session.new, { cwd: os.tmpdir(), mcpServers: [] });
    for (let i = 0; i < 110; i++) {
      const s = performance.now();
      await conn.agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'hello' }] });
      if (i >= 10) direct.push(performance.now() - s);
    }
    agent.kill('SIGKILL');
    const stack: number[] = [];
    for (let i = 0; i < 110; i++) {
      const s = performance.now();
      await turn(api, wsId, ids[i % ids.length], 'hello');
      if (i >= 10) stack.push(performance.now() - s);
    }
    console.log(`Prompt turn with ${N} sessions live: direct ACP p50 ${ms(pct(direct, 50))}; whole stack (HTTP + Redis + runtime + pooled ACP) p50 ${ms(pct(stack, 50))} -> overhead ${ms(pct(stack, 50) - pct(direct, 50))}`);
  });

  // 4. WAKE idle-suspended sessions woken at once (each a prompt; the first wake of a pool starts its process).
  await withService({ SESSION_IDLE_SUSPEND: '2s' }, async (svc, api, wsId) => {
    const pid = svc.proc!.pid!;
    const ids: string[] = [];
    for (let i = 0; i < WAKE; i++) ids.push((await create(api, wsId)).id);
    for (const id of ids) await turn(api, wsId, id, 'before');
    const deadline = Date.now() + 60_000;
    while (childPids(pid).length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    const suspendedKiB = rssKiB(pid);
    const left = childPids(pid).length;
    const clients = Array.from({ length: WAKE }, () => new KeepAliveClient(svc.url));
    const lat: number[] = [];
    const t = performance.now();
    await Promise.all(ids.map(async (id, i) => {
      const s = performance.now();
      await turn(clients[i], wsId, id, 'after');
      lat.push(performance.now() - s);
    }));
    const all = performance.now() - t;
    for (const c of clients) c.close();
    console.log(`${WAKE} idle-suspended sessions (${left} agent processes left, service RSS ${mib(suspendedKiB)}) woken at once by a prompt each: all done in ${ms(all)}; per prompt p50 ${ms(pct(lat, 50))}, p99 ${ms(pct(lat, 99))}; ${childPids(pid).length} agent processes after`);
  });
}

await main();
process.exit(0);
