import { expect } from 'chai';
import path from 'node:path';
import { ProcessCluster } from '../helpers/process.ts';
import { Client, eventually } from '../helpers/service.ts';
import { lines, writeHookScripts } from './scripts.ts';

describe('hooks with two controller processes, one SIGKILLed', function () {
  this.timeout(180_000);
  const cluster = new ProcessCluster('hooks-cluster').install();
  const { redis, root } = cluster;
  const start = (roles: string) => cluster.start(roles);

  it('an async audit hook on session.post_stop still receives each stop exactly once', async () => {
    const api = await start('api,runtime');
    const controllers = [await start('controller'), await start('controller')];
    const client = new Client(api.url);
    const scripts = writeHookScripts(root);
    const out = path.join(root, 'audit.jsonl');
    const ws = (await client.post('/api/workspaces', { root_dir: root })).body.workspace;
    const put = await client.put('/api/resources/hook.binding/audit?wait=true', {
      scope: { kind: 'global' }, spec: { name: 'audit', event: 'session.post_stop', command: process.execPath, args: [scripts.audit, out] }, expected_version: 0,
    });
    expect(put.status, JSON.stringify(put.body)).to.equal(201);
    const sessions: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await client.post('/api/sessions', { workspace: ws.id });
      expect(res.status).to.equal(201);
      sessions.push(res.body.session.id);
    }
    const stop = async (id: string) => expect((await client.post(`/api/sessions/${id}/stop`, {})).status).to.be.oneOf([200, 202, 204]);

    await stop(sessions[0]);
    await eventually(async () => expect(lines(out)).to.have.length(1), 30_000);

    // SIGKILL the controller that dispatches (holds the lease); stops land while its lease lapses.
    const admin = redis.client();
    const holder = (await admin.get('svc:{hooks}:lock:dispatcher')) ?? '';
    admin.disconnect();
    const leader = controllers.find((c) => holder.includes(`-${c.proc!.pid}-`))!;
    expect(leader, holder).to.not.equal(undefined);
    await leader.kill('SIGKILL');
    await stop(sessions[1]);
    await stop(sessions[2]);
    await eventually(async () => expect(lines(out)).to.have.length(3), 60_000, 200);
    await stop(sessions[3]);
    await stop(sessions[4]);
    await eventually(async () => expect(lines(out)).to.have.length(5), 60_000, 200);
    await new Promise((r) => setTimeout(r, 3000));
    const got = lines(out);
    expect(got.map((e) => e.session_id).sort()).to.deep.equal([...sessions].sort());
    for (const e of got) expect(e).to.include({ event: 'session.post_stop', workspace_id: ws.id });
    // NOTE: a run is recorded after its hook exits, so the record may trail the hook's own output.
    await eventually(async () => {
      const runs = (await client.get('/api/hooks/runs?binding=audit')).body.runs as { outcome: string }[];
      expect(runs.map((r) => r.outcome)).to.deep.equal(['allow', 'allow', 'allow', 'allow', 'allow']);
    }, 30_000, 200);
  });
});
