import { expect } from 'chai';
import type { NodeExecutor } from '../../runtime/loops/types.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { createLoop, detail, eventsOf, loopDef, nodeStates, outputOf, startRun, t, waitStatus } from './helpers.ts';

/**
 * Test executors, registered as tool-id kinds the way the node kinds of other families are: `test__spend` reports
 * `params.tokens` tokens, `test__sleep` waits `params.ms` (honouring the abort signal).
 */
const spend: NodeExecutor = { kind: 'test__spend', sideEffects: 'exactly-once', run: async (ctx) => ({ outcome: 'succeeded', output: { generation: ctx.key.generation }, tokens: Number(ctx.node.params?.tokens ?? 0) }) };
const sleep: NodeExecutor = {
  kind: 'test__sleep', sideEffects: 'exactly-once',
  run: (ctx) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve({ outcome: 'succeeded', output: ctx.key.generation }), Number(ctx.node.params?.ms ?? 100));
    ctx.signal.addEventListener('abort', () => { clearTimeout(timer); reject(new Error('aborted')); }, { once: true });
  }),
};
const branch = (id: string, deps: string[], condition: string) => ({ id, kind: 'branch', depends_on: deps, condition });
const human = (id: string, deps: string[], extra: Record<string, unknown> = {}) => ({ id, kind: 'gate', depends_on: deps, criteria: [{ type: 'human', prompt: 'ok?' }], ...extra });

