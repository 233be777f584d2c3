import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { digestOf } from '../../runtime/cli/manifests.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { InterposingProxy, start, svcctl } from './cli.ts';

const agent = (id: string, prompt = `Prompt of ${id}.`) => ({ kind: 'agent', id, scope: { kind: 'global' }, spec: { name: id, prompt } });

describe('svcctl against a real service (child process, real Redis)', function () {
  this.timeout(180_000);
  const f = new ServiceFixture().install();
  let dir = '';
  let env: Record<string, string> = {};
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'svcctl-'));
    env = { SVC_URL: f.service.url };
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const write = (name: string, docs: unknown[]) => {
    const file = path.join(dir, name);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, name.endsWith('.json') ? JSON.stringify(docs) : docs.map((d) => YAML.stringify(d)).join('---\n'));
    return file;
  };
  const record = async (kind: string, id: string) => (await f.api.get(`/api/resources/${kind}/${id}`)).body.record;

  it('apply creates the records of a directory (multi-document YAML and JSON), and a second apply is a no-op', async () => {
    write('a.yaml', [agent('a1'), agent('a2')]);
    write('sub/b.json', [agent('b1')]);
    const first = await svcctl(['apply', '-f', dir, '-R'], env);
    expect(first.code, first.stderr).to.equal(0);
    const out = JSON.parse(first.stdout);
    expect(out.summary).to.deep.equal({ created: 3 });
    const a1 = await record('agent', 'a1');
    expect(a1.version).to.equal(1);
    expect(a1.source).to.deep.equal({ kind: 'svcctl', id: `default.${digestOf({ kind: 'global' }, a1.spec)}` });

    const again = await svcctl(['apply', '-f', dir, '-R'], env);
    expect(again.code, again.stderr).to.equal(0);
    expect(JSON.parse(again.stdout).summary).to.deep.equal({ unchanged: 3 });
    for (const id of ['a1', 'a2', 'b1']) expect((await record('agent', id)).version).to.equal(1);

    // Without -R the subdirectory is not read.
    expect(JSON.parse((await svcctl(['apply', '-f', dir], env)).stdout).summary).to.deep.equal({ unchanged: 2 });
    // A changed spec is configured: version 2, and only that record.
    write('a.yaml', [agent('a1', 'New prompt.'), agent('a2')]);
    const third = JSON.parse((await svcctl(['apply', '-f', dir, '-R', '-o', 'json'], env)).stdout);
    expect(third.results.find((r: any) => r.id === 'a1')).to.include({ action: 'configured', version: 2 });
    expect((await record('agent', 'a2')).version).to.equal(1);
  });

  it('--validate: a manifest with a misspelt field is refused by default (exit 1, nothing written, even when its meaning equals the live record), applied without it with warn, silently with ignore; diff says so too', async () => {
    const job = { kind: 'automation.job', id: 'nightly', scope: { kind: 'global' }, spec: { name: 'nightly', agent_name: 'scripted', prompt: 'p', schedule: { mode: 'every', interval: '1h' } } };
    const typo = write('typo.yaml', [{ ...job, spec: { ...job.spec, enabeld: true } }]);
    const strict = await svcctl(['apply', '-f', typo, '-o', 'json'], env);
    expect(strict.code).to.equal(1);
    expect(JSON.parse(strict.stdout).results[0]).to.include({ action: 'failed', reason: 'unknown_field' });
    expect(JSON.parse(strict.stdout).results[0].message).to.include('spec.enabeld');
    expect((await f.api.get('/api/resources/automation.job/nightly')).status).to.equal(404);
    const diffStrict = await svcctl(['diff', '-f', typo], env);
    expect(diffStrict.code).to.equal(1);
    expect(diffStrict.stderr).to.include('automation.job/nightly: unknown field "spec.enabeld"');

    const warned = await svcctl(['apply', '-f', typo, '--validate=warn', '-o', 'json'], env);
    expect(warned.code, warned.stderr).to.equal(0);
    expect(warned.stderr).to.include('Warning: automation.job/nightly: unknown field "spec.enabeld"');
    expect(JSON.parse(warned.stdout).summary).to.deep.equal({ created: 1 });
    expect((await record('automation.job', 'nightly')).spec).to.include({ enabled: false }).and.not.have.property('enabeld');
    // The live record now means exactly what the manifest says without its typo: strict still refuses, not "unchanged".
    expect((await svcctl(['apply', '-f', typo], env)).code).to.equal(1);
    const ignored = await svcctl(['apply', '-f', typo, '--validate=ignore', '-o', 'json'], env);
    expect(ignored.code).to.equal(0);
    expect(ignored.stderr).not.to.include('Warning');
    expect(JSON.parse(ignored.stdout).summary).to.deep.equal({ unchanged: 1 });
    const bad = await svcctl(['apply', '-f', typo, '--validate=lenient'], env);
    expect(bad.code).to.equal(2);
  });

  it('--prune deletes only the records of the same source that the manifests no longer name', async () => {
    const team1 = write('team1.yaml', [agent('t1a'), agent('t1b'), agent('t1c')]);
    const team2 = write('team2.yaml', [agent('t2a')]);
    expect((await svcctl(['apply', '-f', team1, '--selector', 'source=team1'], env)).code).to.equal(0);
    expect((await svcctl(['apply', '-f', team2, '--selector', 'source=team2'], env)).code).to.equal(0);
    await f.api.put('/api/resources/agent/byhand', { scope: { kind: 'global' }, spec: { name: 'byhand', prompt: 'x' }, expected_version: 0 });

    const usage = await svcctl(['apply', '-f', team1, '--prune'], env);
    expect(usage.code).to.equal(2);
    expect(usage.stderr).to.contain('--selector');

    write('team1.yaml', [agent('t1a')]);
    const pruned = await svcctl(['apply', '-f', team1, '--prune', '--selector', 'source=team1'], env);
    expect(pruned.code, pruned.stderr).to.equal(0);
    const res = JSON.parse(pruned.stdout).results;
    expect(res.filter((r: any) => r.action === 'pruned').map((r: any) => r.id).sort()).to.deep.equal(['t1b', 't1c']);
    expect((await f.api.get('/api/resources/agent/t1b')).status).to.equal(404);
    expect((await f.api.get('/api/resources/agent/t1c')).status).to.equal(404);
    for (const id of ['t1a', 't2a', 'byhand']) expect((await f.api.get(`/api/resources/agent/${id}`)).status, id).to.equal(200);
  });

  it('a concurrent edit by another writer is a conflict (exit 1) and is not overwritten; one by the same source is retried', async () => {
    const proxy = new InterposingProxy(() => f.service.url);
    await proxy.start();
    try {
      const file = write('x.yaml', [agent('x', 'From git.')]);
      expect((await svcctl(['apply', '-f', file], env)).code).to.equal(0);
      write('x.yaml', [agent('x', 'From git, v2.')]);
      proxy.beforePut = async () => {
        const r = await f.api.put('/api/resources/agent/x', { scope: { kind: 'global' }, spec: { name: 'x', prompt: 'Edited by hand.' }, expected_version: 1 });
        expect(r.status).to.equal(200);
      };
      const run = await svcctl(['apply', '-f', file], { SVC_URL: proxy.url });
      expect(run.code).to.equal(1);
      expect(JSON.parse(run.stdout).results[0]).to.include({ action: 'conflict' });
      expect(run.stderr).to.match(/agent\/x conflict: .*daemon\/system/);
      const live = await record('agent', 'x');
      expect(live.spec.prompt).to.equal('Edited by hand.');
      expect(live.version).to.equal(2);

      // Another run of the same source wrote in between: the live record is what that source wrote, so retry.
      const file2 = write('y.yaml', [agent('y', 'One.')]);
      expect((await svcctl(['apply', '-f', file2, '-l', 'source=ci'], env)).code).to.equal(0);
      write('y.yaml', [agent('y', 'Two.')]);
      proxy.beforePut = async () => {
        const spec = { name: 'y', prompt: 'Concurrent run.' };
        const canon = (await f.api.put('/api/resources/agent/y?dry_run=true', { scope: { kind: 'global' }, spec, expected_version: 1 })).body.record.spec;
        const r = await f.api.put('/api/resources/agent/y', { scope: { kind: 'global' }, spec, expected_version: 1, source: { kind: 'svcctl', id: `ci.${digestOf({ kind: 'global' }, canon)}` } });
        expect(r.status, JSON.stringify(r.body)).to.equal(200);
      };
      const retried = await svcctl(['apply', '-f', file2, '-l', 'source=ci'], { SVC_URL: proxy.url });
      expect(retried.code, retried.stderr).to.equal(0);
      expect(JSON.parse(retried.stdout).results[0]).to.include({ action: 'configured', version: 3 });
      expect((await record('agent', 'y')).spec.prompt).to.equal('Two.');
    } finally {
      await proxy.stop();
    }
  });

  it('--dry-run=server checks every record and stores nothing; an invalid manifest is a usage error (exit 2)', async () => {
    const file = write('d.yaml', [agent('d1'), agent('d2')]);
    const run = await svcctl(['apply', '-f', file, '--dry-run=server'], env);
    expect(run.code, run.stderr).to.equal(0);
    const out = JSON.parse(run.stdout);
    expect(out).to.include({ dry_run: true });
    expect(out.summary).to.deep.equal({ created: 2 });
    expect((await f.api.get('/api/resources/agent/d1')).status).to.equal(404);
    expect((await f.api.get('/api/resources')).body.records).to.have.length(0);

    const bad = write('bad.yaml', [{ kind: 'agent', id: 'bad', spec: { prompt: 'no name' } }]);
    const invalid = await svcctl(['apply', '-f', bad], env);
    expect(invalid.code).to.equal(2);
    expect(invalid.stderr).to.contain('spec.name');
    expect((await svcctl(['apply', '-f', path.join(dir, 'missing.yaml')], env)).code).to.equal(2);
    expect((await svcctl(['apply', '-f', file, '--dry-run=client'], env)).code).to.equal(2);
  });

  it('diff prints a unified diff of canonical specs and exits 1 on differences, 0 when equal', async () => {
    const file = write('d.yaml', [agent('d1')]);
    const before = await svcctl(['diff', '-f', file], env);
    expect(before.code).to.equal(1);
    expect(before.stdout).to.contain('+++ manifest/agent/d1').and.contain('+  prompt: Prompt of d1.');
    await svcctl(['apply', '-f', file], env);
    const same = await svcctl(['diff', '-f', file], env);
    expect(same.code, same.stdout + same.stderr).to.equal(0);
    expect(same.stdout).to.equal('');
    await f.api.put('/api/resources/agent/d1', { scope: { kind: 'global' }, spec: { name: 'd1', prompt: 'Changed.' }, expected_version: 1 });
    const changed = await svcctl(['diff', '-f', file], env);
    expect(changed.code).to.equal(1);
    expect(changed.stdout).to.contain('-  prompt: Changed.').and.contain('+  prompt: Prompt of d1.');
    expect((await record('agent', 'd1')).spec.prompt).to.equal('Changed.');
  });

  it('get (json, yaml, wide), status and delete', async () => {
    await svcctl(['apply', '-f', write('g.yaml', [agent('g1'), agent('g2')]), '--wait'], env);
    const list = await svcctl(['get', 'agent', '-o', 'json'], env);
    expect(list.code, list.stderr).to.equal(0);
    const recs = JSON.parse(list.stdout).records;
    expect(recs.map((r: any) => r.id)).to.deep.equal(['g1', 'g2']);
    expect(recs[0].status.observed_version).to.equal(1);
    const one = YAML.parse((await svcctl(['get', 'agent', 'g1', '-o', 'yaml'], env)).stdout);
    expect(one).to.include({ kind: 'agent', id: 'g1', version: 1 });
    const wide = await svcctl(['get', 'agent', '-o', 'wide'], env);
    expect(wide.stdout).to.match(/^KIND\s+ID\s+VERSION\s+STATUS\s+AGE\s+SCOPE\s+SOURCE\s+REASON/);
    expect(wide.stdout).to.match(/agent\s+g1\s+1\s+Ready\s+\S+\s+global\s+svcctl\/default\./);
    const st = await svcctl(['status', 'agent', 'g1', '-o', 'json'], env);
    expect(st.code).to.equal(0);
    expect(JSON.parse(st.stdout)).to.include({ state: 'Ready', version: 1 });
    expect(JSON.parse((await svcctl(['status', '-o', 'json'], env)).stdout).kinds).to.deep.equal({ agent: { Ready: 2 } });

    const del = await svcctl(['delete', 'agent', 'g1'], env);
    expect(del.code, del.stderr).to.equal(0);
    expect((await f.api.get('/api/resources/agent/g1')).status).to.equal(404);
    expect((await f.api.get('/api/resources/agent/g2')).status).to.equal(200);
    expect((await svcctl(['delete', 'agent', 'g1'], env)).code).to.equal(1);
    expect((await svcctl(['delete', 'agent', 'g1', '--ignore-not-found'], env)).code).to.equal(0);
    expect((await svcctl(['get', 'agent', 'g1'], env)).code).to.equal(1);
  });

  it('--wait fails on a Degraded record and prints its reason', async () => {
    const file = write('m.yaml', [agent('fine'), { kind: 'mcp_server', id: 'broken', scope: { kind: 'global' }, spec: { name: 'broken', command: '/nonexistent/mcp-server' } }]);
    const run = await svcctl(['apply', '-f', file, '--wait', '--timeout', '60s'], env);
    expect(run.code).to.equal(1);
    const res = JSON.parse(run.stdout).results;
    expect(res.find((r: any) => r.id === 'fine')).to.include({ action: 'created' });
    expect(res.find((r: any) => r.id === 'broken')).to.include({ action: 'degraded', reason: 'backend_not_executable' });
    expect(run.stderr).to.contain('mcp_server/broken degraded: backend_not_executable');
  });

  it('--wait judges a job after the agent it names, written by the same apply: not Degraded by the agent missing before', async () => {
    const job = { kind: 'automation.job', id: 'needs-agent', scope: { kind: 'global' }, spec: { name: 'needs-agent', agent_name: 'late', prompt: 'p', enabled: true, schedule: { mode: 'cron', expr: '0 3 * * *' } } };
    // The job alone first: Degraded (AgentNotFound), and unchanged by the next apply, which only adds its agent.
    const first = await svcctl(['apply', '-f', write('job.yaml', [job]), '--wait', '--timeout', '60s'], env);
    expect(JSON.parse(first.stdout).results[0]).to.include({ action: 'degraded', reason: 'AgentNotFound' });
    const both = await svcctl(['apply', '-f', write('both.yaml', [job, agent('late')]), '--wait', '--timeout', '60s'], env);
    expect(both.code, both.stderr).to.equal(0);
    const res = JSON.parse(both.stdout).results;
    expect(res.find((r: any) => r.id === 'needs-agent')).to.deep.include({ action: 'unchanged' });
    expect(res.find((r: any) => r.id === 'late')).to.include({ action: 'created' });
  });

  it('watch prints the changes as they happen', async () => {
    // NOTE: from a known revision, so changes made before the watch's first list are still printed.
    const since = (await f.api.get('/api/resources?limit=1')).headers.get('x-svc-revision')!;
    const w = start(['watch', 'agent', '--since', since, '--count', '2', '--timeout', '30s', '-o', 'json'], env);
    await svcctl(['apply', '-f', write('w.yaml', [agent('w1'), agent('w2')])], env);
    const run = await w.done;
    expect(run.code, run.stderr).to.equal(0);
    const frames = run.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(frames.map((x) => `${x.type} ${x.record.id}`).sort()).to.deep.equal(['put w1', 'put w2']);
  });

  it('sessions list, prompt (with an approval from another svcctl) and attach', async () => {
    const s = (await f.api.post('/api/sessions', { workspace: f.ws.id })).body.session;
    const list = await svcctl(['sessions', 'list', '-o', 'json'], env);
    expect(JSON.parse(list.stdout).sessions.map((x: any) => x.id)).to.deep.equal([s.id]);

    const hello = await svcctl(['sessions', 'prompt', s.id, 'hello', 'there', '-o', 'text'], env);
    expect(hello.code, hello.stderr).to.equal(0);
    expect(hello.stdout).to.contain('hello there');

    const p = start(['sessions', 'prompt', s.id, '/permission Deploy', '-o', 'json'], env);
    const requestId = await new Promise<string>((resolve, reject) => {
      const t = setInterval(() => {
        const m = /permission requested \(([^)]+)\)/.exec(p.out.stderr);
        if (m) { clearInterval(t); resolve(m[1]); }
      }, 100);
      p.on('close', () => { clearInterval(t); reject(new Error(`prompt ended first: ${p.out.stderr}`)); });
    });
    const ok = await svcctl(['approve', s.id, requestId, '--decision', 'allow-once'], env);
    expect(ok.code, ok.stderr).to.equal(0);
    const prompted = await p.done;
    expect(prompted.code, prompted.stderr).to.equal(0);
    expect(JSON.parse(prompted.stdout).text).to.contain('permission granted');

    const attach = await svcctl(['sessions', 'attach', s.id, '--timeout', '3s', '-o', 'json'], env);
    expect(attach.code, attach.stderr).to.equal(0);
    const types = attach.stdout.trim().split('\n').map((l) => JSON.parse(l).type);
    expect(types).to.include('agent_message');
    expect(types.filter((t) => t === 'user_message').length).to.be.at.least(2);

    // A failed turn: prompt exits 1 with the error, and attach's text line of the `error` event says it.
    const failed = await svcctl(['sessions', 'prompt', s.id, '/error quota used up', '-o', 'text'], env);
    expect(failed.code).to.equal(1);
    expect(failed.stderr).to.contain('quota used up');
    const text = await svcctl(['sessions', 'attach', s.id, '--timeout', '3s', '-o', 'text'], env);
    expect(text.stdout.split('\n').filter((l) => / error /.test(l))).to.have.length(1);
    expect(text.stdout).to.match(/ error \S+ quota used up\n/);
  });

  it('exits 3 when the service is unreachable, and reads the server from a config file context', async () => {
    const down = await svcctl(['get', 'agent'], { SVC_URL: 'http://127.0.0.1:9' });
    expect(down.code).to.equal(3);
    expect(down.stderr).to.contain('cannot reach');
    const cfg = path.join(dir, 'config.yaml');
    writeFileSync(cfg, YAML.stringify({ 'current-context': 'down', contexts: [{ name: 'down', server: 'http://127.0.0.1:9' }, { name: 'test', server: f.service.url }] }));
    expect((await svcctl(['get', 'agent'], { SVCCTL_CONFIG: cfg })).code).to.equal(3);
    const ok = await svcctl(['--context', 'test', 'get', 'agent', '-o', 'json'], { SVCCTL_CONFIG: cfg });
    expect(ok.code, ok.stderr).to.equal(0);
    expect(JSON.parse(ok.stdout).records).to.deep.equal([]);
    expect((await svcctl(['--context', 'nope', 'get', 'agent'], { SVCCTL_CONFIG: cfg })).code).to.equal(2);
    // The environment wins over the file.
    expect((await svcctl(['get', 'agent'], { SVCCTL_CONFIG: cfg, SVC_URL: f.service.url })).code).to.equal(0);
  });

  it('the service keeps a client-named source and refuses the service writers\' own kinds', async () => {
    const body = (source: unknown) => ({ scope: { kind: 'global' }, spec: { name: 'src', prompt: 'x' }, expected_version: 0, source });
    expect((await f.api.put('/api/resources/agent/src', body({ kind: 'daemon', id: 'bundle-sync' }))).status).to.equal(422);
    expect((await f.api.put('/api/resources/agent/src', body({ kind: 'svcctl', id: 'bad id' }))).status).to.equal(422);
    expect((await f.api.get('/api/resources/agent/src')).status).to.equal(404);
    const ok = await f.api.put('/api/resources/agent/src', body({ kind: 'gitops', id: 'repo1' }));
    expect(ok.status).to.equal(201);
    expect(ok.body.record.source).to.deep.equal({ kind: 'gitops', id: 'repo1' });
    expect((await f.api.get('/api/resources?source_kind=gitops&source_id=repo1')).body.records.map((r: any) => r.id)).to.deep.equal(['src']);
  });

  it('applies a directory of 1,000 records (prints the time)', async () => {
    for (let i = 0; i < 10; i++) write(`bulk/f${i}.yaml`, Array.from({ length: 100 }, (_, j) => agent(`bulk-${i}-${j}`)));
    let t = Date.now();
    const first = await svcctl(['apply', '-f', path.join(dir, 'bulk')], env);
    const createMs = Date.now() - t;
    expect(first.code, first.stderr).to.equal(0);
    expect(JSON.parse(first.stdout).summary).to.deep.equal({ created: 1000 });
    t = Date.now();
    const again = await svcctl(['apply', '-f', path.join(dir, 'bulk')], env);
    const noopMs = Date.now() - t;
    expect(JSON.parse(again.stdout).summary).to.deep.equal({ unchanged: 1000 });
    console.log(`      svcctl apply of 1,000 records: ${createMs} ms (create), ${noopMs} ms (second apply, no-op), including process start`);
  });
});
