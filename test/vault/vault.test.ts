import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sha256 } from '../../runtime/process/auth.ts';
import type { Service } from '../../runtime/process/service.ts';
import { keyIdOf, open, reseal, seal, VaultOpenError } from '../../runtime/vault/envelope.ts';
import { parseKeyList, VaultKeyring, vaultKeyId } from '../../runtime/vault/keys.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, startService } from '../helpers/service.ts';
import { legacySeal } from '../helpers/vault-legacy.ts';

const key = () => randomBytes(32).toString('base64');
const ring = (...names: string[]) => new VaultKeyring(names.map((name) => ({ name, key: randomBytes(32) })));
const CANARY = 'canary-Zq8vX3kP-secret-value';

describe('Vault envelope encryption (runtime/vault/envelope.ts)', () => {
  it('seals the same value twice to different ciphertexts, neither holding the plaintext, both opening', () => {
    const r = ring('k1');
    const a = seal(r, 'vault:mcp/github/token', CANARY);
    const b = seal(r, 'vault:mcp/github/token', CANARY);
    expect(a).to.not.equal(b);
    for (const s of [a, b]) {
      expect(s.startsWith(`svc:enc:aesgcm:v1:${vaultKeyId(r.primary.key)}:`), 'the key id derived from the key, not its name').to.equal(true);
      expect(s).to.not.include(CANARY);
      expect(Buffer.from(s.split(':').slice(-1)[0], 'base64url').toString('latin1')).to.not.include(CANARY);
      expect(open(r, 'vault:mcp/github/token', s)).to.equal(CANARY);
    }
  });

  it('a ciphertext copied to another ref, altered, or opened without its key fails to open', () => {
    const r = ring('k1');
    const s = seal(r, 'vault:mcp/a', CANARY);
    expect(() => open(r, 'vault:mcp/b', s)).to.throw(VaultOpenError);
    const flipped = s.slice(0, -3) + (s.slice(-3, -2) === 'A' ? 'B' : 'A') + s.slice(-2);
    expect(() => open(r, 'vault:mcp/a', flipped)).to.throw(VaultOpenError);
    expect(() => open(ring('k1'), 'vault:mcp/a', s), 'another key under the same name').to.throw(VaultOpenError, new RegExp(`key "${r.primary.id}", which is not among`));
    // The key id in the prefix is authenticated: relabelling it does not open with another key either.
    const other = new VaultKeyring([{ name: 'k2', key: randomBytes(32) }, ...r.keys]);
    expect(() => open(other, 'vault:mcp/a', s.replace(`:${r.primary.id}:`, `:${other.primary.id}:`))).to.throw(VaultOpenError);
  });

  it('reseal moves a data key to the first key and keeps the encrypted value byte for byte', () => {
    const old = ring('old');
    const s = seal(old, 'vault:hooks/x', CANARY);
    const both = new VaultKeyring([{ name: 'new', key: randomBytes(32) }, old.keys[0]]);
    const moved = reseal(both, 'vault:hooks/x', s);
    expect(keyIdOf(moved)).to.equal(both.primary.id);
    expect(moved.split(':').slice(-1)[0]).to.equal(s.split(':').slice(-1)[0]);
    expect(open(both, 'vault:hooks/x', moved)).to.equal(CANARY);
    expect(open(new VaultKeyring([both.keys[0]]), 'vault:hooks/x', moved)).to.equal(CANARY);
    expect(reseal(both, 'vault:hooks/x', moved)).to.equal(moved);
  });

  it('parseKeyList takes an ordered name=base64 list and names each bad entry without quoting a key', () => {
    const good = parseKeyList(`# comment\nk2=${key()}\nk1=${key()}`, 'X');
    expect(good.ok && good.keys.map((k) => k.name)).to.deep.equal(['k2', 'k1']);
    const same = key();
    const bad = parseKeyList(`k1=c2hvcnQ=,bad id=x,k1=c2hvcnQ=,sha256-${'a'.repeat(32)}=${key()},k3=${same},k4=${same}`, 'X');
    expect(bad.ok).to.equal(false);
    if (!bad.ok) {
      expect(bad.problems.join('\n')).to.match(/key "k1" must be 32 bytes/).and.match(/entry 2/).and.match(/form of a derived key id/).and.match(/key of "k3" again as "k4"/);
      expect(bad.problems.join('\n')).to.not.include('c2hvcnQ').and.not.include(same);
    }
  });

  it('a key id is derived from the key: two keys under one name have two ids, one key under two names one id', () => {
    const [a, b] = [randomBytes(32), randomBytes(32)];
    const one = new VaultKeyring([{ name: 'k1', key: a }]);
    const two = new VaultKeyring([{ name: 'k1', key: b }]);
    expect(one.primary.id).to.match(/^sha256-[0-9a-f]{32}$/).and.not.equal(two.primary.id);
    expect(new VaultKeyring([{ name: 'renamed', key: a }]).primary.id).to.equal(one.primary.id);
    const s = seal(one, 'vault:mcp/a', CANARY);
    expect(() => open(two, 'vault:mcp/a', s)).to.throw(VaultOpenError, /not among this process's keys/);
    expect(open(new VaultKeyring([{ name: 'renamed', key: a }]), 'vault:mcp/a', s), 'a renamed key still opens').to.equal(CANARY);
  });

  it('a value sealed before ids were derived (its id a key name) opens with the key of that name, and reseal moves it to the derived id', () => {
    const r = ring('k1');
    const legacy = legacySeal('k1', r.primary.key, 'vault:mcp/a', CANARY);
    expect(keyIdOf(legacy)).to.equal('k1');
    expect(open(r, 'vault:mcp/a', legacy)).to.equal(CANARY);
    expect(() => open(ring('k1'), 'vault:mcp/a', legacy), 'another key named k1').to.throw(VaultOpenError);
    const moved = reseal(r, 'vault:mcp/a', legacy);
    expect(keyIdOf(moved)).to.equal(r.primary.id);
    expect(open(r, 'vault:mcp/a', moved)).to.equal(CANARY);
  });
});

describe('Vault routes (api/vault.ts)', () => {
  const f = new ServiceFixture({ workspace: false }).install();
  const scanAll = async () => {
    const r = f.redis.client();
    try {
      const dump: string[] = [];
      for (const k of await r.keys('*')) {
        const t = await r.type(k);
        dump.push(k);
        if (t === 'string') dump.push(String(await r.get(k)));
        else if (t === 'hash') dump.push(JSON.stringify(await r.hgetall(k)));
        else if (t === 'zset') dump.push(JSON.stringify(await r.zrange(k, 0, -1)));
        else if (t === 'stream') dump.push(JSON.stringify(await r.xrange(k, '-', '+')));
        else if (t === 'list') dump.push(JSON.stringify(await r.lrange(k, 0, -1)));
        else if (t === 'set') dump.push(JSON.stringify(await r.smembers(k)));
      }
      return dump.join('\n');
    } finally {
      r.disconnect();
    }
  };

  it('make run\'s default: AUTH_MODE=none without key variables creates $DATA_DIR/vault.key with mode 0600', () => {
    const st = statSync(path.join(f.dataDir, 'vault.key'));
    expect(st.mode & 0o777).to.equal(0o600);
  });

  it('PUT stores a sealed value (never the plaintext, different each write), answers metadata only, and the value never comes back', async () => {
    const put = await f.api.put('/api/vault/secrets', { ref: 'vault:mcp/github/token', secret_value: CANARY, kind: 'token' });
    expect(put.status).to.equal(200);
    expect(put.body.secret).to.include({ ref: 'vault:mcp/github/token', namespace: 'mcp', kind: 'token', present: true });
    const r = f.redis.client();
    const first = await r.hget('svc:{vault}:sealed', 'vault:mcp/github/token');
    await f.api.put('/api/vault/secrets', { ref: 'vault:mcp/github/token', secret_value: CANARY });
    const second = await r.hget('svc:{vault}:sealed', 'vault:mcp/github/token');
    r.disconnect();
    expect(first).to.match(/^svc:enc:aesgcm:v1:sha256-[0-9a-f]{32}:/);
    expect(second).to.not.equal(first);
    const meta = await f.api.get('/api/vault/secrets/metadata?ref=vault:mcp/github/token');
    expect(meta.body.secret).to.include({ kind: 'token', created_at: put.body.secret.created_at });
    expect(Date.parse(meta.body.secret.updated_at)).to.be.at.least(Date.parse(put.body.secret.updated_at));
    const dump = await scanAll();
    expect(dump).to.not.include(CANARY);
    expect(JSON.stringify([put.body, meta.body, (await f.api.get('/api/vault/secrets')).body])).to.not.include(CANARY);
    expect(await f.service.vault!.resolveRefs(['vault:mcp/github/token'])).to.deep.equal(new Map([['vault:mcp/github/token', { value: CANARY }]]));
  });

  it('lists by namespace and by prefix of whole segments', async () => {
    for (const ref of ['vault:mcp/github/token', 'vault:mcp/github2/token', 'vault:mcp/github/app/key', 'vault:bridges/slack']) {
      expect((await f.api.put('/api/vault/secrets', { ref, secret_value: 'v-12345678' })).status).to.equal(200);
    }
    const refs = async (q: string) => ((await f.api.get(`/api/vault/secrets${q}`)).body.secrets as { ref: string }[]).map((s) => s.ref);
    expect(await refs('')).to.deep.equal(['vault:bridges/slack', 'vault:mcp/github/app/key', 'vault:mcp/github/token', 'vault:mcp/github2/token']);
    expect(await refs('?namespace=mcp')).to.have.length(3);
    expect(await refs('?prefix=vault:mcp/github/')).to.deep.equal(['vault:mcp/github/app/key', 'vault:mcp/github/token']);
    expect(await refs('?prefix=vault:mcp/github')).to.deep.equal(['vault:mcp/github/app/key', 'vault:mcp/github/token']);
    expect(await refs('?prefix=vault:mcp/github/&namespace=bridges')).to.deep.equal([]);
    expect((await f.api.get('/api/vault/secrets?prefix=vault:nope/')).status).to.equal(400);
    expect((await f.api.get('/api/vault/secrets?namespace=agents')).status).to.equal(400);
  });

  it('a bad ref or a missing value is 400 naming the field; unknown fields 422; unknown ref 404; DELETE 204 then 404', async () => {
    const cases: { given: unknown; field: string }[] = [
      { given: { secret_value: 'x' }, field: 'ref' },
      { given: { ref: 'vault:agents/x', secret_value: 'x' }, field: 'ref' },
      { given: { ref: 'vault:mcp/Upper', secret_value: 'x' }, field: 'ref' },
      { given: { ref: 'vault:mcp/a/../b', secret_value: 'x' }, field: 'ref' },
      { given: { ref: 'env:X', secret_value: 'x' }, field: 'ref' },
      { given: { ref: 'vault:mcp/a' }, field: 'secret_value' },
      { given: { ref: 'vault:mcp/a', secret_value: '' }, field: 'secret_value' },
      { given: { ref: 'vault:mcp/a', secret_value: 42 }, field: 'secret_value' },
      { given: { ref: 'vault:mcp/a', secret_value: 'x', kind: 'Bad Kind' }, field: 'kind' },
    ];
    for (const c of cases) {
      const res = await f.api.put('/api/vault/secrets', c.given);
      expect(res.status, JSON.stringify(c.given)).to.equal(400);
      expect(res.body.diagnostic.evidence, JSON.stringify(c.given)).to.have.property(c.field);
    }
    const unknown = await f.api.put('/api/vault/secrets', { ref: 'vault:mcp/a', secret_value: CANARY, note: 'x' });
    expect(unknown.status).to.equal(422);
    expect(unknown.body.diagnostic.evidence).to.have.property('note');
    expect(JSON.stringify(unknown.body)).to.not.include(CANARY);
    expect((await f.api.get('/api/vault/secrets/metadata?ref=vault:mcp/a')).status).to.equal(404);
    expect((await f.api.get('/api/vault/secrets/metadata')).status).to.equal(400);
    expect((await f.api.delete('/api/vault/secrets?ref=vault:mcp/a')).status).to.equal(404);
    await f.api.put('/api/vault/secrets', { ref: 'vault:mcp/a', secret_value: CANARY });
    const del = await f.api.delete('/api/vault/secrets?ref=vault:mcp/a');
    expect(del.status).to.equal(204);
    expect((await f.api.get('/api/vault/secrets/metadata?ref=vault:mcp/a')).status).to.equal(404);
    // rotate takes no body (api/body-rule.ts): a field is refused before anything runs
    expect((await f.api.post('/api/vault/rotate', { force: true })).status).to.equal(400);
  });

  it('a second Service on the same Redis with the same key reads what the first wrote; one with another key cannot', async () => {
    await f.api.put('/api/vault/secrets', { ref: 'vault:hooks/deploy', secret_value: CANARY });
    const same = await startService(f.redis.env, { DATA_DIR: f.dataDir, PORT: '0' });
    const other = await startService(f.redis.env, { DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'svc-vault-other-')) });
    try {
      const got = await same.security.secrets.resolve({ X: 'vault:hooks/deploy' });
      expect(got.env).to.deep.equal({ X: CANARY });
      const not = await other.security.secrets.resolve({ X: 'vault:hooks/deploy' });
      expect(not.missing).to.deep.equal(['X']);
      expect(not.problems.X).to.match(/vault:hooks\/deploy does not open: sealed by key "sha256-[0-9a-f]{32}", which is not among this process's keys/);
      expect(JSON.stringify(not)).to.not.include(CANARY);
    } finally {
      await same.stop();
      await other.stop();
    }
  });

  it('bus events vault.secret.written|deleted|rotated carry refs and counts only', async () => {
    await f.api.put('/api/vault/secrets', { ref: 'vault:sessions/s1', secret_value: CANARY });
    await f.api.post('/api/vault/rotate', {});
    await f.api.delete('/api/vault/secrets?ref=vault:sessions/s1');
    const events = (await f.service.bus!.latest(50)).filter((e) => e.type.startsWith('vault.'));
    expect(events.map((e) => e.type)).to.deep.equal(['vault.secret.written', 'vault.secret.rotated', 'vault.secret.deleted']);
    expect(events[0].data).to.include({ ref: 'vault:sessions/s1', namespace: 'sessions', created: true });
    expect(JSON.stringify(events)).to.not.include(CANARY);
  });

  it('status shows the key ids in use and how many secrets each seals, never key bytes', async () => {
    await f.api.put('/api/vault/secrets', { ref: 'vault:sandbox/a', secret_value: 'value-one' });
    await f.api.put('/api/vault/secrets', { ref: 'vault:sandbox/b', secret_value: 'value-two' });
    const st = await f.api.get('/api/vault/status');
    expect(st.status).to.equal(200);
    const file = await import('node:fs').then((fs) => fs.readFileSync(path.join(f.dataDir, 'vault.key'), 'utf8'));
    const id = vaultKeyId(Buffer.from(file.match(/k1=(.+)/)![1], 'base64'));
    expect(st.body.status).to.deep.include({ secrets: 2, rotation_needed: false, missing_keys: [], undecryptable: 0, keys: [{ id, name: 'k1', configured: true, sealing: true, secrets: 2 }] });
    expect(JSON.stringify(st.body)).to.not.include(file.match(/k1=(.+)/)![1]);
  });
});

