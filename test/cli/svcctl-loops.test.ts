import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { createLoop, loopDef, t } from '../loops/helpers.ts';
import { start, svcctl } from './cli.ts';
import { parseInputs } from '../../runtime/cli/loops.ts';

describe('svcctl loops (child process, real service and Redis)', function () {
  this.timeout(120_000);
  const f = new ServiceFixture().install();
  let env: Record<string, string> = {};
  beforeEach(() => { env = { SVC_URL: f.service.url }; });
  const json = (out: string) => JSON.parse(out);
  const gated = () => createLoop(f, loopDef('gated', [
    t('work', [], 'built {{ .inputs.what }}'),
    { id: 'review', kind: 'gate', depends_on: ['work'], criteria: [{ type: 'human', prompt: 'ship it?' }] },
    t('ship', ['review'], 'shipped'),
  ], { inputs: { what: { type: 'string', required: true } } }));
  const runStatus = async (id: string) => (await f.api.get(`/api/workspaces/${f.ws.id}/loop-runs/${id}`)).body.run.status;

  it('run starts a run with its inputs; get shows its nodes; approve decides the parked gate; events replay to the end', async () => {
    await gated();
    const started = await svcctl(['loops', 'run', 'gated', '-w', f.ws.id, '-i', 'what=docs', '-o', 'json'], env);
    expect(started.code, started.stderr).to.equal(0);
    const run = json(started.stdout).run;
    expect(run).to.include({ loop_name: 'gated' });
    expect(run.inputs).to.deep.equal({ what: 'docs' });
    await eventually(async () => expect(await runStatus(run.id)).to.equal('needs-approval'));

    const got = await svcctl(['loops', 'get', run.id, '-w', f.ws.id, '-o', 'text'], env);
    expect(got.code, got.stderr).to.equal(0);
    expect(got.stdout.split('\n')[0]).to.match(new RegExp(`^${run.id} needs-approval \\(approval: .*\\) loop gated, generation 1, gate review, tokens 0`));
    expect(got.stdout).to.match(/1 +work +succeeded +1/);
    expect(got.stdout).to.match(/1 +review +waiting/);

    const wrongGate = await svcctl(['loops', 'approve', run.id, 'nope', '-w', f.ws.id], env);
    expect(wrongGate.code).to.equal(1);
    expect(wrongGate.stderr).to.match(/409/);
    expect(await runStatus(run.id)).to.equal('needs-approval');

    const approved = await svcctl(['loops', 'approve', run.id, 'review', '--decision', 'approve', '-w', f.ws.id, '-o', 'json'], env);
    expect(approved.code, approved.stderr).to.equal(0);
    expect(json(approved.stdout).ok).to.equal(true);
    await eventually(async () => expect(await runStatus(run.id)).to.equal('done'));

    const events = await svcctl(['loops', 'events', run.id, '-w', f.ws.id, '-o', 'json'], env);
    expect(events.code, events.stderr).to.equal(0);
    const rows = events.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(rows.map((r) => r.seq)).to.deep.equal(rows.map((_, i) => i + 1));
    expect(rows.at(-1)).to.deep.include({ kind: 'status_changed' });
    expect(rows.at(-1).payload.status).to.equal('done');
    const after = await svcctl(['loops', 'events', run.id, '-w', f.ws.id, '--after', String(rows.length - 2), '-o', 'text'], env);
    expect(after.stdout.trim().split('\n')).to.have.length(2);
    expect(after.stdout).to.match(/status_changed status=done/);
  });

  it('run --wait follows the run to its end: exit 0 when done, exit 1 when it ends blocked', async () => {
    await gated();
    const waiting = start(['loops', 'run', 'gated', '-w', f.ws.id, '--inputs', '{"what":"api"}', '--wait', '-o', 'text'], env);
    const runId = await eventually(async () => {
      const m = /^(\S+) started/.exec(waiting.out.stdout);
      expect(m, waiting.out.stderr).to.not.equal(null);
      return m![1];
    });
    await eventually(async () => expect(await runStatus(runId)).to.equal('needs-approval'));
    expect((await f.api.post(`/api/workspaces/${f.ws.id}/loop-runs/${runId}/approve`, { gate_id: 'review', decision: 'approve' })).status).to.equal(200);
    const done = await waiting.done;
    expect(done.code, done.stderr).to.equal(0);
    expect(done.stdout).to.match(/status_changed status=done/);

    const blocked = start(['loops', 'run', 'gated', '-w', f.ws.id, '-i', 'what=x', '--wait', '-o', 'json'], env);
    const id2 = await eventually(async () => {
      const first = blocked.out.stdout.split('\n').find(Boolean);
      expect(first).to.not.equal(undefined);
      return JSON.parse(first!).loop_run_id as string;
    });
    await eventually(async () => expect(await runStatus(id2)).to.equal('needs-approval'));
    expect((await f.api.post(`/api/workspaces/${f.ws.id}/loop-runs/${id2}/approve`, { gate_id: 'review', decision: 'reject' })).status).to.equal(200);
    const res = await blocked.done;
    expect(res.code).to.equal(1);
    expect(res.stderr).to.contain(`loop run ${id2} ended blocked (gate_rejected`);
  });

  it('run --wait --timeout gives up on a run still live (exit 1, the run untouched)', async () => {
    await gated();
    const res = await svcctl(['loops', 'run', 'gated', '-w', f.ws.id, '-i', 'what=x', '--wait', '--timeout', '1s', '-o', 'json'], env);
    expect(res.code).to.equal(1);
    expect(res.stderr).to.match(/is still (running|needs-approval) after 1s/);
    const runs = (await f.api.get(`/api/workspaces/${f.ws.id}/loop-runs`)).body.runs;
    expect(runs.map((r: { status: string }) => r.status)).to.deep.equal(['needs-approval']);
  });

  it('--input pairs take the types the loop declares (a string stays a string), over --inputs', () => {
    const types = { version: 'string', n: 'integer', dry: 'boolean', files: 'array' };
    expect(parseInputs(['version=2.0', 'n=3', 'dry=true', 'files=["a","b"]', 'free=x=y'], '{"n":1,"other":{"k":1}}', types))
      .to.deep.equal({ version: '2.0', n: 3, dry: true, files: ['a', 'b'], free: 'x=y', other: { k: 1 } });
    expect(() => parseInputs(['n=three'], undefined, types)).to.throw(/--input n must be a number/);
    expect(() => parseInputs(['dry=yes'], undefined, types)).to.throw(/true or false/);
    expect(() => parseInputs([], '[1]')).to.throw(/JSON object/);
  });

  it('list --live is a flag (only live runs); --live false lists the ended ones; another value is exit 2', async () => {
    await gated();
    await createLoop(f, loopDef('quick', [t('a')]));
    const live = json((await svcctl(['loops', 'run', 'gated', '-w', f.ws.id, '-i', 'what=x', '-o', 'json'], env)).stdout).run;
    const ended = json((await svcctl(['loops', 'run', 'quick', '-w', f.ws.id, '-o', 'json'], env)).stdout).run;
    await eventually(async () => expect([await runStatus(live.id), await runStatus(ended.id)]).to.deep.equal(['needs-approval', 'done']));
    const flag = await svcctl(['loops', 'list', '-w', f.ws.id, '--live', '-o', 'json'], env);
    expect(flag.code, flag.stderr).to.equal(0);
    expect(json(flag.stdout).runs.map((r: any) => r.id)).to.deep.equal([live.id]);
    const flagFirst = await svcctl(['loops', 'list', '--live', '-w', f.ws.id, '-o', 'json'], env);
    expect(flagFirst.code, flagFirst.stderr).to.equal(0);
    expect(json(flagFirst.stdout).runs.map((r: any) => r.id)).to.deep.equal([live.id]);
    const off = await svcctl(['loops', 'list', '-w', f.ws.id, '--live', 'false', '-o', 'json'], env);
    expect(json(off.stdout).runs.map((r: any) => r.id)).to.deep.equal([ended.id]);
    const bad = await svcctl(['loops', 'list', '-w', f.ws.id, '--live', 'maybe'], env);
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.include('--live');
  });

  it('a missing loop or run is exit 1, bad flags exit 2, no service exit 3', async () => {
    const missing = await svcctl(['loops', 'run', 'nope', '-w', f.ws.id], env);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.contain('404');
    const noRun = await svcctl(['loops', 'get', 'lr-nope', '-w', f.ws.id], env);
    expect(noRun.code).to.equal(1);
    expect((await svcctl(['loops', 'run', 'gated', '-w', f.ws.id, '-i', 'novalue'], env)).code).to.equal(2);
    expect((await svcctl(['loops', 'approve', 'r', 'g', '-w', f.ws.id, '--decision', 'maybe'], env)).code).to.equal(2);
    expect((await svcctl(['loops', 'get', 'r'], env)).code).to.equal(2);
    const down = await svcctl(['loops', 'get', 'r', '-w', f.ws.id], { SVC_URL: 'http://127.0.0.1:9' });
    expect(down.code).to.equal(3);
    expect((await f.api.get(`/api/workspaces/${f.ws.id}/loop-runs`)).body.runs).to.have.length(0);
  });
});
