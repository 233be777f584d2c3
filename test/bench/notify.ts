// `make bench`, notifications part: delivery throughput to one local receiver. Not a test: no assertions.
import { spawn } from 'node:child_process';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { EventBus } from '../../store/event-bus.ts';
import { Keys } from '../../store/keys.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { ServiceProcess } from '../helpers/process.ts';
import { Client } from '../helpers/service.ts';
import { HEADER_ATTEMPT, HEADER_EVENT_TYPE, HEADER_IDEMPOTENCY, HEADER_TIMESTAMP, WebhookClient } from '../../runtime/notifications/webhook.ts';
import { EgressPolicy } from '../../runtime/security/egress.ts';
import { serviceArgv, settle, Window } from './probe.ts';

const EVENTS = Number(process.env.BENCH_NOTIFY_EVENTS ?? 5000);
const CONCURRENCY = Number(process.env.BENCH_NOTIFY_CONCURRENCY ?? 16);
const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };

/** cpuMs reads a process's user + system CPU time from /proc (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** startReceiver runs a node:http receiver that counts POSTs and notes each event's delivery lag. */
async function startReceiver() {
  const state = { posts: 0, lags: [] as number[], onPost: () => {} };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST') {
        state.posts++;
        try { state.lags.push(Date.now() - Date.parse(JSON.parse(Buffer.concat(chunks).toString()).timestamp)); } catch { /* not an event */ }
        state.onPost();
      }
      res.end('{"ok":true}');
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { state, port: (server.address() as AddressInfo).port, close: () => { server.closeAllConnections(); server.close(); } };
}

const waitFor = (cond: () => boolean, timeoutMs: number) => new Promise<void>((resolve, reject) => {
  const deadline = Date.now() + timeoutMs;
  const tick = () => (cond() ? resolve() : Date.now() > deadline ? reject(new Error('timed out')) : setTimeout(tick, 5));
  tick();
});

/**
 * direct POSTs the same body to the receiver with `concurrency` keep-alive connections: this machine's ceiling.
 * With `client`, the POSTs go through the service's WebhookClient with a delivery's headers instead, so the two
 * rates and CPU per POST (this process: client and receiver) show what the client costs beyond bare node:http.
 */
async function direct(port: number, body: string, n: number, concurrency: number, client?: WebhookClient): Promise<{ rate: number; cpuUs: number }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const url = `http://127.0.0.1:${port}/direct`;
  const headers = { [HEADER_IDEMPOTENCY]: '1700000000000-0:bench:bench', [HEADER_EVENT_TYPE]: 'bench.tick', [HEADER_ATTEMPT]: '1', [HEADER_TIMESTAMP]: '1700000000' };
  const post = client ? () => client.post(url, headers, body, 5_000).then(() => undefined) : () => new Promise<void>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/direct', method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => { res.resume(); res.on('end', resolve); });
    req.on('error', reject);
    req.end(body);
  });
  let next = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => { while (next++ < n) await post(); }));
  const s = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  agent.destroy();
  return { rate: n / s, cpuUs: (c.user + c.system) / n };
}

/**
 * floor delivers EVENTS bus events with test/bench/bare-notifier.ts, in its own process on its own Redis: the same
 * operation (bus read, one POST per event, outcomes recorded, page acknowledged) without the service.
 */
