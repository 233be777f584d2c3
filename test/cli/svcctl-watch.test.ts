import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { CuttingProxy, start, svcctl } from './cli.ts';

const put = (id: string) => ({ scope: { kind: 'global' }, spec: { name: id, prompt: `Prompt of ${id}.` }, expected_version: 0 });
const lines = (out: string) => out.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));

describe('svcctl watch reconnects, and sessions create|stop|resume (child process, real service and Redis)', function () {
  this.timeout(180_000);
  const f = new ServiceFixture().install();

  it('watch resumes from the last revision after a dropped connection: nothing lost, nothing twice', async () => {
    const proxy = new CuttingProxy(() => f.service.url);
    await proxy.start();
    try {
      const since = (await f.api.get('/api/resources?limit=1')).headers.get('x-svc-revision')!;
      const w = start(['watch', 'agent', '--since', since, '--count', '3', '--timeout', '60s', '-o', 'json'], { SVC_URL: proxy.url });
      expect((await f.api.put('/api/resources/agent/w1', put('w1'))).status).to.equal(201);
      // The first change printed proves the stream is open.
      await eventually(async () => expect(w.out.stdout).to.contain('"w1"'), 30_000, 100);
      expect(proxy.cut()).to.be.greaterThan(0);
      // Written while svcctl has no connection (or is reconnecting): it must still print them, once.
      expect((await f.api.put('/api/resources/agent/w2', put('w2'))).status).to.equal(201);
      expect((await f.api.put('/api/resources/agent/w3', put('w3'))).status).to.equal(201);
      const run = await w.done;
      expect(run.code, run.stderr).to.equal(0);
      const frames = lines(run.stdout);
      expect(frames.map((x) => `${x.type} ${x.record.id}`)).to.deep.equal(['put w1', 'put w2', 'put w3']);
      expect(frames.map((x) => x.revision)).to.deep.equal([...frames.map((x) => x.revision)].sort((a, b) => a - b));
      expect(run.stderr).to.match(/reconnecting from revision \d+/);
    } finally {
      await proxy.stop();
    }
  });

  it('watch exits 3 when the service cannot be reached at the start (no endless retry)', async () => {
    const run = await svcctl(['watch', '--timeout', '30s'], { SVC_URL: 'http://127.0.0.1:1' });
    expect(run.code, run.stderr).to.equal(3);
    expect(run.stdout).to.equal('');
  });

  it('sessions create, stop and resume', async () => {
    const env = { SVC_URL: f.service.url };
    const created = await svcctl(['sessions', 'create', '-w', f.ws.id, '--name', 'cli', '-o', 'json'], env);
    expect(created.code, created.stderr).to.equal(0);
    const s = JSON.parse(created.stdout).session;
    expect(s).to.include({ state: 'active', workspace_id: f.ws.id, name: 'cli' });
    const stopped = await svcctl(['sessions', 'stop', s.id, '-o', 'json'], env);
    expect(stopped.code, stopped.stderr).to.equal(0);
    expect(JSON.parse(stopped.stdout).session).to.include({ id: s.id, state: 'stopped' });
    expect((await f.api.get(`/api/sessions/${s.id}`)).body.session.state).to.equal('stopped');
    const resumed = await svcctl(['sessions', 'resume', s.id, '-o', 'text'], env);
    expect(resumed.code, resumed.stderr).to.equal(0);
    expect(resumed.stdout).to.match(new RegExp(`^${s.id} active `));
    expect((await f.api.get(`/api/sessions/${s.id}`)).body.session.state).to.equal('active');
    // What must fail: an unknown workspace (exit 1, the service's reason), a missing flag (usage, exit 2).
    const bad = await svcctl(['sessions', 'create', '-w', 'no-such-workspace'], env);
    expect(bad.code).to.equal(1);
    expect(bad.stderr).to.match(/40[04]/);
    expect((await svcctl(['sessions', 'create'], env)).code).to.equal(2);
    expect((await f.api.get('/api/sessions')).body.sessions.map((x: any) => x.id)).to.deep.equal([s.id]);
  });

  it('watch lists again after an expired frame (sync lines: the latest state) and goes on from there', async () => {
    await f.restart({ CHANGE_LOG_RETENTION: '10' });
    for (let i = 0; i < 400; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, j) => f.api.put(`/api/resources/agent/e${i + j}`, put(`e${i + j}`))));
    }
    const w = start(['watch', 'agent', '--since', '1', '--count', '1', '--timeout', '60s', '-o', 'json'], { SVC_URL: f.service.url });
    await eventually(async () => expect(w.out.stderr).to.contain('no longer in the change log'), 30_000, 200);
    await eventually(async () => expect(lines(w.out.stdout).length).to.equal(400), 30_000, 200);
    await f.api.put('/api/resources/agent/after', put('after'));
    const run = await w.done;
    expect(run.code, run.stderr).to.equal(0);
    const frames = lines(run.stdout);
    expect(frames.slice(0, 400).every((x) => x.type === 'sync')).to.equal(true);
    expect(new Set(frames.slice(0, 400).map((x) => x.record.id)).size).to.equal(400);
    expect(frames.slice(400).map((x) => `${x.type} ${x.record.id}`)).to.deep.equal(['put after']);
  });
});
