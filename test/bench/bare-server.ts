// This machine's HTTP ceiling for the benchmark: a bare node:http server that parses a JSON body and answers
// JSON, with no validation and no storage. With REDIS_URL set it also stores each body with one small Redis script
// (a hash field and a stream entry) before answering: the floor of a write that persists, for the write-path bench.
import http from 'node:http';
import { Redis } from 'ioredis';

const STORE = "redis.call('HSET', KEYS[1], 'json', ARGV[1]); redis.call('XADD', KEYS[2], 'MAXLEN', '~', 100000, '*', 'record', ARGV[1]); return 1";
const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined;

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    const body = JSON.parse(Buffer.concat(chunks).toString() || '{}');
    const json = JSON.stringify({ record: { ...body, version: 1 } });
    if (redis) await redis.eval(STORE, 2, `rec:${req.url}`, 'changes', json);
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end(json);
  });
});
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('ready\n'));
