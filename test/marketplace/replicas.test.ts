import { expect } from 'chai';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, startService } from '../helpers/service.ts';
import { readUiStream } from '../helpers/ui-stream.ts';
import { IndexFixture, sha256, skillArchive } from './fixtures.ts';

describe('a skill installed through one process is used by a session on another (one Redis, separate DATA_DIRs)', function () {
  this.timeout(60_000);
  const redis = new RedisServer();
  const index = new IndexFixture();
  const dirs: string[] = [];
  const services: Service[] = [];
  before(async () => { await redis.start(); await index.start(); });
  after(async () => {
    for (const s of services) await s.stop();
    await index.stop();
    await redis.destroy();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const replica = async (env: Record<string, string> = {}) => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-market-replica-'));
    dirs.push(dataDir);
    writeFileSync(path.join(dataDir, 'config.yaml'), stringify({ marketplace: { refresh_interval: '0s', sources: [{ id: 'team', type: 'index', url: `${index.url}/index.json` }] } }));
    const service = await startService(redis.url, { DATA_DIR: dataDir, ...env });
    services.push(service);
    return { service, dataDir, api: new Client(service.url) };
  };

  it('process B unpacks the archive from Redis on first use (digest verified) and its session reads the skill', async () => {
    const archive = skillArchive('pdf', 'Split PDFs with care.');
    index.addSkill('@acme/pdf', '1.0.0', archive);
    // NOTE: A has no runtime role, so the session is hosted by B, and its agent calls B's API.
    const a = await replica({ SVC_ROLES: 'api,controller' });
    const b = await replica();
    expect((await a.api.post('/api/marketplace/refresh', {})).status).to.equal(200);
    const installed = await a.api.post('/api/skills/marketplace/install', { slug: '@acme/pdf' });
    expect(installed.status, JSON.stringify(installed.body)).to.equal(200);
    const cacheB = path.join(b.dataDir, 'skills', '.market', sha256(archive), 'pdf');
    expect(existsSync(cacheB)).to.equal(false);
    // The archive server is gone: B can only have the skill from Redis.
    index.archives.clear();

    const root = mkdtempSync(path.join(os.tmpdir(), 'svc-market-ws-'));
    dirs.push(root);
    const ws = (await b.api.post('/api/workspaces', { root_dir: root })).body.workspace;
    const session = (await b.api.post('/api/sessions', { workspace: ws.id })).body.session;
    expect(session?.id, 'session').to.be.a('string');
    await fetch(`${b.service.url}/api/workspaces/${ws.id}/sessions/${session.id}/prompt`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: '/call svc__skill_view {"name":"pdf"}' }),
    }).then(readUiStream);
    const results = ((await b.api.get(`/api/sessions/${session.id}/events?type=tool_result`)).body.events as any[]).map((e) => e.content);
    expect(results).to.have.length(1);
    expect(results[0].tool_error).to.not.equal(true);
    expect(JSON.stringify(results[0].tool_result)).to.include('Split PDFs with care.');
    expect(existsSync(path.join(cacheB, 'SKILL.md'))).to.equal(true);
    const skill = (await b.api.get('/api/skills/pdf')).body.skill;
    expect(skill).to.include({ source: 'marketplace', enabled: true, dir: cacheB });
    expect(skill.diagnostics[0].verification_status).to.equal('passed');
    // Removal through B reaches A: the record is in Redis, each process's cache is only a cache.
    expect((await b.api.delete('/api/skills/marketplace/pdf')).status).to.equal(200);
    expect((await a.api.get('/api/skills/pdf')).status).to.equal(404);
  });
});
