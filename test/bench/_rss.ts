import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { RedisServer } from '/work/main/test/helpers/redis-server.ts';
import { ServiceProcess } from '/work/main/test/helpers/process.ts';
import { ResourceStore } from '/work/main/store/resource-store.ts';
const rss = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
const redis = await new RedisServer().start();
const r = new Redis(redis.url);
const store = new ResourceStore({ redis: r });
const spec = (i: number) => ({ name: `agent-${i}`, prompt: `You are agent ${i}. `.repeat(4), model: 'm', provider: 'p' });
for (let i = 0; i < 10000; i += 200) await Promise.all(Array.from({ length: 200 }, (_, j) => store.put({ kind: 'agent', id: `cold${i + j}`, scope: { kind: 'global' }, owner: { kind: 'daemon', id: 'daemon-control' }, source: { kind: 'daemon', id: 'system' }, spec: spec(i + j), expectedVersion: 0 } as any)));
const t0 = Date.now();
const svc = await new ServiceProcess({ REDIS_URL: redis.url, LOG_LEVEL: 'warn', ...(process.env.NODE_OPTIONS2 ? { NODE_OPTIONS: process.env.NODE_OPTIONS2 } : {}) }).start();
const pid = svc.proc!.pid!;
console.log('start rss', rss(pid).toFixed(0));
let peak = 0;
for (;;) { peak = Math.max(peak, rss(pid)); if ((await r.hlen('svc:observed')) >= 10000) break; await new Promise((res) => setTimeout(res, 50)); }
console.log('converged', ((Date.now() - t0) / 1000).toFixed(2), 's; rss', rss(pid).toFixed(0), 'peak', peak.toFixed(0));
const heap = async () => (await (await fetch(`${svc.url}/metrics`)).text()).split('\n').filter((l) => /^nodejs_heap_size_(used|total)_bytes |^nodejs_external_memory_bytes /.test(l)).map((l) => l.replace(/_bytes /, ' ').replace(/(\d+)$/, (x) => (Number(x) / 1048576).toFixed(0) + 'MiB')).join(', ');
console.log('heap', await heap());
await fetch(`${svc.url}/api/resources?kind=agent`).then((x) => x.arrayBuffer());
console.log('after list rss', rss(pid).toFixed(0), await heap());
await new Promise((res) => setTimeout(res, 5000));
console.log('after 5s rss', rss(pid).toFixed(0), await heap());
for (let i = 0; i < 6; i++) { await new Promise((res) => setTimeout(res, 10000)); console.log(`after ${15 + i * 10}s rss`, rss(pid).toFixed(0), await heap()); }
await svc.kill('SIGTERM'); r.disconnect(); await redis.destroy(); process.exit(0);
