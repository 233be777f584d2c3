// `make bench`, Redis Cluster part: the store's two hot write paths on one Redis and on a 3-master Redis Cluster,
// side by side in one run, through the service's own store code and connection factory (store/connections.ts).
// On one machine the masters share its cores, so what this reports is what scales with masters: Redis CPU per
// session event and per validated resource write, split per master, and how 10,000 sessions' keys spread over
// the masters; plus events/s and writes/s from one client process (a ceiling of that client, not of Redis).
// Not a test: no assertions.
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { codecs } from '../../codecs/index.ts';
import { RedisConnections } from '../../store/connections.ts';
import { Keys } from '../../store/keys.ts';
import { ResourceStore } from '../../store/resource-store.ts';
import { SessionStore } from '../../store/session-store.ts';
import { defineScripts, type ScriptCommands } from '../../store/scripts.ts';
import { RedisCluster } from '../helpers/redis-cluster.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { ask } from '../helpers/redis-sentinel.ts';

const slotOf = createRequire(import.meta.url)('cluster-key-slot') as (key: string) => number;
const SECONDS = 5;
const CONCURRENCY = 64;
const SESSIONS = 10_000;

interface Topology { name: string; ports: number[]; env: Record<string, string> }

/** cpu is each master's Redis CPU seconds so far (user + sys, INFO cpu). */
async function cpu(ports: number[]): Promise<number[]> {
  return Promise.all(ports.map(async (p) => {
    const info = String(await ask(p, 'INFO', 'cpu'));
    const f = (k: string) => Number(new RegExp(`${k}:([0-9.]+)`).exec(info)?.[1] ?? 0);
    return f('used_cpu_user') + f('used_cpu_sys');
  }));
}

/** load runs `op` from CONCURRENCY loops for SECONDS and reports ops/s and Redis µs per op, per master. */
async function load(t: Topology, label: string, op: (i: number) => Promise<unknown>): Promise<string> {
  const before = await cpu(t.ports);
  let n = 0;
  const end = Date.now() + SECONDS * 1000;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => { while (Date.now() < end) await op(n++); }));
  const after = await cpu(t.ports);
  const per = after.map((a, i) => ((a - before[i]) * 1e6) / n);
  return `${t.name}: ${label} ${(n / SECONDS).toFixed(0)}/s; Redis CPU per op ${per.reduce((a, b) => a + b, 0).toFixed(1)} µs = ${per.map((u, i) => `master ${i + 1}: ${u.toFixed(1)}`).join(', ')}`;
}

async function measure(t: Topology): Promise<string[]> {
  const { loadConfig } = await import('../../runtime/process/config.ts');
  const conns = new RedisConnections(loadConfig(t.env).redis);
  const redis = conns.open('bench', 'command') as Redis & ScriptCommands;
  defineScripts();
  const keys = new Keys();
  const resources = new ResourceStore({ redis, keys });
  const sessions = new SessionStore(redis, keys);
  const agent = codecs.get('agent')!;
  const out: string[] = [];
  // A validated write: the codec decodes the spec, then one put-record script (record, indexes, change log).
  out.push(await load(t, 'validated resource writes (creates)', (i) => {
    const decoded = agent.decode({ name: `bench-${i}`, prompt: 'You help with the benchmark.' }, { scope: { kind: 'global' } });
    if (!decoded.ok) throw new Error(JSON.stringify(decoded.errors));
    return resources.put({
      kind: 'agent', id: `bench-${i}`, scope: { kind: 'global' }, owner: { kind: 'daemon', id: 'daemon-control' }, source: { kind: 'daemon', id: 'system' },
      spec: decoded.spec, expectedVersion: 0,
    });
  }));
  // Session events over 1,000 live sessions: one append-event script each (the session's own tag).
  const ids = Array.from({ length: 1000 }, () => `sess-${randomUUID()}`);
  const event = (id: string) => ({ session_id: id, turn_id: 't1', type: 'agent_message', agent_name: 'scripted', workspace_id: 'ws', workspace_path: '/w', content: { text: 'hello from the benchmark' }, timestamp: new Date().toISOString(), parent_session_id: '', root_session_id: id, spawn_depth: 0 });
  out.push(await load(t, 'session events (1,000 sessions)', (i) => sessions.append(event(ids[i % ids.length]))));
  // Key spread: 10,000 sessions' event keys, by the master that serves each slot.
  if (t.ports.length > 1) {
    const ranges = (await ask(t.ports[0], 'CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
    const masterOf = (slot: number) => t.ports.indexOf(Number(ranges.find(([a, b]) => slot >= a && slot <= b)![2][1]));
    const counts = t.ports.map(() => 0);
    const slots = new Set<number>();
    for (let i = 0; i < SESSIONS; i++) { const k = sessions.eventsKey(`sess-${randomUUID()}`); const s = slotOf(k); slots.add(s); counts[masterOf(s)]++; }
    out.push(`${t.name}: ${SESSIONS} sessions' keys over ${slots.size} slots: ${counts.map((c, i) => `master ${i + 1} ${((c / SESSIONS) * 100).toFixed(1)}%`).join(', ')}; the resource layer ({r}) is one slot on master ${masterOf(slotOf(keys.revision)) + 1}`);
  }
  redis.disconnect();
  return out;
}

const single = await new RedisServer().start();
const cluster = await new RedisCluster().start();
try {
  const lines = [
    ...(await measure({ name: '1 Redis', ports: [single.port], env: single.env })),
    ...(await measure({ name: '3-master cluster', ports: cluster.ports, env: cluster.env })),
  ];
  for (const l of lines) console.log(l);
} finally {
  await single.destroy();
  await cluster.destroy();
}
process.exit(0);
