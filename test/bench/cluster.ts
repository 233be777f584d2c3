// `make bench`, cluster part: write→reconciled latency and reconcile throughput with 1 and 2 controller
// processes (api and controllers in separate processes on one Redis). Not a test: no assertions.
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { ResourceStore } from '../../store/resource-store.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { ServiceProcess } from '../helpers/process.ts';

const RECORDS = 5000;
const spec = (i: number) => ({ name: `agent-${i}`, prompt: 'You help with the benchmark.' });

async function run(controllers: number, redis: RedisServer) {
  await redis.flush();
  const r = new Redis(redis.url);
  const store = new ResourceStore({ redis: r });
  const api = await new ServiceProcess({ REDIS_URL: redis.url, SVC_ROLES: 'api' }).start();
  const ctrls = await Promise.all(Array.from({ length: controllers }, () => new ServiceProcess({ REDIS_URL: redis.url, SVC_ROLES: 'controller' }).start()));
  // write→reconciled: PUT ?wait=true answers when the written version's reconcile is recorded.
  let n = 0;
  const res = await autocannon({
    url: api.url, connections: 10, duration: 5,
    requests: [{ method: 'PUT', setupRequest: (req) => ({ ...req, path: `/api/resources/agent/w${n++}?wait=true`, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ scope: { kind: 'global' }, spec: spec(n), expected_version: 0 }) }) }],
  });
  // Reconcile throughput: RECORDS records land at once (written straight to the store), then drain.
  await Promise.all(ctrls.map((c) => c.kill('SIGTERM')));
  for (let i = 0; i < RECORDS; i += 250) {
    await Promise.all(Array.from({ length: Math.min(250, RECORDS - i) }, (_, j) => store.put({
      kind: 'agent', id: `t${i + j}`, scope: { kind: 'global' }, owner: { kind: 'daemon', id: 'daemon-control' }, source: { kind: 'daemon', id: 'system' }, spec: spec(i + j), expectedVersion: 0,
    })));
  }
  const base = await r.hlen('svc:{r}:observed');
  const t0 = Date.now();
  const again = await Promise.all(Array.from({ length: controllers }, () => new ServiceProcess({ REDIS_URL: redis.url, SVC_ROLES: 'controller' }).start()));
  while ((await r.hlen('svc:{r}:observed')) < base + RECORDS) await new Promise((x) => setTimeout(x, 25));
  const secs = (Date.now() - t0) / 1000;
  console.log(`${controllers} controller process(es): write→reconciled p50 ${res.latency.p50} ms, p99 ${res.latency.p99} ms (10 writers); ${RECORDS} reconciles in ${secs.toFixed(2)} s from process start = ${(RECORDS / secs).toFixed(0)}/s`);
  await Promise.all([...again, api].map((p) => p.kill('SIGTERM')));
  r.disconnect();
}

const redis = await new RedisServer().start();
try {
  for (const c of [1, 2]) await run(c, redis);
} finally {
  await redis.destroy();
}
process.exit(0);
