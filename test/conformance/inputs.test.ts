import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, startService } from '../helpers/service.ts';

describe('Conformance #21.6: the same bad query is refused the same way on every path', function () {
  this.timeout(60_000);
  const redis = new RedisServer();
  let service: Service;
  let api: Client;
  let root: string;
  before(async () => {
    await redis.start();
    root = mkdtempSync(path.join(os.tmpdir(), 'svc-inputs-'));
    service = await startService(redis.url, { DATA_DIR: path.join(root, '.data') });
    api = new Client(service.url);
  });
  after(async () => { await service.stop(); await redis.destroy(); rmSync(root, { recursive: true, force: true }); });

  it('refuses an unknown kind with 422 for a watch as for a list, and opens no stream', async () => {
    for (const q of ['kind=bogus', 'kind=bogus&watch=true']) {
      const res = await api.get(`/api/resources?${q}`);
      expect(res.status, q).to.equal(422);
      expect(res.headers.get('content-type')).to.match(/json/);
      expect(res.body.diagnostic.code).to.equal('unknown_kind');
    }
    expect((await api.get('/api/resources/bogus?watch=true')).status).to.equal(422);
  });

  it('refuses a for_agent that leaves .svc/agents with 400, with or without a workspace', async () => {
    const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
    for (const q of ['for_agent=a/b', `for_agent=a/b&workspace=${ws.id}`, 'agent_name=..', `agent_name=..&workspace=${ws.id}`]) {
      const res = await api.get(`/api/skills?${q}`);
      expect(res.status, q).to.equal(400);
      expect(res.body.diagnostic.code).to.equal('invalid_query');
    }
    expect((await api.get(`/api/skills?for_agent=reviewer&workspace=${ws.id}`)).status).to.equal(200);
  });
});
