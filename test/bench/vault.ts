// `make bench`, vault part: `vault:` ref resolution with 1,000 secrets (target p99 <= 1 ms) and rotation of 10,000
// secrets (target <= 10 s), against a private redis-server. Prints figures with CPU per operation; no assertions.
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { SecurityPolicy } from '../../runtime/security/policy.ts';
import { seal } from '../../runtime/vault/envelope.ts';
import { VaultKeyring } from '../../runtime/vault/keys.ts';
import { VaultService } from '../../runtime/vault/vault-service.ts';
import { Keys } from '../../store/keys.ts';
import { VaultStore } from '../../store/vault-store.ts';
import { RedisServer } from '../helpers/redis-server.ts';

const SECRETS = Number(process.env.BENCH_VAULT_SECRETS ?? 1000);
const RESOLUTIONS = Number(process.env.BENCH_VAULT_RESOLUTIONS ?? 20_000);
const ROTATE = Number(process.env.BENCH_VAULT_ROTATE ?? 10_000);
const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };
const ms = (n: number) => `${n.toFixed(3)} ms`;
const logger = pino({ level: 'silent' });
const key = (name: string) => ({ name, key: randomBytes(32) });

async function seed(store: VaultStore, ring: VaultKeyring, n: number, prefix: string) {
  const now = new Date().toISOString();
  for (let i = 0; i < n; i += 1000) {
    await Promise.all(Array.from({ length: Math.min(1000, n - i) }, (_, j) => {
      const ref = `vault:${prefix}/s${i + j}`;
      return store.put(ref, seal(ring, ref, `bench-secret-value-${i + j}-${randomBytes(8).toString('hex')}`), '', now);
    }));
  }
}

/** measure runs `op` n times one after another: latencies, and process CPU per op (user + system). */
async function measure(n: number, op: (i: number) => Promise<unknown>) {
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await op(i);
    lat.push(performance.now() - t);
  }
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { p50: pct(lat, 50), p99: pct(lat, 99), max: Math.max(...lat), perSec: (n / wall) * 1000, cpuUsPerOp: (cpu.user + cpu.system) / n };
}

const redis = await new RedisServer().start();
const conn = redis.client();
try {
  const store = new VaultStore(conn, new Keys());
  const ring = new VaultKeyring([key('k1')]);
  const vault = new VaultService({ store, keyring: ring, logger });
  const security = new SecurityPolicy({ authMode: 'none', execAllowlist: ['*'], secretEnvAllowlist: ['SVC_SECRET_*'], allowedOrigins: [], allowedHosts: [], dataDir: '/tmp', secretFiles: [] });
  security.secrets.attachVault(vault);
  await seed(store, ring, SECRETS, 'mcp');
  console.log(`vault: ${SECRETS} secrets; ${RESOLUTIONS} resolutions of one random vault: ref each (SecretRefs.resolve, as a spawn does)`);
  // Warm: every ref resolved once (the cache then holds them until the revision moves).
  await measure(SECRETS, (i) => security.secrets.resolve({ TOKEN: `vault:mcp/s${i}` }));
  const warm = await measure(RESOLUTIONS, () => security.secrets.resolve({ TOKEN: `vault:mcp/s${Math.floor(Math.random() * SECRETS)}` }));
  console.log(`  cached (one GET of the revision): p50 ${ms(warm.p50)}  p99 ${ms(warm.p99)}  max ${ms(warm.max)}  ${warm.perSec.toFixed(0)}/s  CPU ${warm.cpuUsPerOp.toFixed(1)} µs/op`);
  // Cold: a write before each resolution moves the revision, so each one reads and opens its secret again.
  const other = 'vault:mcp/churn';
  const coldOnly: number[] = [];
  let coldCpu = 0;
  for (let i = 0; i < Math.min(RESOLUTIONS, 2000); i++) {
    await store.put(other, seal(ring, other, 'churn-value-123'), '', new Date().toISOString());
    const c = process.cpuUsage();
    const t = performance.now();
    await security.secrets.resolve({ TOKEN: `vault:mcp/s${Math.floor(Math.random() * SECRETS)}` });
    coldOnly.push(performance.now() - t);
    const d = process.cpuUsage(c);
    coldCpu += d.user + d.system;
  }
  console.log(`  right after a vault write (GET + HMGET + open): p50 ${ms(pct(coldOnly, 50))}  p99 ${ms(pct(coldOnly, 99))}  CPU ${(coldCpu / coldOnly.length).toFixed(1)} µs/op`);

  const oldKey = key('old');
  await seed(store, new VaultKeyring([oldKey]), ROTATE, 'hooks');
  const rotating = new VaultService({ store, keyring: new VaultKeyring([key('new'), oldKey, ring.primary]), logger });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const r = await rotating.rotate();
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  console.log(`vault: rotation of ${r.scanned} secrets (${r.rotated} re-sealed, ${r.already_current} current): ${(wall / 1000).toFixed(2)} s  ${((r.scanned / wall) * 1000).toFixed(0)} secrets/s  CPU ${((cpu.user + cpu.system) / r.rotated).toFixed(1)} µs per re-sealed secret`);
} finally {
  conn.disconnect();
  await redis.destroy();
}
