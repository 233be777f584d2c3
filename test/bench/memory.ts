/**
 * Memory bench: decided writes/s through the controller and the apply script, and whether they hold as a
 * partition grows; search p50/p99 over 10,000 memories (one workspace visible, every memory visible, a repeated
 * query); the search index's heap and RSS at 10,000 memories; index catch-up lag between two processes' indexes over
 * the bus (p99); a session ledger of 1,000 events (write, verified read, size). Prints figures; asserts nothing.
 * Run: node --expose-gc --import tsx test/bench/memory.ts
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Memory } from '../../runtime/memory/index.ts';
import { LedgerService } from '../../runtime/memory/ledger-service.ts';
import { MemoryIndex, visiblePartitions } from '../../runtime/memory/search.ts';
import { EventBus } from '../../store/event-bus.ts';
import { Keys } from '../../store/keys.ts';
import { LedgerStore } from '../../store/ledger-store.ts';
import { MemoryStore } from '../../store/memory-store.ts';
import type { ScriptCommands } from '../../store/scripts.ts';
import { SessionStore } from '../../store/session-store.ts';
import { RedisServer } from '../helpers/redis-server.ts';

const N = Number(process.env.MEMORY_BENCH_N ?? 10_000);
const PARTITIONS = 100;
const BIG = Number(process.env.MEMORY_BENCH_BIG ?? 2_000);
const WORDS = 'deploy release review database cache queue worker tenant billing invoice schema migration index replica shard cluster token session agent prompt memory recall budget latency throughput error retry backoff timeout lease claim heartbeat webhook trigger schedule cron bundle skill tool vault secret policy audit export import archive'.split(' ');

let seed = 7;
const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
// NOTE: a vocabulary like prose: the 48 domain words above plus 4000 made-up ones, drawn with a Zipf-like skew (a
// few words are common, most are rare). With only the 48 words every memory matches every query, which no real
// corpus does; MEMORY_BENCH_VOCAB=small runs that worst case.
const SYL = ['ka', 'lo', 'mi', 'ne', 'ru', 'ta', 'vo', 'si', 'pe', 'da', 'gu', 'ho', 'ze', 'fi', 'bo', 'cy'];
const VOCAB = process.env.MEMORY_BENCH_VOCAB === 'small' ? WORDS : [...WORDS, ...Array.from({ length: 4000 }, (_, i) => SYL[i % 16] + SYL[(i >> 4) % 16] + SYL[(i >> 8) % 16])];
const pick = () => VOCAB[Math.floor(VOCAB.length * rnd() ** 2)];
const sentence = (n: number) => Array.from({ length: n }, pick).join(' ');
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const mib = (b: number) => (b / 1048576).toFixed(1);

const gc = (globalThis as { gc?: () => void }).gc;
const settle = () => { gc?.(); gc?.(); return process.memoryUsage(); };

/**
 * searchFigures times searches of an index: one workspace visible, every memory visible, and 20 queries asked again
 * and again (the query cache).
 */
function searchFigures(index: MemoryIndex): Record<string, { p50: number; p99: number }> {
  settle();
  const times: number[] = [];
  for (let i = 0; i < 1000; i++) {
    const text = sentence(3);
    const visible = visiblePartitions({ workspace_id: `ws${i % PARTITIONS}` });
    const s = performance.now();
    index.search({ text, visible, topK: 5, rawCandidates: 50 });
    times.push(performance.now() - s);
  }
  const all = new Set([...[...Array(PARTITIONS).keys()].map((i) => `w:ws${i}`), 'w:big']);
  const timesAll: number[] = [];
  for (let i = 0; i < 300; i++) {
    const s = performance.now();
    index.search({ text: sentence(3), visible: all, topK: 5, rawCandidates: 50 });
    timesAll.push(performance.now() - s);
  }
  const asked = Array.from({ length: 20 }, () => sentence(3));
  const timesRepeat: number[] = [];
  for (let i = 0; i < 1000; i++) {
    const s = performance.now();
    index.search({ text: asked[i % asked.length], visible: all, topK: 5, rawCandidates: 50 });
    timesRepeat.push(performance.now() - s);
  }
  const f = (xs: number[]) => ({ p50: pct(xs, 0.5), p99: pct(xs, 0.99) });
  return { one: f(times), all: f(timesAll), repeat: f(timesRepeat) };
}

