import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { compiledArgv, ServiceProcess } from '../helpers/process.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually } from '../helpers/service.ts';

describe('Support bundles of the compiled service: built, and their configuration holds only fields known to be safe', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-bundle-config-'));
  let service: ServiceProcess | undefined;
  before(() => redis.start());
  after(async () => {
    await service?.kill('SIGKILL');
    await redis.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it('carries no vault key-encryption key, in any encoding, and no URL credentials', async () => {
    const key = randomBytes(32);
    const forms = [key.toString('base64'), key.toString('base64url'), key.toString('hex')];
    service = await new ServiceProcess({ ...redis.env, DATA_DIR: path.join(dir, 'data'), SVC_VAULT_KEYS: `bundlekey=${forms[0]}`, SVC_API_URL: 'http://user:url-pass-canary@127.0.0.1:1/?token=query-canary' }, compiledArgv()).start();
    const api = new Client(service.url);
    // The vault works with the key: a secret sealed by it, so the key is in use, not only configured.
    expect((await api.put('/api/vault/secrets', { ref: 'vault:bridges/x/k', secret_value: 'v-1234567890' })).status).to.be.oneOf([200, 201]);
    const op = (await api.post('/api/support/bundles', { yes: true })).body.operation;
    await eventually(async () => expect((await api.get(`/api/support/bundles/${op.operation_id}`)).body.operation.status).to.equal('completed'), 30_000, 100);
    const bytes = Buffer.from(await (await fetch(`${service.url}/api/support/bundles/${op.operation_id}/download`)).arrayBuffer());
    const out = mkdtempSync(path.join(dir, 'x-'));
    writeFileSync(path.join(out, 'b.tar.gz'), bytes);
    execFileSync('tar', ['-xzf', 'b.tar.gz'], { cwd: out });
    const [top] = readdirSync(out).filter((f) => f !== 'b.tar.gz');
    expect(JSON.parse(readFileSync(path.join(out, top, 'versions.json'), 'utf8')).service.name).to.equal('agent-runtime-control-service');
    const config = JSON.parse(readFileSync(path.join(out, top, 'configuration.json'), 'utf8')).config;
    expect(config.vault).to.deep.equal({ key_source: 'SVC_VAULT_KEYS' });
    expect(config.roles).to.be.an('array').that.is.not.empty;
    for (const file of readdirSync(path.join(out, top))) {
      const text = readFileSync(path.join(out, top, file), 'utf8');
      for (const f of [...forms, 'url-pass-canary', 'query-canary', 'v-1234567890']) expect(text, `${file} holds ${f}`).to.not.include(f);
    }
    expect(bytes.includes(key)).to.equal(false);
  });
});
