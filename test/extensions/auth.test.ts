import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, startService } from '../helpers/service.ts';
import { checksum, HELLO } from './helpers.ts';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

describe('Extensions with authentication: admin only, paths confined, executables allowed', function () {
  this.timeout(60_000);
  const redis = new RedisServer();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ext-auth-'));
  const roots = path.join(dir, 'roots');
  let service: Service;
  before(async () => {
    await redis.start();
    const file = path.join(dir, 'tokens.yaml');
    writeFileSync(file, `tokens:\n  - {name: viewer, role: reader, sha256: ${sha256('r-secret')}}\n  - {name: gitops, role: operator, sha256: ${sha256('o-secret')}}\n  - {name: root, role: admin, sha256: ${sha256('a-secret')}}\n`);
    cpSync(HELLO, path.join(roots, 'hello'), { recursive: true });
    service = await startService(redis.url, { AUTH_MODE: 'token', AUTH_TOKENS_FILE: file, DATA_DIR: path.join(dir, 'data'), WORKSPACE_ROOTS: roots, EXEC_ALLOWLIST: 'node', SVC_VAULT_KEYS: `k1=${Buffer.alloc(32, 7).toString('base64')}` });
  });
  after(async () => {
    await service?.stop();
    await redis.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
  const as = (token: string) => {
    const c = new Client(service.url);
    return {
      get: (p: string) => c.call('GET', p, undefined, { authorization: `Bearer ${token}` }),
      post: (p: string, b: unknown) => c.call('POST', p, b, { authorization: `Bearer ${token}` }),
      delete: (p: string) => c.call('DELETE', p, undefined, { authorization: `Bearer ${token}` }),
    };
  };

  it('refuses installs and changes to all but admins (403), lets readers list, confines the path, and installs for an admin', async () => {
    const inside = path.join(roots, 'hello');
    const body = { path: inside, checksum: await checksum(inside) };
    expect((await as('o-secret').post('/api/extensions', body)).status).to.equal(403);
    expect((await as('r-secret').post('/api/extensions', body)).status).to.equal(403);
    expect((await as('r-secret').get('/api/extensions')).body.extensions).to.deep.equal([]);

    const outside = await as('a-secret').post('/api/extensions', { path: HELLO, checksum: await checksum(HELLO) });
    expect(outside.status).to.equal(422);
    expect(outside.body.diagnostic.code).to.equal('path_not_allowed');
    expect(outside.body.diagnostic.evidence).to.have.property('path');

    const ok = await as('a-secret').post('/api/extensions', body);
    expect(ok.status, JSON.stringify(ok.body)).to.equal(201);
    expect(ok.body.extension.provenance.installed_by).to.equal('root');
    expect((await as('o-secret').post('/api/extensions/hello/disable', {})).status).to.equal(403);
    expect((await as('o-secret').delete('/api/extensions/hello')).status).to.equal(403);
    expect((await as('r-secret').get('/api/extensions/hello')).body.extension.enabled).to.equal(true);
    expect((await as('a-secret').post('/api/extensions/hello/disable', {})).body.extension.enabled).to.equal(false);
  });

  it('refuses a daemon whose command EXEC_ALLOWLIST does not allow (422), installing nothing', async () => {
    const other = path.join(roots, 'shell');
    cpSync(HELLO, other, { recursive: true });
    const m = JSON.parse((await import('node:fs')).readFileSync(path.join(other, 'extension.json'), 'utf8'));
    m.name = 'shell';
    m.daemon.command = 'bash';
    m.resources.bundles[0].name = 'shell-desk';
    writeFileSync(path.join(other, 'extension.json'), JSON.stringify(m));
    const res = await as('a-secret').post('/api/extensions', { path: other, checksum: await checksum(other) });
    expect(res.status).to.equal(422);
    expect(res.body.diagnostic.evidence).to.have.property('daemon.command');
    expect((await as('a-secret').get('/api/extensions/shell')).status).to.equal(404);
  });
});