// NOTE: the index's RSS is measured in a process of its own that only builds it (a child of this bench): in the
// bench's own process, RSS after 10,000 writes says more about that garbage than about the index.
if (process.env.MEMORY_BENCH_INDEX_OF) {
  const { Redis } = await import('ioredis');
  const conn = new Redis(process.env.MEMORY_BENCH_INDEX_OF);
  const store = new MemoryStore(conn, new Keys('svc:'));
  await store.revision();
  // NOTE: what the index holds is the process's RSS with it minus the same process's RSS once it is dropped, each
  // measured idle (V8 gives back the young generation a burst grew only when its memory reducer runs on an idle
  // process), so neither the build's garbage nor the runtime's own memory is counted.
  const idle = async () => { settle(); await new Promise((r) => setTimeout(r, 12_000)); return settle(); };
  let index: MemoryIndex | undefined = new MemoryIndex({ store });
  await index.rebuild();
  const size = index.size;
  // NOTE: searches are timed here too, in a process holding only the index: in the bench's own process, the heap
  // its 12,000 writes left makes GC pauses that even a cached answer (0.04 ms at p50) shows at p99.
  const search = searchFigures(index);
  const withIt = await idle();
  index = undefined;
  const without = await idle();
  console.log(JSON.stringify({ size, rss: withIt.rss - without.rss, heap: withIt.heapUsed - without.heapUsed, rssTotal: withIt.rss, search }));
  conn.disconnect();
  process.exit(0);
}

const redis = new RedisServer();
await redis.start();
const conn = redis.client();
const keys = new Keys('svc:');
const bus = new EventBus(conn, keys);
// NOTE: the family as an api process runs it: the recall index follows every write and answers the surface rule.
let memory: Memory | undefined = new Memory({ redis: conn, keys, bus, policy: { maxWritesPerMin: 1_000_000 } });
await memory.start();

let t0 = performance.now();
for (let i = 0; i < N; i++) {
  const ws = `ws${i % PARTITIONS}`;
  await memory!.write({ scope: 'workspace', workspace_id: ws, type: 'project', name: `fact ${i}`, content: `Fact ${i}: ${sentence(24)}.` }, { origin: 'http' });
}
const writeSecs = (performance.now() - t0) / 1000;
console.log(`memory writes decided and applied: ${N} in ${writeSecs.toFixed(1)} s = ${(N / writeSecs).toFixed(0)}/s (${PARTITIONS} partitions of up to ${N / PARTITIONS} memories, one client, recall index following)`);

// one partition growing to BIG memories: writes/s of its first and last 200
const window: number[] = [];
const rates: string[] = [];
for (let i = 0; i < BIG; i++) {
  const s = performance.now();
  await memory!.write({ scope: 'workspace', workspace_id: 'big', type: 'project', name: `big fact ${i}`, content: `Big fact ${i}: ${sentence(24)}.` }, { origin: 'http' });
  window.push(performance.now() - s);
  if (i === 199 || i === BIG - 1) rates.push(`${(1000 / (window.slice(-200).reduce((a, b) => a + b, 0) / 200)).toFixed(0)}/s at ${i - 199}-${i}`);
}
console.log(`writes into one partition as it grows to ${BIG}: ${rates.join(', ')}`);
await memory.stop();
// NOTE: the writer's own index is dropped before the search figures, so its heap does not lengthen their GC pauses.
memory = undefined;

const child = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', fileURLToPath(import.meta.url)], { env: { ...process.env, MEMORY_BENCH_INDEX_OF: redis.url }, encoding: 'utf8' });
const own = JSON.parse(child.stdout.trim().split('\n').pop() ?? '{}') as { size: number; rss: number; heap: number; rssTotal: number; search: ReturnType<typeof searchFigures> };
const index = new MemoryIndex({ store: new MemoryStore(conn, keys) });
t0 = performance.now();
await index.rebuild();
const buildMs = performance.now() - t0;
console.log(`search index: ${index.size} memories built in ${buildMs.toFixed(0)} ms; held by the index in a process of its own (idle, with it minus without it): heap ${mib(own.heap)} MiB, RSS ${mib(own.rss)} MiB (that process's RSS with it: ${mib(own.rssTotal)} MiB)`);
const ms = (x: { p50: number; p99: number }) => `p50 ${x.p50.toFixed(2)} ms, p99 ${x.p99.toFixed(2)} ms`;
console.log(`search over ${own.size} memories in that process (one workspace visible, 3-word queries): ${ms(own.search.one)} (target p99 ≤ 20 ms)`);
console.log(`search over ${own.size} memories in that process (every memory visible): ${ms(own.search.all)}`);
console.log(`search, 20 queries asked again and again (every memory visible; the query cache): ${ms(own.search.repeat)}`);
const mine = searchFigures(index);
console.log(`the same searches in this bench's process (after its writes): one workspace ${ms(mine.one)}; every memory ${ms(mine.all)}`);


