import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { seal } from '../../runtime/vault/envelope.ts';
import { VaultKeyring, vaultKeyId } from '../../runtime/vault/keys.ts';
import { VaultService } from '../../runtime/vault/vault-service.ts';
import { Keys } from '../../store/keys.ts';
import { VaultStore } from '../../store/vault-store.ts';
import { ProcessCluster } from '../helpers/process.ts';

const N = 20_000;

describe('Vault rotation killed half-way (SIGKILL of a service process)', function () {
  this.timeout(180_000);
  const oldKey = { name: 'old', key: randomBytes(32) };
  const newKey = { name: 'new', key: randomBytes(32) };
  const [OLD, NEW] = [vaultKeyId(oldKey.key), vaultKeyId(newKey.key)];
  const keysEnv = (...ks: { name: string; key: Buffer }[]) => ks.map((k) => `${k.name}=${k.key.toString('base64')}`).join(',');
  const cluster = new ProcessCluster('vault-rotation').install();

  it('leaves every secret sealed by the old or the new key (all still open), and a rerun finishes the rest', async () => {
    const redis = cluster.redis.client();
    const store = new VaultStore(redis, new Keys());
    const vault = (...ks: { name: string; key: Buffer }[]) => new VaultService({ store, keyring: new VaultKeyring(ks), logger: pino({ level: 'silent' }) });
    const old = new VaultKeyring([oldKey]);
    const now = new Date().toISOString();
    for (let i = 0; i < N; i += 1000) {
      await Promise.all(Array.from({ length: Math.min(1000, N - i) }, (_, j) => {
        const ref = `vault:mcp/s${String(i + j).padStart(6, '0')}`;
        return store.put(ref, seal(old, ref, `secret-value-${i + j}`), '', now);
      }));
    }
    expect(await store.keyUse()).to.deep.equal({ [OLD]: N });

    const first = await cluster.start('api', { SVC_VAULT_KEYS: keysEnv(newKey, oldKey) });
    const rotating = fetch(`${first.url}/api/vault/rotate`, { method: 'POST' }).catch(() => undefined);
    let use: Record<string, number> = {};
    for (;;) {
      use = await store.keyUse();
      if ((use[NEW] ?? 0) > 0) break;
      await new Promise((r) => setTimeout(r, 2));
    }
    await first.kill('SIGKILL');
    await rotating;
    use = await store.keyUse();
    expect(use[NEW], 'killed after it began').to.be.greaterThan(0);
    expect(use[OLD], 'killed before it finished').to.be.greaterThan(0);
    expect(use[NEW] + use[OLD]).to.equal(N);

    // Until the rerun, old-key secrets still open (with both keys configured), and so do the re-sealed ones.
    const values = await vault(newKey, oldKey).values();
    expect(values).to.have.length(N);
    expect(new Set(values).has("secret-value-12345")).to.equal(true);

    const second = await cluster.start('api', { SVC_VAULT_KEYS: keysEnv(newKey, oldKey) });
    const res = await fetch(`${second.url}/api/vault/rotate`, { method: 'POST' });
    const { rotation } = await res.json() as { rotation: Record<string, number> };
    expect(rotation).to.include({ key_id: NEW, scanned: N, rotated: use[OLD], already_current: use[NEW], unreadable: 0, changed_during_rotation: 0 });
    expect(await store.keyUse()).to.deep.equal({ [NEW]: N });
    const st = await (await fetch(`${second.url}/api/vault/status`)).json() as { status: { rotation_needed: boolean; keys: unknown[] } };
    expect(st.status).to.deep.include({ rotation_needed: false, missing_keys: [], undecryptable: 0 });
    expect(st.status.keys).to.deep.equal([{ id: NEW, name: 'new', configured: true, sealing: true, secrets: N }, { id: OLD, name: 'old', configured: true, sealing: false, secrets: 0 }]);
    // The old key can now be removed: everything opens with the new one alone.
    expect(await vault(newKey).values()).to.have.length(N);
    redis.disconnect();
  });
});
