// `make bench`, extensions part: install → tool callable, and restart latency after a daemon crash. Not a test: no assertions.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { dirChecksum } from '../../runtime/extensions/artifacts.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, startService } from '../helpers/service.ts';

const ROUNDS = Number(process.env.BENCH_EXT_ROUNDS ?? 5);
const HELLO = fileURLToPath(new URL('../fixtures/extensions/hello/', import.meta.url));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (xs: number[]) => `median ${median(xs).toFixed(0)} ms (min ${Math.min(...xs).toFixed(0)}, max ${Math.max(...xs).toFixed(0)})`;

/** until polls `fn` every 5 ms until it answers true; returns the elapsed ms since `t0`. */
async function until(t0: number, fn: () => Promise<boolean>): Promise<number> {
  for (;;) {
    if (await fn().catch(() => false)) return performance.now() - t0;
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * One service with every role (the daemon runs beside the API, as `make run` has it), the restart backoff at its
 * default 1 s. Each round installs a copy of the example under a new name and times POST → the daemon's tool answers
 * through POST /api/tools/{id}/invoke; then SIGKILLs that daemon and times kill → the tool answers again.
 */
async function main() {
  const redis = await new RedisServer().start();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-ext-'));
  const data = path.join(dir, 'data');
  cpSync(HELLO, path.join(dir, 'src'), { recursive: true });
  const service = await startService(redis.url, { DATA_DIR: data });
  writeFileSync(path.join(data, 'config.yaml'), 'tools:\n  external_default: enabled\n');
  const api = new Client(service.url);
  const installs: number[] = [];
  const restarts: number[] = [];
  try {
    for (let i = 0; i < ROUNDS; i++) {
      const name = `hello-${i}`;
      const ext = path.join(dir, name);
      cpSync(path.join(dir, 'src'), ext, { recursive: true });
      const m = JSON.parse(readFileSync(path.join(ext, 'extension.json'), 'utf8'));
      m.name = name;
      m.resources.bundles[0].name = `greeter-${i}`;
      writeFileSync(path.join(ext, 'extension.json'), JSON.stringify(m));
      const body = { path: ext, checksum: `sha256:${await dirChecksum(ext, 10_000)}` };
      const tool = `/api/tools/ext__hello_${i}__greet/invoke`;
      const call = async () => (await api.post(tool, { input: { name: 'x' } })).status === 200;
      const t0 = performance.now();
      const res = await api.post('/api/extensions', body);
      if (res.status !== 201) throw new Error(`install ${res.status}: ${JSON.stringify(res.body)}`);
      installs.push(await until(t0, call));
      const pid = (await api.get(`/api/extensions/${name}`)).body.extension.pid as number;
      const t1 = performance.now();
      process.kill(pid, 'SIGKILL');
      restarts.push(await until(t1, async () => (await api.get(`/api/extensions/${name}`)).body.extension.pid !== pid && call()));
    }
    console.log(`extensions: install → tool callable (path install of the example, daemon start, initialize, first health check), ${ROUNDS} rounds: ${fmt(installs)}`);
    console.log(`extensions: daemon SIGKILL → tool callable again (restart backoff 1 s included), ${ROUNDS} rounds: ${fmt(restarts)}; less the backoff: median ${(median(restarts) - 1000).toFixed(0)} ms`);
  } finally {
    await service.stop();
    await redis.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
