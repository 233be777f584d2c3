import { Redis } from 'ioredis';
import { ResourceStore } from '/work/main/store/resource-store.ts';
const r = new Redis(process.env.REDIS_URL!);
await r.flushall();
const store = new ResourceStore({ redis: r });
const spec = (i: number) => ({ name: `agent-${i}`, prompt: 'You help with the benchmark.', tools: ['svc__read'], model: 'm' });
for (let i = 0; i < 10000; i += 200) await Promise.all(Array.from({ length: 200 }, (_, j) => store.put({ kind: 'agent', id: `cold${i + j}`, scope: { kind: 'global' }, owner: { kind: 'daemon', id: 'daemon-control' }, source: { kind: 'daemon', id: 'system' }, spec: spec(i + j), expectedVersion: 0 } as any)));
process.exit(0);