describe('Loop runs', function () {
  this.timeout(60_000);
  const f = new ServiceFixture({ env: { LOOP_WATCHDOG_INTERVAL: '1s' } }).install();
  const runs = () => `/api/workspaces/${f.ws.id}/loop-runs`;
  const approve = (id: string, gate_id: string, decision: string) => f.api.post(`${runs()}/${id}/approve`, { gate_id, decision });
  beforeEach(() => { f.service.loops!.registry.register(spend).register(sleep); });

  it('a diamond whose one branch is not taken finishes done: the route not taken is skipped, the join runs', async () => {
    await createLoop(f, loopDef('diamond', [
      t('a', [], 'yes'), branch('b', ['a'], '{{ .nodes.a.output }}'), t('c', []), t('d', []), t('e', ['c', 'd'], { c: '{{ .nodes.c.outcome }}', d: '{{ .nodes.d.outcome }}' }),
    ], {}, [{ from: 'b', to: 'c', when: 'yes' }, { from: 'b', to: 'd', when: 'no' }]));
    const d = await waitStatus(f, (await startRun(f, 'diamond')).id, ['done']);
    expect(nodeStates(d)).to.deep.equal({ 'a@1': 'succeeded', 'b@1': 'succeeded', 'c@1': 'succeeded', 'd@1': 'skipped', 'e@1': 'succeeded' });
    expect(outputOf(d, 'e')).to.deep.equal({ c: 'succeeded', d: 'skipped' });
  });

  it('the original\'s deadlock shape finishes: a not-taken route feeding a shared downstream through a chain skips it, the shared node still runs', async () => {
    await createLoop(f, loopDef('deadlock', [
      branch('route', [], '{{ .inputs.pick }}'), t('fast', []), t('slow1', []), t('slow2', ['slow1']), t('claim', ['fast', 'slow2']),
    ], { inputs: { pick: { type: 'string', required: true } } }, [{ from: 'route', to: 'fast', when: 'fast' }, { from: 'route', to: 'slow1', when: 'slow' }]));
    const d = await waitStatus(f, (await startRun(f, 'deadlock', { inputs: { pick: 'fast' } })).id, ['done']);
    expect(nodeStates(d)).to.deep.equal({ 'route@1': 'succeeded', 'fast@1': 'succeeded', 'slow1@1': 'skipped', 'slow2@1': 'skipped', 'claim@1': 'succeeded' });
  });

  it('join wait_all: a failed upstream fails the join after every upstream ended; the run fails after the failure breaker (2 generations)', async () => {
    await createLoop(f, loopDef('waitall', [t('bad', [], null, { params: { fail: true, error: 'boom' } }), t('good', []), t('join', ['bad', 'good'])]));
    const d = await waitStatus(f, (await startRun(f, 'waitall')).id, ['failed']);
    expect(d.run.status_cause).to.equal('failure_breaker');
    expect(d.run.consecutive_failures).to.equal(2);
    expect(nodeStates(d)).to.include({ 'bad@1': 'failed', 'good@1': 'succeeded', 'join@1': 'failed', 'bad@2': 'failed', 'join@2': 'failed' });
    // NOTE: failed_only reattempt: the node that succeeded is kept, not run again.
    const turns = (await f.api.get(`${runs()}/${d.run.id}/turns`)).body.turns;
    expect(turns.filter((x: any) => x.node_id === 'good' && x.generation === 2)).to.have.length(1);
    expect(turns.find((x: any) => x.node_id === 'join' && x.generation === 1).cause).to.equal('upstream_failed');
  });

  it('join fail_fast fails as soon as one upstream fails, while another still waits (a parked gate); best_effort runs whatever its upstreams ended', async () => {
    await createLoop(f, loopDef('failfast', [t('bad', [], null, { params: { fail: true } }), human('gate', []), t('join', ['bad', 'gate'], 'x', { join: 'fail_fast' })]));
    const run = await startRun(f, 'failfast');
    const d = await waitStatus(f, run.id, ['needs-approval']);
    await eventually(async () => expect(nodeStates(await detail(f, run.id))).to.include({ 'bad@1': 'failed', 'join@1': 'failed', 'gate@1': 'waiting' }));
    expect(d.run.active_gate_id).to.equal('gate');

    await createLoop(f, loopDef('besteffort', [t('bad', [], null, { params: { fail: true } }), t('good', []), t('join', ['bad', 'good'], { bad: '{{ .nodes.bad.outcome }}' }, { join: 'best_effort' })]));
    const b = await waitStatus(f, (await startRun(f, 'besteffort')).id, ['done']);
    expect(nodeStates(b)).to.deep.equal({ 'bad@1': 'failed', 'good@1': 'succeeded', 'join@1': 'succeeded' });
    expect(outputOf(b, 'join')).to.deep.equal({ bad: 'failed' });
  });

  it('a waiting run-loop node succeeds only after its child run ends done', async () => {
    await createLoop(f, loopDef('child', [human('check', [])]));
    await createLoop(f, loopDef('parent', [{ id: 'sub', kind: 'run-loop', loop: 'child' }, t('after', ['sub'], '{{ .nodes.sub.output.status }}')]));
    const parent = await startRun(f, 'parent');
    const p1 = await eventually(async () => {
      const d = await detail(f, parent.id);
      expect(nodeStates(d)['sub@1']).to.equal('waiting');
      return d;
    });
    const childId = p1.generations[0].outputs.find((o: any) => o.node_id === 'sub').child_loop_run_id;
    expect(childId).to.be.a('string').and.not.equal('');
    const child = await waitStatus(f, childId, ['needs-approval']);
    expect(child.run.parent_loop_run_id).to.equal(parent.id);
    expect((await detail(f, parent.id)).run.status).to.equal('running');
    expect(nodeStates(await detail(f, parent.id))).to.not.have.property('after@1');
    expect((await approve(childId, 'check', 'approve')).status).to.equal(200);
    await waitStatus(f, childId, ['done']);
    const pd = await waitStatus(f, parent.id, ['done']);
    expect(outputOf(pd, 'after')).to.equal('done');
  });

  it('run-loop refuses a loop in its own ancestry (the node fails naming it)', async () => {
    await createLoop(f, loopDef('selfish', [{ id: 'again', kind: 'run-loop', loop: 'selfish' }]));
    const d = await waitStatus(f, (await startRun(f, 'selfish')).id, ['failed']);
    const turns = (await f.api.get(`${runs()}/${d.run.id}/turns`)).body.turns;
    expect(turns[0].error).to.match(/own ancestry/);
  });

  it('a fan-out of 20 runs each item and the collect gathers the results in item order', async () => {
    const items = Array.from({ length: 20 }, (_, i) => `item-${i}`);
    await createLoop(f, loopDef('fan', [
      { id: 'split', kind: 'fan-out', collection: '{{ .inputs.files }}', max_fan_out: 20 },
      t('work', ['split'], { name: '{{ .item }}', index: '{{ .item_index }}' }),
      { id: 'gather', kind: 'collect', depends_on: ['work'] },
    ], { inputs: { files: { type: 'array', required: true } } }));
    const d = await waitStatus(f, (await startRun(f, 'fan', { inputs: { files: items } })).id, ['done']);
    const got = outputOf(d, 'gather').items as { name: string; index: number }[];
    expect(got.map((x) => x.name)).to.deep.equal(items);
    expect(got.map((x) => x.index)).to.deep.equal(items.map((_, i) => i));
    expect(Object.keys(nodeStates(d)).filter((k) => k.startsWith('work['))).to.have.length(20);
  });

  it('a human gate parks the run in needs-approval; approve resumes it to done; a stale gate or a bad decision changes nothing', async () => {
    await createLoop(f, loopDef('review', [t('draft', []), human('gate', ['draft']), t('ship', ['gate'])]));
    const run = await startRun(f, 'review');
    const parked = await waitStatus(f, run.id, ['needs-approval']);
    expect(parked.run.active_gate_id).to.equal('gate');
    expect((await approve(run.id, 'other', 'approve')).status).to.equal(409);
    expect((await approve(run.id, 'gate', 'maybe')).status).to.equal(422);
    expect((await detail(f, run.id)).run.status).to.equal('needs-approval');
    expect((await approve(run.id, 'gate', 'approve')).body).to.deep.equal({ ok: true });
    const d = await waitStatus(f, run.id, ['done']);
    expect(nodeStates(d)).to.deep.equal({ 'draft@1': 'succeeded', 'gate@1': 'succeeded', 'ship@1': 'succeeded' });
    expect((await approve(run.id, 'gate', 'approve')).status).to.equal(409);
  });

  it('request_changes revises the gate\'s upstream up to max_revisions, then revise_until_clean blocks the run', async () => {
    await createLoop(f, loopDef('revise', [t('draft', [], { revision: '{{ .revision }}', feedback: '{{ .feedback }}' }), human('gate', ['draft'], { max_revisions: 2, verdict_policy: 'revise_until_clean' })]));
    const run = await startRun(f, 'revise');
    for (let r = 0; r < 2; r++) {
      await waitStatus(f, run.id, ['needs-approval']);
      expect((await approve(run.id, 'gate', 'request_changes')).status).to.equal(200);
      const d = await eventually(async () => {
        const x = await detail(f, run.id);
        expect(outputOf(x, 'draft')?.revision).to.equal(r + 1);
        return x;
      });
      expect(outputOf(d, 'draft').feedback).to.equal('changes requested by an operator');
    }
    await waitStatus(f, run.id, ['needs-approval']);
    expect((await approve(run.id, 'gate', 'request_changes')).status).to.equal(200);
    const d = await waitStatus(f, run.id, ['blocked']);
    expect(d.run.status_cause).to.equal('gate_rejected');
    const turns = (await f.api.get(`${runs()}/${run.id}/turns`)).body.turns;
    expect(turns.find((x: any) => x.node_id === 'draft').revision).to.equal(2);
  });

  it('budget halt ends the run exhausted (cause budget); budget escalate parks it on the synthetic gate budget, and approving grants another budget', async () => {
    const body = (on: string) => loopDef(`budget-${on}`, [{ id: 'spend', kind: 'test__spend', params: { tokens: 400 } }], {
      contract: { stop_when: '{{ .nodes.never.output }}', iteration_cap: 50, budget: { tokens: 1000, on_exceeded: on } },
    });
    await createLoop(f, body('halt'));
    const h = await waitStatus(f, (await startRun(f, 'budget-halt')).id, ['exhausted']);
    expect(h.run.status_cause).to.equal('budget');
    expect(h.run.tokens_used).to.equal(1200);
    expect(h.generations).to.have.length(3);

    await createLoop(f, body('escalate'));
    const run = await startRun(f, 'budget-escalate');
    const p = await waitStatus(f, run.id, ['needs-approval']);
    expect(p.run.active_gate_id).to.equal('budget');
    expect(p.run.tokens_used).to.equal(1200);
    expect((await approve(run.id, 'budget', 'approve')).status).to.equal(200);
    const again = await waitStatus(f, run.id, ['needs-approval']);
    expect(again.run.budget_approval_seq).to.equal(1);
    expect(again.run.tokens_used).to.equal(2000);
    expect((await approve(run.id, 'budget', 'reject')).status).to.equal(200);
    expect((await waitStatus(f, run.id, ['blocked'])).run.status_cause).to.equal('budget');
  });

  it('the wall-clock budget leaves out the wait for an approval: approving grants a whole budget, spent on the next generation', async () => {
    await createLoop(f, loopDef('wall', [{ id: 'work', kind: 'test__sleep', params: { ms: 1200 } }], {
      contract: { stop_when: '{{ .nodes.never.output }}', iteration_cap: 50, budget: { wall_clock_sec: 1, on_exceeded: 'escalate' } },
    }));
    const run = await startRun(f, 'wall');
    const parked = await waitStatus(f, run.id, ['needs-approval']);
    expect(parked.run.active_gate_id).to.equal('budget');
    expect(parked.generations).to.have.length(1);
    // NOTE: the person takes longer than the budget granted; a wait counted against it would re-park the run at once.
    await new Promise((r) => setTimeout(r, 2500));
    expect((await approve(run.id, 'budget', 'approve')).status).to.equal(200);
    const again = await eventually(async () => {
      const d = await detail(f, run.id);
      expect(d.run.status).to.equal('needs-approval');
      expect(d.run.budget_approval_seq).to.equal(1);
      return d;
    }, 20_000, 25);
    expect(again.run.active_gate_id).to.equal('budget');
    expect(nodeStates(again)).to.include({ 'work@1': 'succeeded', 'work@2': 'succeeded' });
    expect((await approve(run.id, 'budget', 'reject')).status).to.equal(200);
    expect((await waitStatus(f, run.id, ['blocked'])).run.status_cause).to.equal('budget');
  });

  it('the wall-clock budget leaves out a pause: a run resumed after a pause longer than its budget runs its next generation', async () => {
    await createLoop(f, loopDef('wallpause', [{ id: 'work', kind: 'test__sleep', params: { ms: 600 } }], {
      contract: { stop_when: '{{ .nodes.never.output }}', iteration_cap: 50, budget: { wall_clock_sec: 1, on_exceeded: 'halt' } },
    }));
    const run = await startRun(f, 'wallpause');
    expect((await f.api.post(`${runs()}/${run.id}/pause`, {})).status).to.equal(200);
    const paused = await waitStatus(f, run.id, ['paused']);
    expect(paused.generations).to.have.length(1);
    // NOTE: paused longer than the whole budget; counted, the resume would end the run before its next generation.
    await new Promise((r) => setTimeout(r, 1500));
    expect((await f.api.post(`${runs()}/${run.id}/resume`, {})).status).to.equal(200);
    const ended = await waitStatus(f, run.id, ['exhausted']);
    expect(ended.run.status_cause).to.equal('budget');
    expect(nodeStates(ended)).to.include({ 'work@1': 'succeeded', 'work@2': 'succeeded' });
  });

  it('iteration_cap ends a loop that never meets stop_when exhausted; an unchanging output stalls it (no_progress)', async () => {
    await createLoop(f, loopDef('capped', [t('step', [], '{{ .run.generation }}')], { contract: { stop_when: '{{ .nodes.step.output.done }}', iteration_cap: 3 } }));
    const c = await waitStatus(f, (await startRun(f, 'capped')).id, ['exhausted']);
    expect(c.run.status_cause).to.equal('iteration_cap');
    expect(c.generations.map((g: any) => g.generation)).to.deep.equal([1, 2, 3]);

    await createLoop(f, loopDef('stuck', [t('step', [], 'same')], { contract: { stop_when: '{{ .nodes.step.output.done }}', iteration_cap: 10, no_progress: { window: 2 } } }));
    const s = await waitStatus(f, (await startRun(f, 'stuck')).id, ['stalled']);
    expect(s.run.status_cause).to.equal('no_progress');
    expect(s.generations).to.have.length(3);
  });

  it('pause waits for the generation boundary; resume runs the next generation; stop ends a live run failed and a second stop is 409', async () => {
    await createLoop(f, loopDef('slow', [{ id: 'nap', kind: 'test__sleep', params: { ms: 300 } }], { contract: { stop_when: '{{ .nodes.never.output }}', iteration_cap: 3 } }));
    const run = await startRun(f, 'slow');
    expect((await f.api.post(`${runs()}/${run.id}/pause`, {})).body).to.deep.equal({ ok: true });
    expect((await detail(f, run.id)).run.status).to.equal('running');
    const p = await waitStatus(f, run.id, ['paused']);
    expect(p.run.generation).to.equal(1);
    expect(p.run.status_cause).to.equal('pause_boundary');
    expect(nodeStates(p)).to.deep.equal({ 'nap@1': 'succeeded' });
    expect((await f.api.post(`${runs()}/${run.id}/pause`, {})).status).to.equal(409);
    expect((await f.api.post(`${runs()}/${run.id}/resume`, {})).status).to.equal(200);
    await eventually(async () => expect((await detail(f, run.id)).run.generation).to.equal(2));
    expect((await f.api.post(`${runs()}/${run.id}/stop`, {})).status).to.equal(200);
    const s = await detail(f, run.id);
    expect(s.run.status).to.equal('failed');
    expect(s.run.status_cause).to.equal('operator_stop');
    expect((await f.api.post(`${runs()}/${run.id}/stop`, {})).status).to.equal(409);
    expect((await detail(f, run.id)).run.status_cause).to.equal('operator_stop');
  });

  it('stop ends the node executions still in flight or waiting (failed, naming the stop): none stays running or waiting', async () => {
    await createLoop(f, loopDef('inflight', [{ id: 'nap', kind: 'test__sleep', params: { ms: 20_000 } }, human('ask', []), t('after', ['nap'])]));
    const run = await startRun(f, 'inflight');
    await eventually(async () => expect(nodeStates(await detail(f, run.id))).to.include({ 'nap@1': 'running', 'ask@1': 'waiting' }));
    // Stop and resume take no body: a stray field (a reason, a typo) is refused and stops nothing. Pause takes a
    // free-form object (the contract's), read as no request: this run is not running, so it is 409.
    for (const c of ['stop', 'resume']) {
      const bad = await f.api.post(`${runs()}/${run.id}/${c}`, { reason: 'x' });
      expect(bad.status, c).to.equal(400);
      expect(bad.body.diagnostic.code, c).to.equal('body_not_allowed');
    }
    const pause = await f.api.post(`${runs()}/${run.id}/pause`, { reason: 'x' });
    expect([pause.status, pause.body.diagnostic.code]).to.deep.equal([409, 'run_not_running']);
    const still = await detail(f, run.id);
    expect([still.run.status, still.run.pause_requested]).to.deep.equal(['needs-approval', false]);
    expect((await f.api.post(`${runs()}/${run.id}/stop`, {})).status).to.equal(200);
    const d = await detail(f, run.id);
    expect(d.run.status).to.equal('failed');
    const states = nodeStates(d);
    expect(Object.values(states).filter((s) => !['succeeded', 'failed', 'skipped'].includes(s)), JSON.stringify(states)).to.deep.equal([]);
    expect(states).to.include({ 'nap@1': 'failed', 'ask@1': 'failed' });
    const nap = d.generations[0].outputs.find((o: any) => o.node_id === 'nap');
    expect(nap.error).to.match(/run ended failed.*operator_stop/);
    // NOTE: the interrupted attempt's own end (aborted) must not overwrite what the stop recorded.
    await new Promise((r) => setTimeout(r, 300));
    expect(nodeStates(await detail(f, run.id))).to.deep.equal(states);
    const turns = (await f.api.get(`${runs()}/${run.id}/turns`)).body.turns;
    expect(turns.every((x: any) => x.ended_at), JSON.stringify(turns)).to.equal(true);
  });

  it('concurrency serial queues a start while a run is live and starts it when that run ends, even when the end\'s follow-up was lost (the watchdog promotes)', async () => {
    await createLoop(f, loopDef('one_at_a_time', [{ id: 'nap', kind: 'test__sleep', params: { ms: 20_000 } }], { concurrency: 'serial' }));
    const a = await startRun(f, 'one_at_a_time');
    const b = await startRun(f, 'one_at_a_time');
    expect(b.status).to.equal('queued');
    expect((await f.api.post(`${runs()}/${a.id}/stop`, {})).status).to.equal(200);
    await waitStatus(f, b.id, ['running']);
    const c = await startRun(f, 'one_at_a_time');
    expect(c.status).to.equal('queued');
    // A process that dies right after ending b's run never promotes c: end b the way that step does, without it.
    const res = await f.service.loops!.store.step(b.id, { expect: { status: ['running'] }, transition: { to: 'failed', cause: 'operator_stop', reason: 'test' } });
    expect(res.kind).to.equal('ok');
    const promoted = await waitStatus(f, c.id, ['running'], 10_000);
    expect(promoted.run.status_cause).to.equal('promote');
    expect((await f.api.post(`${runs()}/${c.id}/stop`, {})).status).to.equal(200);
  });

  it('the event stream has every sequence once, resumes after max(Last-Event-ID, after_sequence) with no gap or duplicate, and ends after the terminal status_changed', async () => {
    await createLoop(f, loopDef('events', [t('a', []), t('b', ['a']), t('c', ['b'])]));
    const run = await startRun(f, 'events');
    const live = eventsOf(f, run.id);
    await waitStatus(f, run.id, ['done']);
    const all = await live;
    expect(all.map((e) => e.seq)).to.deep.equal(all.map((_, i) => i + 1));
    expect(all.at(-1)).to.deep.include({ kind: 'status_changed' });
    expect(all.at(-1).payload).to.deep.include({ status: 'done', cause: 'contract' });
    expect(all.map((e) => e.kind)).to.include.members(['status_changed', 'generation_started', 'node_running', 'node_succeeded']);
    const res = await fetch(`${f.service.url}${runs()}/${run.id}/events?after_sequence=3`, { headers: { 'Last-Event-ID': '5' } });
    const text = await res.text();
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(ids).to.deep.equal(all.filter((e) => e.seq > 5).map((e) => e.seq));
    expect((await fetch(`${f.service.url}${runs()}/${run.id}/events?after_sequence=x`)).status).to.equal(400);
    // A client that reconnects after the last event of an ended run (EventSource does) gets an empty stream that
    // ends, not one that stays open for ever.
    for (const after of [all.at(-1).seq, all.at(-1).seq + 10]) {
      const again = await fetch(`${f.service.url}${runs()}/${run.id}/events`, { headers: { 'Last-Event-ID': String(after) }, signal: AbortSignal.timeout(5_000) });
      expect([...(await again.text()).matchAll(/^id: /gm)], String(after)).to.have.length(0);
    }
  });

  it('publishes loop.run.* on the event bus (started, status_changed with its cause, needs_approval, completed), naming the run', async () => {
    await createLoop(f, loopDef('announced', [human('g', [])]));
    const run = await startRun(f, 'announced');
    await waitStatus(f, run.id, ['needs-approval']);
    await approve(run.id, 'g', 'approve');
    await waitStatus(f, run.id, ['done']);
    const evs = await eventually(async () => {
      const all = (await f.service.bus!.range('', 10_000)).filter((e) => e.type.startsWith('loop.run.') && e.data.loop_run_id === run.id);
      expect(all.map((e) => e.type)).to.include('loop.run.completed');
      return all;
    });
    expect(evs.map((e) => e.type)).to.deep.equal([
      'loop.run.started', 'loop.run.status_changed', 'loop.run.status_changed', 'loop.run.needs_approval', 'loop.run.status_changed', 'loop.run.status_changed', 'loop.run.completed',
    ]);
    expect(evs.filter((e) => e.type === 'loop.run.status_changed').map((e) => [e.data.status, e.data.cause])).to.deep.equal([['running', 'start'], ['needs-approval', 'approval'], ['running', 'approval'], ['done', 'contract']]);
    expect(evs.every((e) => e.workspace_id === f.ws.id && e.data.loop_name === 'announced')).to.equal(true);
    expect(evs.at(-1)!.outcome).to.equal('success');
  });

  it('lists runs with aggregates and every filter', async () => {
    await createLoop(f, loopDef('one', [t('a', [])]));
    await createLoop(f, loopDef('gated', [human('g', [])]));
    const done = await startRun(f, 'one');
    await waitStatus(f, done.id, ['done']);
    const parked = await startRun(f, 'gated');
    await waitStatus(f, parked.id, ['needs-approval']);
    const all = (await f.api.get(runs())).body;
    expect(all.aggregates).to.deep.equal({ failed: 0, live: 1, succeeded: 1, terminal: 1, total: 2 });
    expect((await f.api.get(`${runs()}?loop=one`)).body.runs.map((r: any) => r.id)).to.deep.equal([done.id]);
    expect((await f.api.get(`${runs()}?live=true`)).body.runs.map((r: any) => r.id)).to.deep.equal([parked.id]);
    expect((await f.api.get(`${runs()}?status=done`)).body.aggregates.total).to.equal(1);
    expect((await f.api.get(`${runs()}?origin=catalog&limit=1`)).body.runs).to.have.length(1);
    expect((await f.api.get(`${runs()}?origin_session=s1`)).body.aggregates.total).to.equal(0);
    expect((await f.api.get(`${runs()}?live=`)).status).to.equal(400);
    expect((await f.api.get(`${runs()}?status=bogus`)).status).to.equal(422);
  });
});
