// `make bench`, heartbeat part: prints the wake lag from one run on this machine. Not a test: no assertions.
// N workspaces each hold one live scripted session and a HEARTBEAT.md; the heartbeat ticks every 1 s. A wake's lag
// is its record's created_at (after the prompt was handed to the session's runtime) minus its tick's scheduled time.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RedisServer } from '../helpers/redis-server.ts';
import { ServiceProcess } from '../helpers/process.ts';
import { Client } from '../helpers/service.ts';

const WORKSPACES = Number(process.env.BENCH_HEARTBEAT_WORKSPACES ?? 20);
const SECONDS = Number(process.env.BENCH_HEARTBEAT_SECONDS ?? 15);
const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN; };

async function main() {
  const redis = await new RedisServer().start();
  const data = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-hb-'));
  const roots = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-hb-ws-'));
  writeFileSync(path.join(data, 'config.yaml'), 'heartbeat:\n  min_interval: 1s\n  default_interval: 1s\n  wake_cooldown: 500ms\n');
  const svc = await new ServiceProcess({ REDIS_URL: redis.url, DATA_DIR: data, HEARTBEAT_RESYNC_INTERVAL: '1s' }).start();
  const api = new Client(svc.url);
  try {
    const workspaces: string[] = [];
    for (let i = 0; i < WORKSPACES; i++) {
      const root = path.join(roots, `ws-${i}`);
      mkdirSync(path.join(root, '.svc', 'agents', 'scripted'), { recursive: true });
      const made = await api.post('/api/workspaces', { root_dir: root });
      if (made.status !== 201) throw new Error(`workspace: ${made.status} ${JSON.stringify(made.body)}`);
      const ws = made.body.workspace;
      const s = await api.post('/api/sessions', { workspace: ws.id });
      if (s.status !== 201) throw new Error(`session: ${s.status} ${JSON.stringify(s.body)}`);
      writeFileSync(path.join(root, '.svc', 'agents', 'scripted', 'HEARTBEAT.md'), '---\nsummary: "bench"\n---\nSay hello.\n');
      workspaces.push(ws.id);
    }
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    const wakes = (await Promise.all(workspaces.map(async (ws) => (await api.get(`/api/agents/scripted/heartbeat/history?workspace=${ws}&limit=1000`)).body.wakes as any[]))).flat();
    const sent = wakes.filter((w) => w.source === 'scheduler' && w.result === 'sent');
    const lag = sent.map((w) => Date.parse(w.created_at) - Date.parse(w.scheduled_at));
    const results = wakes.reduce<Record<string, number>>((m, w) => ({ ...m, [w.result]: (m[w.result] ?? 0) + 1 }), {});
    console.log(`heartbeat wakes: ${WORKSPACES} agents' heartbeats every 1 s for ${SECONDS} s, one service process (all roles)`);
    console.log(`  decisions ${wakes.length} (${Object.entries(results).map(([k, v]) => `${k} ${v}`).join(', ')})`);
    // Ticks per heartbeat-second: 1.0 means one wake per tick, none doubled or lost.
    const perWs = workspaces.map((ws) => sent.filter((w) => w.workspace_id === ws).map((w) => Date.parse(w.scheduled_at)).sort((a, b) => a - b));
    const rate = perWs.filter((t) => t.length > 1).map((t) => (t.length - 1) / ((t.at(-1)! - t[0]) / 1000));
    console.log(`  sent wakes per heartbeat per second ${(rate.reduce((a, b) => a + b, 0) / rate.length).toFixed(3)} (1.000 = exactly one per tick)`);
    console.log(`  wake lag (tick → prompt handed to the session) p50 ${pct(lag, 50)} ms, p99 ${pct(lag, 99)} ms, max ${Math.max(...lag)} ms`);
  } finally {
    await svc.kill('SIGTERM');
    await redis.destroy();
    rmSync(data, { recursive: true, force: true });
    rmSync(roots, { recursive: true, force: true });
  }
}

await main();
