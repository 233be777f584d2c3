// The floor of a notification delivery without the service, for the notify bench: one process reads the bus stream
// through a consumer group (pages of 500), POSTs each event once to RECEIVER_URL (keep-alive node:http, at most
// CONCURRENCY in flight, as the service's webhook client), records each page's outcomes with one Redis script (a
// hash field per delivery) and acknowledges the page. No routing, presets, rows, retries, queue or events.
import http from 'node:http';
import { Redis } from 'ioredis';

const STREAM = process.env.STREAM!;
const target = new URL(process.env.RECEIVER_URL!);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 16);
const RECORD = "for i = 1, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end return 1";
const redis = new Redis(process.env.REDIS_URL!);
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

const post = (body: string) => new Promise<number>((resolve) => {
  const req = http.request(target, { method: 'POST', agent, headers: { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) } }, (res) => {
    res.resume();
    res.on('end', () => resolve(res.statusCode ?? 0));
  });
  req.on('error', () => resolve(0));
  req.end(body);
});

async function main() {
  await redis.xgroup('CREATE', STREAM, 'bare', '$', 'MKSTREAM');
  process.stdout.write('ready\n');
  for (;;) {
    const res = (await redis.xreadgroup('GROUP', 'bare', 'c1', 'COUNT', 500, 'BLOCK', 2000, 'STREAMS', STREAM, '>')) as [string, [string, string[]][]][] | null;
    if (!res) continue;
    const page = res[0][1];
    const outcomes: string[] = [];
    let next = 0;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < page.length) {
        const [id, fields] = page[next++];
        outcomes.push(id, String(await post(fields[1])));
      }
    }));
    await redis.eval(RECORD, 1, 'bare:deliveries', ...outcomes);
    await redis.xack(STREAM, 'bare', ...page.map(([id]) => id));
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
