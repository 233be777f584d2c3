// Makes sure a Redis answers at REDIS_URL before `make run` starts the service (and that `redis-server` exists
// for `make test`, whose tests start their own). Usage: node --import tsx runtime/process/ensure-redis.ts [--binary-only]
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { redisAnswers } from '../../store/redis-ping.ts';

const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const dataDir = path.resolve(process.env.DATA_DIR || './.data');
const binaryOnly = process.argv.includes('--binary-only');

function fail(message: string): never {
  process.stderr.write(`ensure-redis: ${message}\n`);
  process.exit(1);
}

const answers = () => redisAnswers(url);

function redisServerBinary(): string {
  const found = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).stdout.trim();
  if (found) return found;
  const hasApt = spawnSync('sh', ['-c', 'command -v apt-get'], { encoding: 'utf8' }).stdout.trim();
  if (process.getuid?.() === 0 && hasApt) {
    process.stderr.write('ensure-redis: redis-server is missing; installing it with apt-get\n');
    execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit' });
    execFileSync('apt-get', ['install', '-y', '-qq', 'redis-server'], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    return redisServerBinary();
  }
  fail('redis-server is not installed. Install it (Debian/Ubuntu: `sudo apt-get install redis-server`, macOS: `brew install redis`) or set REDIS_URL to a Redis that answers.');
}

const binary = redisServerBinary();
if (binaryOnly) process.exit(0);
// NOTE: only the single-Redis mode reads REDIS_URL; a Cluster or Sentinel setup names its own nodes, and a Redis
// started here would be one the service never uses.
if (!process.env.REDIS_URL && (process.env.REDIS_CLUSTER_NODES || process.env.REDIS_SENTINELS)) process.exit(0);
if (await answers()) process.exit(0);

const u = new URL(url);
if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(u.hostname)) fail(`no Redis answers at ${url}, and it is not local, so none is started`);
const dir = path.join(dataDir, 'redis');
mkdirSync(dir, { recursive: true });
// NOTE: AOF with fsync on every write (like etcd): an acknowledged write survives a power loss. REDIS_FSYNC=everysec
// trades that for speed: a process crash still loses nothing, a machine crash up to ~1 s of acknowledged writes.
const fsync = process.env.REDIS_FSYNC || 'always';
if (!['always', 'everysec'].includes(fsync)) fail(`REDIS_FSYNC="${fsync}" must be always or everysec`);
execFileSync(binary, [
  '--port', u.port || '6379', '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes',
  '--appendfsync', fsync, '--save', '', '--daemonize', 'yes',
  '--logfile', path.join(dir, 'redis.log'), '--pidfile', path.join(dir, 'redis.pid'),
], { stdio: 'inherit' });
for (let i = 0; i < 50; i++) {
  if (await answers()) {
    process.stderr.write(`ensure-redis: started redis-server on ${url} with data in ${dir}\n`);
    process.exit(0);
  }
  await new Promise((r) => setTimeout(r, 100));
}
fail(`started redis-server but it does not answer at ${url}; see ${path.join(dir, 'redis.log')}`);
