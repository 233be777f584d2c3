// `make bench`, sessions part: prints figures from one run on this machine. Not a test: no assertions. The service runs
// compiled (dist/) when built; BENCH_ROOT=<another checkout, built> runs that checkout's service instead (a before/after).
import { spawn } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { client, methods, ndJsonStream, PROTOCOL_VERSION } from '@agentclientprotocol/sdk';
import { createParser } from 'eventsource-parser';
import { RedisServer } from '../helpers/redis-server.ts';
import { productionArgv, ServiceProcess } from '../helpers/process.ts';
import { Client } from '../helpers/service.ts';
import { KeepAliveClient } from '../helpers/keep-alive.ts';
import { readUiStream } from '../helpers/ui-stream.ts';

const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };
const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;

async function main() {
  const redis = await new RedisServer().start();
  const root = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-ws-'));
  const data = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-data-'));
  const svc = await new ServiceProcess({ REDIS_URL: redis.url, DATA_DIR: data }, productionArgv(process.env.BENCH_ROOT)).start();
  const api = new Client(svc.url);
  try {
    const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
    const create = async () => (await api.post('/api/sessions', { workspace: ws.id })).body.session;
    const prompt = async (id: string, message: string) => {
      const res = await fetch(`${svc.url}/api/workspaces/${ws.id}/sessions/${id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message }) });
      return readUiStream(res);
    };

    // 1. Events persisted per second, one session and 50 at once (agent -> ACP -> host -> Redis stream).
    const one = await create();
    let t = Date.now();
    await prompt(one.id, '/progress 3000 0');
    const oneRate = 3000 / ((Date.now() - t) / 1000);
    const many = await Promise.all(Array.from({ length: 50 }, create));
    t = Date.now();
    await Promise.all(many.map((s) => prompt(s.id, '/progress 200 0')));
    const manyRate = (50 * 200) / ((Date.now() - t) / 1000);
    console.log(`Events persisted: ${oneRate.toFixed(0)}/s for one session; ${manyRate.toFixed(0)}/s in all for 50 sessions at once`);

    // 2. SSE delivery latency to 200 subscribers of one session (event timestamp -> frame parsed), over keep-alive
    // node:http streams (fetch's web streams cost the shared cores more than the service does). One warm-up round,
    // then ROUNDS rounds of 50 events 20 ms apart; the figure pools every delivery of the measured rounds.
    const ROUNDS = 5;
    const streamUrl = new URL(svc.url);
    const sseAgent = new http.Agent({ keepAlive: true, maxSockets: 1000 });
    const deliveries = async (): Promise<number[]> => {
      const target = await create();
      const latencies: number[] = [];
      const requests: http.ClientRequest[] = [];
      await Promise.all(Array.from({ length: 200 }, () => new Promise<void>((resolve, reject) => {
        const parser = createParser({ onEvent: (e) => { if (e.event === 'agent_message') latencies.push(Date.now() - Date.parse(JSON.parse(e.data).timestamp)); } });
        const req = http.get({ host: streamUrl.hostname, port: streamUrl.port, path: `/api/workspaces/${ws.id}/sessions/${target.id}/stream`, agent: sseAgent }, (res) => {
          res.setEncoding('utf8');
          res.on('data', (c: string) => parser.feed(c));
          res.on('error', () => undefined);
          resolve();
        });
        req.on('error', reject);
        requests.push(req);
      })));
      await prompt(target.id, '/progress 50 20');
      await new Promise((r) => setTimeout(r, 1000));
      for (const req of requests) req.destroy();
      return latencies;
    };
    await deliveries();
    const rounds: number[][] = [];
    for (let i = 0; i < ROUNDS; i++) rounds.push(await deliveries());
    const latencies = rounds.flat();
    console.log(`SSE delivery to 200 subscribers: p50 ${pct(latencies, 50)} ms, p99 ${pct(latencies, 99)} ms over ${latencies.length} deliveries in ${ROUNDS} rounds (p99 per round: ${rounds.map((r) => pct(r, 99)).join(', ')} ms; target p99 <= 25 ms)`);

    // 3. Prompt overhead of the whole stack over a direct ACP call to the same agent.
    const N = 100;
    const direct: number[] = [];
    const agent = spawn(process.execPath, ['--import', 'tsx', 'runtime/agents/scripted.ts'], { stdio: ['pipe', 'pipe', 'inherit'] });
    const conn = client({ name: 'bench' }).onNotification(methods.client.session.update, () => undefined)
      .connect(ndJsonStream(Writable.toWeb(agent.stdin!) as WritableStream<Uint8Array>, Readable.toWeb(agent.stdout!) as ReadableStream<Uint8Array>));
    await conn.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} });
    const { sessionId } = await conn.agent.request(methods.agent.session.new, { cwd: root, mcpServers: [] });
    for (let i = 0; i < N; i++) {
      const s = performance.now();
      await conn.agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'hello' }] });
      direct.push(performance.now() - s);
    }
    agent.kill('SIGKILL');
    const keepAlive = new KeepAliveClient(svc.url);
    const promptHttp = async (id: string, message: string) => (await keepAlive.request('POST', `/api/workspaces/${ws.id}/sessions/${id}/prompt`, { message })).body;
    const stack: number[] = [];
    const p = await create();
    for (let i = 0; i < N; i++) {
      const s = performance.now();
      const body = await promptHttp(p.id, 'hello');
      stack.push(performance.now() - s);
      if (!body.includes('[DONE]')) throw new Error(`prompt did not finish: ${body.slice(0, 200)}`);
    }
    keepAlive.close();
    console.log(`Prompt turn: direct ACP p50 ${pct(direct, 50).toFixed(2)} ms; whole stack (HTTP + Redis + runtime + ACP) p50 ${pct(stack, 50).toFixed(2)} ms -> overhead ${(pct(stack, 50) - pct(direct, 50)).toFixed(2)} ms (target <= 5 ms)`);

    // 4. Session create on a warm agent process (POST /api/sessions answers once the runtime started it), one at a time.
    const createMs: number[] = [];
    const createClient = new KeepAliveClient(svc.url);
    for (let i = 0; i < 110; i++) {
      const s = performance.now();
      const res = await createClient.request('POST', '/api/sessions', { workspace: ws.id });
      if (res.status !== 201 || JSON.parse(res.body).session?.state !== 'active') throw new Error(`create failed: ${res.status} ${res.body.slice(0, 200)}`);
      if (i >= 10) createMs.push(performance.now() - s);
    }
    createClient.close();
    console.log(`Session create on a warm agent process: p50 ${pct(createMs, 50).toFixed(2)} ms, p99 ${pct(createMs, 99).toFixed(2)} ms over ${createMs.length} creates one at a time (target p50 <= 30 ms)`);

    // 5. RSS per idle session (the service process; each agent is its own process).
    const before = rssMiB(svc.proc!.pid!);
    const idle = await Promise.all(Array.from({ length: 20 }, create));
    await new Promise((r) => setTimeout(r, 1000));
    const after = rssMiB(svc.proc!.pid!);
    console.log(`RSS per idle session: ${((after - before) / idle.length).toFixed(2)} MiB in the service (agent processes are pooled: see density.ts)`);
  } finally {
    await svc.kill('SIGTERM');
    await redis.destroy();
    rmSync(root, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  }
}

await main();
process.exit(0);
