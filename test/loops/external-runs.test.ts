import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { SessionStore } from '../../store/session-store.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { createLoop, detail, eventsOf, loopDef, nodeStates, outputOf, startRun, t, waitStatus } from './helpers.ts';

describe('Loop runs of nodes that call other families', function () {
  this.timeout(60_000);
  const f = new ServiceFixture({ env: { LOOP_WATCHDOG_INTERVAL: '1s' } }).install();
  const runs = () => `/api/workspaces/${f.ws.id}/loop-runs`;
  const approve = (id: string, gate_id: string, decision: string) => f.api.post(`${runs()}/${id}/approve`, { gate_id, decision });
  const sessions = () => new SessionStore(f.service.store!.redis, f.service.store!.keys);

  it('run-agent: the agent\'s answer feeds the next node and its usage tokens count against the run', async () => {
    await createLoop(f, loopDef('agent_chain', [
      { id: 'draft', kind: 'run-agent', prompt: 'outline for {{ .inputs.topic }}\n/usage 30 12' },
      t('publish', ['draft'], 'published: {{ .nodes.draft.output }}'),
    ], { inputs: { topic: { type: 'string', required: true } } }));
    const d = await waitStatus(f, (await startRun(f, 'agent_chain', { inputs: { topic: 'loops' } })).id, ['done']);
    expect(outputOf(d, 'draft')).to.equal('outline for loops');
    expect(outputOf(d, 'publish')).to.equal('published: outline for loops');
    expect(d.run.tokens_used).to.equal(42);
    const msg = (await eventsOf(f, d.run.id)).find((e) => e.kind === 'channel_msg');
    expect(msg.payload).to.include({ node_id: 'draft', role: 'worker' });
    expect((await sessions().get(msg.payload.session_id))!.origin).to.equal(`loop_run/${d.run.id}`);
  });

  it('run-agent: the token budget halts a run whose agent spent past it', async () => {
    await createLoop(f, loopDef('agent_budget', [
      { id: 'spend', kind: 'run-agent', prompt: '/usage 900 200' }, t('after', ['spend']),
    ], { contract: { budget: { tokens: 1000, on_exceeded: 'halt' } } }));
    const d = await waitStatus(f, (await startRun(f, 'agent_budget')).id, ['exhausted']);
    expect(d.run.status_cause).to.equal('budget');
    expect(d.run.tokens_used).to.equal(1100);
    expect(nodeStates(d)['after@1']).to.not.equal('succeeded');
  });

  it('run-agent: stopping the run stops the agent\'s session mid-turn', async () => {
    await createLoop(f, loopDef('agent_stop', [{ id: 'slow', kind: 'run-agent', prompt: '/sleep 30000' }]));
    const run = await startRun(f, 'agent_stop');
    const sid = await eventually(async () => {
      const s = (await sessions().list(f.ws.id))[0];
      expect(s?.prompt_active).to.equal(true);
      return s.id;
    });
    expect((await f.api.post(`${runs()}/${run.id}/stop`, {})).status).to.equal(200);
    await waitStatus(f, run.id, ['failed']);
    await eventually(async () => expect((await sessions().get(sid))!.state).to.equal('stopped'));
  });

  it('a tool node that needs approval parks the run in needs-approval; approve runs the call, and only then', async () => {
    await createLoop(f, loopDef('tool_write', [
      { id: 'write', kind: 'svc__workspace_write_file', params: { path: 'report.md', content: 'report for {{ .inputs.who }}' } },
      t('after', ['write'], '{{ .nodes.write.output.structured.path }}'),
    ], { inputs: { who: { type: 'string', default: 'ops' } } }));
    const run = await startRun(f, 'tool_write');
    const parked = await waitStatus(f, run.id, ['needs-approval']);
    expect(parked.run.active_gate_id).to.equal('write');
    expect(nodeStates(parked)['write@1']).to.equal('waiting');
    expect(existsSync(path.join(f.root, 'report.md'))).to.equal(false);
    expect((await approve(run.id, 'write', 'request_changes')).status).to.equal(409);
    expect((await approve(run.id, 'write', 'approve')).status).to.equal(200);
    const d = await waitStatus(f, run.id, ['done']);
    expect(readFileSync(path.join(f.root, 'report.md'), 'utf8')).to.equal('report for ops');
    expect(outputOf(d, 'after')).to.equal('report.md');
  });

  it('a tool call an operator rejects blocks the run and never runs', async () => {
    await createLoop(f, loopDef('tool_reject', [{ id: 'write', kind: 'svc__workspace_write_file', params: { path: 'nope.md', content: 'x' } }]));
    const run = await startRun(f, 'tool_reject');
    await waitStatus(f, run.id, ['needs-approval']);
    expect((await approve(run.id, 'write', 'reject')).status).to.equal(200);
    const d = await waitStatus(f, run.id, ['blocked']);
    expect(d.run.status_cause).to.equal('gate_rejected');
    expect(existsSync(path.join(f.root, 'nope.md'))).to.equal(false);
  });

  it('a command gate passes the run on its exit code', async () => {
    await createLoop(f, loopDef('cmd_gate', [
      t('work', [], 'ok'),
      { id: 'check', kind: 'gate', depends_on: ['work'], criteria: [{ id: 'exit', type: 'command', check: [process.execPath, '-e', 'process.exit(0)'] }] },
      t('ship', ['check']),
    ]));
    const d = await waitStatus(f, (await startRun(f, 'cmd_gate')).id, ['done']);
    expect(nodeStates(d)).to.include({ 'check@1': 'succeeded', 'ship@1': 'succeeded' });
    const verdict = (await eventsOf(f, d.run.id)).find((e) => e.kind === 'gate_verdict');
    expect(verdict.payload).to.include({ gate_id: 'check', outcome: 'approved', criterion_id: 'exit' });
  });

  it('an agent-judge gate that cannot answer sends the work back, then fails open on the third broken answer', async () => {
    await createLoop(f, loopDef('judge_gate', [
      { id: 'work', kind: 'run-agent', prompt: 'attempt {{ .revision }}' },
      { id: 'review', kind: 'gate', depends_on: ['work'], verdict_policy: 'revise_until_clean', max_revisions: 5, criteria: [{ id: 'judge', type: 'agent-judge', prompt: 'no verdict here: {{ .nodes.work.output }}' }] },
    ]));
    const d = await waitStatus(f, (await startRun(f, 'judge_gate')).id, ['done'], 40_000);
    const verdicts = (await eventsOf(f, d.run.id)).filter((e) => e.kind === 'gate_verdict').map((e) => e.payload);
    expect(verdicts.map((v) => v.outcome)).to.deep.equal(['rejected', 'rejected', 'approved']);
    expect(verdicts[2].reason).to.contain('failed open');
    expect(outputOf(d, 'work')).to.equal('attempt 2\nRevision 2, feedback: {"invalid_output":true,"broken_in_a_row":2}');
  });

  it('watch-events: the run shows watching until a matching event of its workspace arrives, which becomes the node\'s output', async () => {
    await createLoop(f, loopDef('watcher', [
      { id: 'wait_task', kind: 'watch-events', events: [{ kind: 'task.created', filter: 'task=task_wanted' }] },
      t('after', ['wait_task'], '{{ .nodes.wait_task.output.event.type }}'),
    ]));
    const run = await startRun(f, 'watcher');
    const watching = await waitStatus(f, run.id, ['watching']);
    expect(watching.run.status_cause).to.equal('watch_events');
    const task = (id: string) => f.api.post('/api/tasks', { id, title: id, scope: 'workspace', workspace: f.ws.id });
    expect((await task('task_other')).status).to.equal(201);
    await new Promise((r) => setTimeout(r, 1500));
    expect((await detail(f, run.id)).run.status).to.equal('watching');
    expect((await task('task_wanted')).status).to.equal(201);
    const d = await waitStatus(f, run.id, ['done']);
    expect(outputOf(d, 'after')).to.equal('task.created');
    expect(outputOf(d, 'wait_task').event.workspace_id).to.equal(f.ws.id);
    const statuses = (await eventsOf(f, run.id)).filter((e) => e.kind === 'status_changed').map((e) => `${e.payload.status}:${e.payload.cause}`);
    expect(statuses).to.deep.equal(['running:start', 'watching:watch_events', 'running:watch_events', 'done:contract']);
  });
});
