// `make bench`, archives part: the time to refuse each hostile skill archive (links, zero tails, a bomb, too many
// entries) through the API with the default limits, and GET /readyz while one is being refused (target: p99 under
// 100 ms). Not a test: no assertions beyond each refusal's status.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { KeepAliveClient } from '../helpers/keep-alive.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { startService } from '../helpers/service.ts';
import { IndexFixture, skillMd, tarGz } from '../marketplace/fixtures.ts';
import { bomb, linkChain, manyEntries, zeroTail } from '../security/hostile-archives.ts';

const MiB = 1024 * 1024;
const ROUNDS = Number(process.env.BENCH_ARCHIVE_ROUNDS ?? 5);
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];

const CASES: { name: string; make: (skill: string) => Buffer; status: number }[] = [
  { name: 'a chain of 27 links', make: (n) => linkChain(n), status: 422 },
  { name: '32 KB, 32 MiB zero tail', make: (n) => zeroTail(n, 32 * MiB), status: 413 },
  { name: '2 MB, 2 GiB zero tail', make: (n) => zeroTail(n, 2048 * MiB), status: 413 },
  { name: '400 KB, one 384 MiB file of zeros', make: (n) => bomb(n, 384 * MiB), status: 413 },
  { name: '10,001 directory entries', make: (n) => manyEntries(n, 10_001), status: 413 },
  { name: 'reference: 1 MiB incompressible, installed', make: (n) => tarGz([{ path: `${n}/SKILL.md`, content: skillMd(n) }, { path: `${n}/data.bin`, content: randomBytes(MiB) }]), status: 200 },
];

async function main() {
  const redis = await new RedisServer().start();
  const index = await new IndexFixture().start();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-archives-'));
  const sizes: number[] = [];
  for (const [i, c] of CASES.entries()) {
    const archive = c.make(`case${i}`);
    sizes.push(archive.length);
    index.addSkill(`@bench/case${i}`, '1.0.0', archive);
  }
  writeFileSync(path.join(dataDir, 'config.yaml'), stringify({ marketplace: { refresh_interval: '0s', sources: [{ id: 'index', type: 'index', url: `${index.url}/index.json` }] } }));
  const service = await startService(redis.url, { DATA_DIR: dataDir });
  try {
    const http = new KeepAliveClient(service.url);
    const probe = new KeepAliveClient(service.url);
    await http.request('POST', '/api/marketplace/refresh?kind=skill');
    const idle: number[] = [];
    for (let i = 0; i < 500; i++) {
      const t0 = performance.now();
      await probe.request('GET', '/readyz');
      idle.push(performance.now() - t0);
    }
    console.log(`archives (default limits, one service process with every role, ${os.cpus().length} cores, ${ROUNDS} rounds each)`);
    console.log(`  GET /readyz at rest: p50 ${pct(idle, 50).toFixed(2)} ms, p99 ${pct(idle, 99).toFixed(2)} ms`);
    for (const [i, c] of CASES.entries()) {
      const times: number[] = [];
      const ready: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        let done = false;
        // NOTE: sequential probes on their own connection for as long as the install is in flight.
        const probing = (async () => {
          while (!done) {
            const t0 = performance.now();
            const res = await probe.request('GET', '/readyz');
            if (!done) ready.push(performance.now() - t0);
            if (res.status !== 200) throw new Error(`readyz ${res.status}`);
          }
        })();
        const t0 = performance.now();
        const res = await http.request('POST', '/api/skills/marketplace/install', { slug: `@bench/case${i}` });
        times.push(performance.now() - t0);
        done = true;
        await probing;
        if (res.status !== c.status) throw new Error(`${c.name}: ${res.status} ${res.body.slice(0, 300)}`);
        if (res.status === 200) await http.request('DELETE', `/api/skills/marketplace/case${i}`);
      }
      console.log(`  ${c.name} (${(sizes[i] / 1024).toFixed(0)} KiB, ${c.status}): median ${pct(times, 50).toFixed(0)} ms, max ${Math.max(...times).toFixed(0)} ms; /readyz meanwhile (${ready.length} probes) p50 ${pct(ready, 50).toFixed(2)} ms, p99 ${pct(ready, 99).toFixed(2)} ms, max ${Math.max(...ready).toFixed(2)} ms`);
    }
  } finally {
    await service.stop();
    await index.stop();
    await redis.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
