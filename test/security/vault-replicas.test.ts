import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import type { Service } from '../../runtime/process/service.ts';
import { vaultKeyId } from '../../runtime/vault/keys.ts';
import { Keys } from '../../store/keys.ts';
import { VaultStore } from '../../store/vault-store.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, startService } from '../helpers/service.ts';
import { legacySeal } from '../helpers/vault-legacy.ts';

const CANARY = 'canary-replica-Vx81-secret';

describe('Vault keys across replicas: two services with their own DATA_DIR on one Redis (HTTP, real Redis)', function () {
  this.timeout(60_000);
  const redis = new RedisServer();
  let base: string;
  let admin: Redis;
  const services: Service[] = [];

  before(async () => {
    await redis.start();
    admin = redis.client();
  });
  after(async () => {
    admin.disconnect();
    await redis.destroy();
  });
  beforeEach(async () => {
    await redis.flush();
    base = mkdtempSync(path.join(os.tmpdir(), 'svc-vault-replicas-'));
  });
  afterEach(async () => {
    for (const s of services.splice(0)) await s.stop();
    rmSync(base, { recursive: true, force: true });
  });

  /** replica starts a service (AUTH_MODE=none) whose DATA_DIR is its own: it makes its own default key `k1`. */
  const replica = async (name: string, env: Record<string, string> = {}) => {
    const dataDir = path.join(base, name);
    const service = await startService(redis.url, { DATA_DIR: dataDir, ...env });
    services.push(service);
    return { service, api: new Client(service.url), dataDir };
  };
  /** keyIdIn is the id of the default key a DATA_DIR holds. */
  const keyIdIn = (dataDir: string) => vaultKeyId(Buffer.from(/^k1=(.+)$/m.exec(readFileSync(path.join(dataDir, 'vault.key'), 'utf8'))![1], 'base64'));
  const vaultState = async () => ({ sealed: await admin.hgetall('svc:{vault}:sealed'), keyuse: await admin.hgetall('svc:{vault}:keyuse'), rev: await admin.get('svc:{vault}:rev') });

  it('both keys are named k1 but have different ids; the replica lacking the key in use is not ready, says which key in its status, and writes nothing', async () => {
    const a = await replica('a');
    const b = await replica('b');
    const [idA, idB] = [keyIdIn(a.dataDir), keyIdIn(b.dataDir)];
    expect(idA, 'two different keys under one name never share an id').to.not.equal(idB);
    for (const r of [a, b]) expect((await r.api.get('/readyz')).body.checks.vault, 'an empty vault: every replica can open it').to.equal('ok');

    expect((await a.api.put('/api/vault/secrets', { ref: 'vault:mcp/token', secret_value: CANARY })).status).to.equal(200);
    expect(await admin.hgetall('svc:{vault}:keyuse')).to.deep.equal({ [idA]: '1' });

    const readyA = await a.api.get('/readyz');
    expect(readyA.status).to.equal(200);
    const statusA = (await a.api.get('/api/vault/status')).body.status;
    expect(statusA).to.deep.include({ rotation_needed: false, missing_keys: [], undecryptable: 0 });

    const readyB = await b.api.get('/readyz');
    expect(readyB.status, JSON.stringify(readyB.body)).to.equal(503);
    expect(readyB.body.checks.vault).to.include(idA).and.match(/1 vault secret\(s\) are sealed by key\(s\) this process lacks/);
    expect(readyB.body.checks.redis).to.equal('ok');
    const statusB = (await b.api.get('/api/vault/status')).body.status;
    expect(statusB).to.deep.include({ rotation_needed: true, missing_keys: [idA], undecryptable: 1 });
    expect(statusB.keys).to.deep.equal([
      { id: idB, name: 'k1', configured: true, sealing: true, secrets: 0 },
      { id: idA, configured: false, sealing: false, secrets: 1 },
    ]);
    const resolved = await b.service.security.secrets.resolve({ TOKEN: 'vault:mcp/token' });
    expect(resolved.missing).to.deep.equal(['TOKEN']);
    expect(resolved.problems.TOKEN).to.include(idA);

    // B's write would seal under a key A lacks in turn: refused, and the vault is as it was.
    const before = await vaultState();
    const put = await b.api.put('/api/vault/secrets', { ref: 'vault:mcp/other', secret_value: 'another-secret-value' });
    expect(put.status, JSON.stringify(put.body)).to.equal(503);
    expect(put.body.diagnostic.code).to.equal('vault_keys_missing');
    expect(put.body.diagnostic.evidence.missing_keys).to.deep.equal([idA]);
    const replaced = await b.api.put('/api/vault/secrets', { ref: 'vault:mcp/token', secret_value: 'a-replacement-value' });
    expect(replaced.status).to.equal(503);
    expect(await vaultState(), 'nothing written').to.deep.equal(before);
    expect(JSON.stringify([readyB.body, statusB, put.body, resolved])).to.not.include(CANARY);
  });

  it('a replica started after the secrets were written is not ready from its first probe; one given the same key file is, and opens them', async () => {
    const a = await replica('a');
    expect((await a.api.put('/api/vault/secrets', { ref: 'vault:hooks/deploy', secret_value: CANARY })).status).to.equal(200);

    const late = await replica('late');
    const first = await late.api.get('/readyz');
    expect(first.status).to.equal(503);
    expect(first.body.checks.vault).to.include(keyIdIn(a.dataDir));

    const sharedDir = path.join(base, 'shared');
    mkdirSync(sharedDir, { mode: 0o700 });
    copyFileSync(path.join(a.dataDir, 'vault.key'), path.join(sharedDir, 'vault.key'));
    const shared = await replica('shared');
    const ready = await shared.api.get('/readyz');
    expect(ready.status, JSON.stringify(ready.body)).to.equal(200);
    expect(ready.body.checks.vault).to.equal('ok');
    expect((await shared.service.security.secrets.resolve({ X: 'vault:hooks/deploy' })).env).to.deep.equal({ X: CANARY });

    // The late replica, given A's key beside its own, can open everything again.
    const own = /^k1=(.+)$/m.exec(readFileSync(path.join(late.dataDir, 'vault.key'), 'utf8'))![1];
    const theirs = /^k1=(.+)$/m.exec(readFileSync(path.join(a.dataDir, 'vault.key'), 'utf8'))![1];
    const fixed = await replica('fixed', { SVC_VAULT_KEYS: `own=${own},from-a=${theirs}` });
    expect((await fixed.api.get('/readyz')).status).to.equal(200);
    expect((await fixed.api.get('/api/vault/status')).body.status).to.deep.include({ missing_keys: [], undecryptable: 0, rotation_needed: true });
  });

  it('secrets sealed before ids were derived (their id the key name k1) stay readable, show as legacy, and rotation moves them to the derived id', async () => {
    const bytes = randomBytes(32);
    const store = new VaultStore(admin, new Keys());
    await store.put('vault:mcp/old', legacySeal('k1', bytes, 'vault:mcp/old', CANARY), '', new Date().toISOString());
    const r = await replica('r', { SVC_VAULT_KEYS: `k1=${bytes.toString('base64')}` });
    const id = vaultKeyId(bytes);
    expect((await r.api.get('/readyz')).status, 'a configured name opens its legacy values').to.equal(200);
    const before = (await r.api.get('/api/vault/status')).body.status;
    expect(before).to.deep.include({ rotation_needed: true, missing_keys: [], undecryptable: 0 });
    expect(before.keys).to.deep.equal([
      { id, name: 'k1', configured: true, sealing: true, secrets: 0 },
      { id: 'k1', name: 'k1', configured: true, legacy: true, sealing: false, secrets: 1 },
    ]);
    expect((await r.service.security.secrets.resolve({ X: 'vault:mcp/old' })).env).to.deep.equal({ X: CANARY });

    const rotation = (await r.api.post('/api/vault/rotate', {})).body.rotation;
    expect(rotation).to.include({ key_id: id, rotated: 1, unreadable: 0 });
    expect(await admin.hgetall('svc:{vault}:keyuse')).to.deep.equal({ [id]: '1' });
    expect((await r.api.get('/api/vault/status')).body.status).to.deep.include({ rotation_needed: false, missing_keys: [] });
    expect((await r.service.security.secrets.resolve({ X: 'vault:mcp/old' })).env).to.deep.equal({ X: CANARY });
  });
});
