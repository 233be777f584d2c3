// `make bench`, support part: support bundle build time and size over a large store. Not a test: no assertions.
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { Redis } from 'ioredis';
import { loadConfig } from '../../runtime/process/config.ts';
import { SupportBundleBuilder } from '../../runtime/support/bundle-builder.ts';
import { fileNameOf } from '../../runtime/support/support-bundles.ts';
import type { SupportBundleOperation } from '../../runtime/support/types.ts';
import { EventBus } from '../../store/event-bus.ts';
import { Keys } from '../../store/keys.ts';
import { LogStream } from '../../store/log-stream.ts';
import { ResourceStore } from '../../store/resource-store.ts';
import { SessionStore } from '../../store/session-store.ts';
import { WorkspaceStore } from '../../store/workspace-store.ts';
import { RedisServer } from '../helpers/redis-server.ts';

const RECORDS = Number(process.env.BENCH_RECORDS ?? 10_000);
const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 1_000);
const EVENTS = 10_000;
const LOG_LINES = 10_000;
const ROUNDS = 3;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * RECORDS agent records (4% Degraded, 1% never reconciled, the rest Ready), SESSIONS sessions over 10 workspaces,
 * a full bus (10,000 events) and a full shared log stream (10,000 warning lines, more than the 2 MiB log tail),
 * all written straight through the stores; then ROUNDS builds with the bundle builder a controller runs.
 */
async function main() {
  const redis = await new RedisServer().start();
  const conn = new Redis(redis.url);
  const keys = new Keys();
  const resources = new ResourceStore({ redis: conn, keys });
  const sessions = new SessionStore(resources.redis, keys);
  const workspaces = new WorkspaceStore(resources.redis, keys);
  const bus = new EventBus(conn, keys);
  const logs = new LogStream(conn, keys);
  try {
    const seedStart = Date.now();
    const now = new Date().toISOString();
    const wsIds = Array.from({ length: 10 }, (_, i) => `ws-${i}`);
    for (const [i, id] of wsIds.entries()) {
      await workspaces.save({ id, name: `bench-${i}`, root_dir: `/tmp/bench-${i}`, add_dirs: [], default_agent: '', sandbox_ref: '', created_at: now, updated_at: now }, 'create');
    }
    for (let i = 0; i < RECORDS; i += 200) {
      await Promise.all(Array.from({ length: Math.min(200, RECORDS - i) }, async (_, k) => {
        const n = i + k;
        const id = `agent-${n}`;
        await resources.put({ kind: 'agent', id, scope: { kind: 'global' }, owner: { kind: '', id: '' }, source: { kind: '', id: '' }, spec: { name: id, prompt: `You review change ${n}.`, tools: ['read', 'grep'] }, expectedVersion: 0 });
        if (n % 100 === 0) return;
        const degraded = n % 25 === 0;
        await resources.writeStatus('agent', id, {
          observed_version: 1, last_reconciled_at: now, last_error: degraded ? `tool "t-${n}" not found` : '',
          conditions: [
            { type: 'Ready', status: degraded ? 'False' : 'True', reason: degraded ? 'DependencyMissing' : 'Reconciled', message: '', last_transition_time: now },
            { type: 'Degraded', status: degraded ? 'True' : 'False', reason: degraded ? 'DependencyMissing' : '', message: degraded ? `tool "t-${n}" is not defined` : '', last_transition_time: now },
          ],
        }, 1);
      }));
    }
    for (let i = 0; i < SESSIONS; i += 200) {
      await Promise.all(Array.from({ length: Math.min(200, SESSIONS - i) }, (_, k) => sessions.create({
        id: `sess-${randomUUID().slice(0, 16)}`, name: '', agent_name: 'scripted', provider: '', model: '', type: 'user', origin: 'user',
        workspace_id: wsIds[(i + k) % wsIds.length], workspace_path: '/tmp', state: (i + k) % 3 ? 'stopped' : 'active', stop_reason: '', stop_detail: '',
        failure: null, created_at: new Date(Date.now() - (i + k) * 1000).toISOString(), updated_at: now,
      })));
    }
    for (let i = 0; i < EVENTS; i += 500) {
      await bus.publishMany(Array.from({ length: 500 }, (_, k) => ({ type: 'resource.applied', source: 'resources', summary: `agent agent-${i + k} applied`, data: { kind: 'agent', id: `agent-${i + k}`, version: 1 } })));
    }
    for (let i = 0; i < LOG_LINES; i += 500) {
      await logs.append(Array.from({ length: 500 }, (_, k) => JSON.stringify({ level: 40, time: Date.now(), pid: 4242, hostname: 'bench', roles: 'controller', kind: 'agent', key: `agent agent-${i + k}`, err: 'tool "t" not found; reconcile will retry after the backoff', msg: 'reconcile failed' })));
    }
    const seedMs = Date.now() - seedStart;

    const config = loadConfig({ REDIS_URL: redis.url, SVC_ROLES: 'controller' });
    const builder = new SupportBundleBuilder({
      redis: conn, config, readiness: async () => ({ ready: true, checks: { redis: 'ok', controllers: 'ok' } }), queueDepth: async () => new Map([['agent', 0]]),
      resources, workspaces, sessions, bus, logs, literals: async () => ['bench-secret-value-0123456789'],
    });
    const times: number[] = [];
    let last: Awaited<ReturnType<SupportBundleBuilder['build']>> | undefined;
    for (let r = 0; r < ROUNDS; r++) {
      const created = new Date().toISOString();
      const op: SupportBundleOperation = {
        operation_id: randomUUID(), status: 'running', created_at: created, updated_at: created, completed_at: '', failure_reason: '', file_name: fileNameOf(created),
        status_url: '', download_url: '', size_bytes: 0, sha256: '', include_status: true, manifest: null,
      };
      const t0 = process.hrtime.bigint();
      last = await builder.build(op);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    const raw = last!.manifest.artifacts.reduce((n, a) => n + a.bytes, 0);
    console.log(`support bundles: ${RECORDS} records, ${SESSIONS} sessions, ${EVENTS} bus events, ${LOG_LINES} log lines (seeded in ${(seedMs / 1000).toFixed(1)} s; ${os.cpus().length} cores)`);
    console.log(`  build time     median ${median(times).toFixed(0)} ms (runs: ${times.map((t) => t.toFixed(0)).join(', ')} ms)`);
    console.log(`  archive        ${(last!.archive.length / 1024).toFixed(0)} KiB tar.gz, ${(raw / 1024).toFixed(0)} KiB of files (ratio ${(raw / last!.archive.length).toFixed(1)}x)`);
    for (const a of last!.manifest.artifacts) {
      console.log(`    ${a.path.padEnd(22)} ${a.included ? `${(a.bytes / 1024).toFixed(0).padStart(6)} KiB` : 'omitted   '}${a.truncated ? '  truncated (over its cap)' : ''}${a.omitted_reason ? `  ${a.omitted_reason}` : ''}`);
    }
  } finally {
    conn.disconnect();
    await redis.destroy();
  }
}

main().catch((err) => { console.error(err); process.exit(1); });
