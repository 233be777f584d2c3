// `make bench`, marketplace part: search p99 over a 5,000-entry index, a full sync of 5,000 registry entries (time,
// Redis memory) and a skill install of a 1 MiB archive. Not a test: no assertions.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { stringify } from 'yaml';
import { KeepAliveClient } from '../helpers/keep-alive.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { startService } from '../helpers/service.ts';
import { IndexFixture, registryEntry, RegistryFixture, skillMd, tarGz } from '../marketplace/fixtures.ts';

const ENTRIES = Number(process.env.BENCH_MARKET_ENTRIES ?? 5_000);
const QUERIES = 1_000;
const INSTALLS = 5;
const WORDS = ['database', 'weather', 'files', 'github', 'search', 'slack', 'calendar', 'browser', 'memory', 'docker', 'sql', 'maps', 'email', 'notes', 'git'];
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];
const usedMemory = async (r: Redis) => Number(/used_memory:(\d+)/.exec(await r.info('memory'))![1]);

async function main() {
  const redis = await new RedisServer().start();
  const conn = new Redis(redis.url);
  const registry = await new RegistryFixture().start();
  const index = await new IndexFixture().start();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-market-'));
  for (let i = 0; i < ENTRIES; i++) {
    const a = WORDS[i % WORDS.length];
    const b = WORDS[(i * 7 + 3) % WORDS.length];
    registry.servers.push(registryEntry(`io.github.bench${i % 97}/${a}-${b}-${i}`, {
      description: `A ${a} server that also knows ${b}: query, list and update ${a} items from your agent (entry ${i}).`,
      packages: [{ registryType: 'npm', identifier: `@bench/${a}-${b}-${i}`, version: '1.0.0', transport: { type: 'stdio' }, environmentVariables: [{ name: 'API_KEY', isRequired: true, isSecret: true }] }],
    }));
  }
  // A 1 MiB skill archive of incompressible bytes (gzip cannot shrink it), one per install round.
  for (let i = 0; i < INSTALLS; i++) {
    const name = `big${i}`;
    index.addSkill(`@bench/${name}`, '1.0.0', tarGz([{ path: `${name}/SKILL.md`, content: skillMd(name) }, { path: `${name}/data.bin`, content: randomBytes(1024 * 1024) }]));
  }
  writeFileSync(path.join(dataDir, 'config.yaml'), stringify({
    marketplace: { refresh_interval: '0s', sources: [{ id: 'registry', type: 'mcp-registry', url: registry.url }, { id: 'index', type: 'index', url: `${index.url}/index.json` }] },
  }));
  const memBefore = await usedMemory(conn);
  const service = await startService(redis.url, { DATA_DIR: dataDir });
  try {
    const http = new KeepAliveClient(service.url);
    // The controller syncs every source when it starts; wait for that one, then time full syncs.
    await http.request('POST', '/api/marketplace/refresh');
    const memAfter = await usedMemory(conn);
    const syncs: number[] = [];
    for (let r = 0; r < 3; r++) {
      // NOTE: a cleared state makes the next sync a full one (every page, every row rewritten).
      await conn.del('svc:{market}:state:registry:mcp', 'svc:{market}:rows:registry:mcp');
      const t0 = performance.now();
      const res = await http.request('POST', '/api/marketplace/refresh?kind=mcp');
      syncs.push(performance.now() - t0);
      if (res.status !== 200 || !res.body.includes(`"entry_count":${ENTRIES}`)) throw new Error(`sync: ${res.status} ${res.body.slice(0, 300)}`);
    }
    const rowBytes = Number(await conn.memory('USAGE', 'svc:{market}:rows:registry:mcp'));

    // Search: the first request after a sync rebuilds the process's index; time it, then steady-state queries.
    const t0 = performance.now();
    await http.request('GET', '/api/marketplace/search?q=database');
    const rebuildMs = performance.now() - t0;
    const search: number[] = [];
    const list: number[] = [];
    for (let i = 0; i < QUERIES; i++) {
      const q = i % 3 === 0 ? WORDS[i % WORDS.length] : `${WORDS[i % WORDS.length]} ${WORDS[(i * 5) % WORDS.length].slice(0, 4)}`;
      const s0 = performance.now();
      const res = await http.request('GET', `/api/marketplace/search?q=${encodeURIComponent(q)}&limit=20`);
      search.push(performance.now() - s0);
      if (res.status !== 200) throw new Error(`search: ${res.status}`);
      const l0 = performance.now();
      await http.request('GET', `/api/marketplace/mcp?q=${encodeURIComponent(q)}&limit=50`);
      list.push(performance.now() - l0);
    }
    // NOTE: the queries above repeat (15 words), so most hit the view's query cache; these are all distinct (misses).
    const cold: number[] = [];
    for (let i = 0; i < QUERIES; i++) {
      const c0 = performance.now();
      await http.request('GET', `/api/marketplace/search?q=${encodeURIComponent(`${WORDS[i % WORDS.length]} ${i}`)}&limit=20`);
      cold.push(performance.now() - c0);
    }
    const bare: number[] = [];
    for (let i = 0; i < QUERIES; i++) {
      const b0 = performance.now();
      await http.request('GET', '/healthz');
      bare.push(performance.now() - b0);
    }

    const installs: number[] = [];
    for (let i = 0; i < INSTALLS; i++) {
      const i0 = performance.now();
      const res = await http.request('POST', '/api/skills/marketplace/install', { slug: `@bench/big${i}` });
      installs.push(performance.now() - i0);
      if (res.status !== 200) throw new Error(`install: ${res.status} ${res.body}`);
    }

    console.log(`marketplace (${ENTRIES} registry entries, one service process with every role, ${os.cpus().length} cores)`);
    console.log(`  full sync of ${ENTRIES} entries (${Math.ceil(ENTRIES / 100)} pages), median of 3: ${pct(syncs, 50).toFixed(0)} ms (${syncs.map((s) => s.toFixed(0)).join(', ')})`);
    console.log(`  Redis memory: +${((memAfter - memBefore) / 1024 / 1024).toFixed(1)} MiB after the first sync (rows hash ${(rowBytes / 1024 / 1024).toFixed(1)} MiB, ${(rowBytes / ENTRIES).toFixed(0)} B/entry)`);
    console.log(`  index rebuild on the first search after a sync: ${rebuildMs.toFixed(0)} ms`);
    console.log(`  GET /api/marketplace/search (3 kinds, 20 each), ${QUERIES} queries: p50 ${pct(search, 50).toFixed(2)} ms, p99 ${pct(search, 99).toFixed(2)} ms (target ≤ 30 ms)`);
    console.log(`  the same with ${QUERIES} distinct queries (no cache hit): p50 ${pct(cold, 50).toFixed(2)} ms, p99 ${pct(cold, 99).toFixed(2)} ms`);
    console.log(`  GET /api/marketplace/mcp?q=…&limit=50: p50 ${pct(list, 50).toFixed(2)} ms, p99 ${pct(list, 99).toFixed(2)} ms`);
    console.log(`  GET /healthz (same client, the HTTP floor): p50 ${pct(bare, 50).toFixed(2)} ms, p99 ${pct(bare, 99).toFixed(2)} ms; search p50 / healthz p50 = ${(pct(search, 50) / pct(bare, 50)).toFixed(1)}`);
    console.log(`  skill install of a 1 MiB archive (download, SHA-256, inspect, unpack, tree hash, scan, store): median ${pct(installs, 50).toFixed(0)} ms (${installs.map((s) => s.toFixed(0)).join(', ')})`);
  } finally {
    await service.stop();
    await registry.stop();
    await index.stop();
    conn.disconnect();
    await redis.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => { console.error(err); process.exit(1); });