async function floor(rx: Awaited<ReturnType<typeof startReceiver>>, publish: (bus: EventBus, n: number) => Promise<void>) {
  const server = await new RedisServer().start();
  const redis = new Redis(server.url);
  const keys = new Keys();
  const bus = new EventBus(redis, keys);
  const proc = spawn(process.execPath, ['--import', 'tsx', path.resolve('test/bench/bare-notifier.ts')], {
    env: { ...process.env, REDIS_URL: server.url, STREAM: bus.key, RECEIVER_URL: `http://127.0.0.1:${rx.port}/floor`, CONCURRENCY: String(CONCURRENCY) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await new Promise((r) => proc.stdout!.once('data', r));
    await publish(bus, 300);
    await waitFor(() => rx.state.posts >= 300, 60_000);
    rx.state.posts = 0;
    rx.state.lags = [];
    const win = await new Window(proc.pid!, redis).start();
    const t0 = performance.now();
    await publish(bus, EVENTS);
    await waitFor(() => rx.state.posts >= EVENTS, 300_000);
    const rate = EVENTS / ((performance.now() - t0) / 1000);
    await settle(proc.pid!, 5_000);
    const per = await win.end(EVENTS);
    return { rate, per, p99: pct(rx.state.lags, 99) };
  } finally {
    proc.kill('SIGKILL');
    redis.disconnect();
    await server.destroy();
  }
}

async function main() {
  const redisServer = await new RedisServer().start();
  const data = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-notify-'));
  const rx = await startReceiver();
  const svc = await new ServiceProcess({ REDIS_URL: redisServer.url, DATA_DIR: data, LOG_LEVEL: 'warn', NOTIFY_CONCURRENCY: String(CONCURRENCY) }, serviceArgv('notify')).start();
  const api = new Client(svc.url);
  const redis = new Redis(redisServer.url);
  const bus = new EventBus(redis, new Keys());
  try {
    await api.put('/api/resources/bridge.instance/bench', {
      scope: { kind: 'global' }, expected_version: 0,
      spec: { platform: 'webhook', extension_name: 'webhook', display_name: 'bench', enabled: true, provider_config: { url: `http://127.0.0.1:${rx.port}/hook` } },
    });
    const preset = await api.post('/api/notifications/presets', { name: 'bench', enabled: true, events: ['bench.*'], targets: [{ bridge_id: 'bench' }] });
    if (preset.status !== 201) throw new Error(`preset: ${preset.status} ${JSON.stringify(preset.body)}`);
    const publish = async (bus: EventBus, n: number) => {
      for (let i = 0; i < n; i += 500) {
        await bus.publishMany(Array.from({ length: Math.min(500, n - i) }, (_, j) => ({
          type: 'bench.tick', source: 'bench', outcome: 'warning' as const, agent_name: 'bench', workspace_id: 'ws_bench', summary: `tick ${i + j}`, data: { i: i + j },
        })));
      }
    };
    await publish(bus, 300);
    await waitFor(() => rx.state.posts >= 300, 60_000);
    rx.state.posts = 0;
    rx.state.lags = [];

    const cpu0 = cpuMs(svc.proc!.pid!);
    const win = await new Window(svc.proc!.pid!, redis).start();
    const t0 = performance.now();
    await publish(bus, EVENTS);
    await waitFor(() => rx.state.posts >= EVENTS, 300_000);
    const seconds = (performance.now() - t0) / 1000;
    const cpu = cpuMs(svc.proc!.pid!) - cpu0;
    // NOTE: the rows' last writes and their bus events trail the last POST; they belong to the deliveries.
    await settle(svc.proc!.pid!, 10_000);
    const per = await win.end(EVENTS);
    const rate = EVENTS / seconds;
    const body = JSON.stringify({ id: '1700000000000-0', type: 'bench.tick', agent: 'bench', workspace_id: 'ws_bench', summary: 'tick 0', outcome: 'warning', sequence: 1700000000000000, payload: { i: 0 }, timestamp: new Date().toISOString() });
    const [p50, p99] = [pct(rx.state.lags, 50), pct(rx.state.lags, 99)];
    const client = new WebhookClient(new EgressPolicy({ authMode: 'none' }));
    // NOTE: both ways warmed first, so neither pays the JIT for the other.
    await direct(rx.port, body, 1000, CONCURRENCY);
    await direct(rx.port, body, 1000, CONCURRENCY, client);
    const { rate: ceiling, cpuUs: directUs } = await direct(rx.port, body, EVENTS, CONCURRENCY);
    const viaClient = await direct(rx.port, body, EVENTS, CONCURRENCY, client);
    client.close();
    const bare = await floor(rx, publish);
    console.log(`notification delivery, ${EVENTS} events → 1 webhook bridge (local node:http receiver), NOTIFY_CONCURRENCY=${CONCURRENCY}:`);
    console.log(`  ${rate.toFixed(0)} events/s delivered; service CPU ${(cpu / EVENTS).toFixed(3)} ms per delivery (${cpu} ms for ${EVENTS}; bus read, routing, queue, POST)`);
    console.log(`  after the service went quiet: service CPU ${per.svcUs.toFixed(0)} µs, Redis CPU ${per.redisUs.toFixed(0)} µs per delivery`);
    console.log(`  Redis commands per delivery (calls, µs inside Redis): ${per.calls}; service system calls per delivery: ${per.syscalls}`);
    console.log(`  event → delivered at the receiver: p50 ${p50} ms, p99 ${p99} ms (includes the backlog of a burst)`);
    console.log(`  direct keep-alive POSTs of the same body to the same receiver (${CONCURRENCY} connections): ${ceiling.toFixed(0)}/s; ratio service/direct ${(rate / ceiling).toFixed(2)}`);
    console.log(`  the same POSTs through the service's webhook client (a delivery's headers): ${viaClient.rate.toFixed(0)}/s; CPU per POST (client and receiver) ${viaClient.cpuUs.toFixed(0)} µs against ${directUs.toFixed(0)} µs bare`);
    console.log(`  floor: bus read + POST + outcome recorded, without the service (test/bench/bare-notifier.ts): ${bare.rate.toFixed(0)} events/s (ratio to direct ${(bare.rate / ceiling).toFixed(2)}), p99 ${bare.p99} ms; CPU ${bare.per.svcUs.toFixed(0)} µs per delivery, Redis ${bare.per.redisUs.toFixed(0)} µs; service/floor ${(rate / bare.rate).toFixed(2)}`);
  } finally {
    await redis.quit();
    await svc.kill('SIGTERM');
    rx.close();
    await redisServer.destroy();
    rmSync(data, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