// catch-up: a second index follows the bus while this process writes
const writer = new Memory({ redis: conn, keys, bus, policy: { maxWritesPerMin: 1_000_000 } });
const follower = new MemoryIndex({ store: new MemoryStore(redis.client(), keys), bus: new EventBus(redis.client(), keys) });
await follower.start();
const lags: number[] = [];
for (let i = 0; i < 200; i++) {
  const name = `lag probe ${i}`;
  const s = performance.now();
  await writer.write({ scope: 'global', type: 'user', name, content: `Probe ${i} zq${i}x ${sentence(5)}.` }, { origin: 'http' });
  const visible = visiblePartitions({});
  while (!follower.search({ text: `zq${i}x`, visible, topK: 1, rawCandidates: 5 }).some((h) => h.filename.includes(`lag_probe_${i}.`))) await new Promise((r) => setTimeout(r, 1));
  lags.push(performance.now() - s);
}
console.log(`index catch-up between two processes' indexes (write → searchable on the other, over the bus): p50 ${pct(lags, 0.5).toFixed(1)} ms, p99 ${pct(lags, 0.99).toFixed(1)} ms`);
await follower.stop();

// a session ledger of 1,000 events: written once at stop, verified on read
// NOTE: MemoryStore defined every script on this connection (defineScripts).
const scripted = conn as typeof conn & ScriptCommands;
const sessions = new SessionStore(scripted, keys);
const ledgerStore = new LedgerStore(scripted, keys);
const ledgers = new LedgerService({ ledgers: ledgerStore, sessions, workspaces: { get: async (ref: string) => ({ id: ref }) as never }, logger: { warn: () => undefined } as never });
const writesMs: number[] = [];
const readsMs: number[] = [];
let bytes = 0;
let redisBytes = 0;
for (let r = 0; r < 5; r++) {
  const id = `sess-bench${r}`;
  const at = new Date().toISOString();
  await sessions.create({ id, name: '', agent_name: 'scripted', workspace_id: 'wsl', workspace_path: '/tmp', state: 'stopped', created_at: at, updated_at: at } as never);
  const base = { session_id: id, agent_name: 'scripted', workspace_id: 'wsl', workspace_path: '/tmp', parent_session_id: '', root_session_id: id, spawn_depth: 0 };
  for (let i = 0; i < 999; i++) {
    const type = i % 10 === 0 ? 'user_message' : i % 10 === 5 ? 'tool_call' : 'agent_message';
    await sessions.append({ ...base, turn_id: `t${Math.floor(i / 10)}`, type, content: { text: sentence(30) }, timestamp: new Date().toISOString() });
  }
  await sessions.append({ ...base, turn_id: '', type: 'session_stopped', content: { stop_reason: 'user' }, timestamp: new Date().toISOString() });
  let s = performance.now();
  const outcome = await ledgers.materialize(id);
  writesMs.push(performance.now() - s);
  if (outcome !== 'written') throw new Error(`ledger ${outcome}`);
  s = performance.now();
  const read = await ledgers.get('wsl', id);
  readsMs.push(performance.now() - s);
  if (read.events.length !== 1000) throw new Error(`ledger read ${read.events.length} events`);
  bytes = (await conn.hget(`svc:{s:${id}}:ledger`, 'jsonl'))!.length;
  redisBytes = Number(await conn.call('MEMORY', 'USAGE', `svc:{s:${id}}:ledger`, 'SAMPLES', '0'));
}
console.log(`session ledger of 1,000 events (30-word texts): written in p50 ${pct(writesMs, 0.5).toFixed(0)} ms (max ${Math.max(...writesMs).toFixed(0)}), read and verified in p50 ${pct(readsMs, 0.5).toFixed(0)} ms; ${(bytes / 1024).toFixed(0)} KiB of JSON Lines, ${(redisBytes / 1024).toFixed(0)} KiB in Redis`);
conn.disconnect();
await redis.destroy();
process.exit(0);