describe('Vault keys and roles at start-up', () => {
  const redis = new RedisServer();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-vault-keys-'));
  let service: Service | undefined;
  before(async () => { await redis.start(); });
  after(async () => { await redis.destroy(); rmSync(dir, { recursive: true, force: true }); });
  afterEach(async () => { await service?.stop(); service = undefined; await redis.flush(); });

  it('refuses to start with a key file that is a symlink or readable by others, saying what to fix', async () => {
    const real = path.join(dir, 'real.key');
    writeFileSync(real, `k1=${key()}\n`, { mode: 0o600 });
    const link = path.join(dir, 'link.key');
    symlinkSync(real, link);
    const loose = path.join(dir, 'loose.key');
    writeFileSync(loose, `k1=${key()}\n`);
    chmodSync(loose, 0o644);
    const cases = [
      { env: { SVC_VAULT_KEY_FILE: link }, want: /SVC_VAULT_KEY_FILE .*link\.key is a symlink/ },
      { env: { SVC_VAULT_KEY_FILE: loose }, want: /SVC_VAULT_KEY_FILE .*loose\.key has mode 0644: others must not read it; run `chmod 600/ },
      { env: { SVC_VAULT_KEY_FILE: path.join(dir, 'absent.key') }, want: /does not exist/ },
    ];
    for (const c of cases) {
      let err: Error | undefined;
      try {
        service = await startService(redis.url, { DATA_DIR: dir, ...c.env });
      } catch (e) {
        err = e as Error;
      }
      expect(err?.message, JSON.stringify(c.env)).to.match(c.want);
    }
    // The embedded default is held to the same rule.
    const data = mkdtempSync(path.join(dir, 'data-'));
    writeFileSync(path.join(data, 'vault.key'), `k1=${key()}\n`, { mode: 0o644 });
    chmodSync(path.join(data, 'vault.key'), 0o644);
    let err: Error | undefined;
    try { service = await startService(redis.url, { DATA_DIR: data }); } catch (e) { err = e as Error; }
    expect(err?.message).to.match(/vault key file .*vault\.key has mode 0644/);
  });

  it('token mode: list, metadata and status need operator; PUT, DELETE and rotate need admin; without a key every vault route is 503 saying what to set', async () => {
    const tokens = path.join(dir, 'tokens.yaml');
    writeFileSync(tokens, `tokens:\n  - {name: r, role: reader, sha256: ${sha256('r-tok')}}\n  - {name: o, role: operator, sha256: ${sha256('o-tok')}}\n  - {name: a, role: admin, sha256: ${sha256('a-tok')}}\n`);
    const as = (t: string) => (m: string, p: string, b?: unknown) => new Client(service!.url).call(m, p, b, { authorization: `Bearer ${t}` });
    const routes: { m: string; p: string; b?: unknown; need: 'operator' | 'admin'; ok: number }[] = [
      { m: 'GET', p: '/api/vault/secrets', need: 'operator', ok: 200 },
      { m: 'GET', p: '/api/vault/secrets/metadata?ref=vault:mcp/x', need: 'operator', ok: 200 },
      { m: 'GET', p: '/api/vault/status', need: 'operator', ok: 200 },
      { m: 'PUT', p: '/api/vault/secrets', b: { ref: 'vault:mcp/x', secret_value: CANARY }, need: 'admin', ok: 200 },
      { m: 'POST', p: '/api/vault/rotate', b: {}, need: 'admin', ok: 200 },
      { m: 'DELETE', p: '/api/vault/secrets?ref=vault:mcp/x', need: 'admin', ok: 204 },
    ];
    service = await startService(redis.url, { DATA_DIR: dir, AUTH_MODE: 'token', AUTH_TOKENS_FILE: tokens });
    for (const r of routes) {
      const res = await as('a-tok')(r.m, r.p, r.b);
      expect(res.status, `${r.m} ${r.p} without a key`).to.equal(503);
      expect(res.body.diagnostic.message).to.include('SVC_VAULT_KEYS').and.include('SVC_VAULT_KEY_FILE');
    }
    expect((await as('r-tok')('GET', '/api/resources')).status, 'the rest keeps working').to.equal(200);
    await service.stop();
    service = await startService(redis.url, { DATA_DIR: dir, AUTH_MODE: 'token', AUTH_TOKENS_FILE: tokens, SVC_VAULT_KEYS: `k1=${key()}` });
    await as('a-tok')('PUT', '/api/vault/secrets', { ref: 'vault:mcp/x', secret_value: CANARY });
    for (const r of routes) {
      const below = r.need === 'admin' ? ['r-tok', 'o-tok'] : ['r-tok'];
      for (const t of below) {
        const res = await as(t)(r.m, r.p, r.b);
        expect(res.status, `${t} ${r.m} ${r.p}`).to.equal(403);
        expect(res.body.diagnostic.evidence.required_role).to.equal(r.need);
      }
      if (r.need === 'operator') expect((await as('o-tok')(r.m, r.p, r.b)).status, `operator ${r.m} ${r.p}`).to.equal(r.ok);
      expect((await as('a-tok')(r.m, r.p, r.b)).status, `admin ${r.m} ${r.p}`).to.equal(r.ok);
    }
  });
});
