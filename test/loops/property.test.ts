import { expect } from 'chai';
import fc from 'fast-check';
import { compileGraph } from '../../codecs/loop-graph.ts';
import { lintLoop } from '../../codecs/loop-lint.ts';
import { fieldOf, outcomeStep, plan, type NodeRecord, type RunView, type Snapshot, type Step } from '../../runtime/loops/planner.ts';
import { effectiveConfig } from '../../runtime/loops/records.ts';
import { canTransition, isTerminal, type LoopDefinition, type LoopNode, type LoopRunStatus, type NodeOutcome } from '../../runtime/loops/types.ts';

/**
 * The planner's invariant, over random DAGs with random joins, branch routes, fan-outs and node failures: a run
 * driven by the pure planner (as the engine drives it, minus Redis) always ends in a terminal status or waits
 * visibly (a parked gate), never live with nothing in flight; and it never fails with no_ready_nodes, the planner's
 * own safety net, which would mean a join waited for a node that will not run.
 */

interface Shape { nodes: LoopNode[]; edges: { from: string; to: string; when?: string }[]; outcomes: number[] }

const shapeArb = fc.integer({ min: 1, max: 10 }).chain((n) => fc.record({
  kinds: fc.array(fc.constantFrom('transform', 'transform', 'branch', 'fan-out', 'gate'), { minLength: n, maxLength: n }),
  joins: fc.array(fc.constantFrom(undefined, 'wait_all', 'fail_fast', 'best_effort'), { minLength: n, maxLength: n }),
  deps: fc.array(fc.array(fc.integer({ min: 0, max: 9 }), { maxLength: 3 }), { minLength: n, maxLength: n }),
  whens: fc.array(fc.constantFrom(undefined, 'a', 'b'), { minLength: n * 3, maxLength: n * 3 }),
  outcomes: fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 64, maxLength: 64 }),
  generations: fc.integer({ min: 1, max: 3 }),
})).map((r) => {
  const ids = r.kinds.map((_, i) => `n${i}`);
  const nodes: LoopNode[] = r.kinds.map((kind, i) => ({
    id: ids[i], kind, ...(r.joins[i] ? { join: r.joins[i] } : {}),
    ...(kind === 'branch' ? { condition: '{{ .nodes.missing.output }}' } : {}),
    ...(kind === 'fan-out' ? { params: { items: [1, 2, 3] } } : {}),
    ...(kind === 'gate' ? { criteria: [{ type: 'human' }] } : {}),
  }));
  const edges: Shape['edges'] = [];
  r.deps.forEach((ds, i) => ds.filter((d) => d < i).forEach((d, j) => {
    const when = r.kinds[d] === 'branch' ? r.whens[i * 3 + j] : undefined;
    if (!edges.some((e) => e.from === ids[d] && e.to === ids[i])) edges.push({ from: ids[d], to: ids[i], ...(when ? { when } : {}) });
  }));
  // a collect after each fan-out whose items something maps over, so the fan-out scopes close
  return { nodes, edges, outcomes: r.outcomes, generations: r.generations };
});

function apply(s: Snapshot, step: Step, hash: Record<string, string>): void {
  for (const [f, w] of step.writes) s.nodes.set(f, w.rec);
  Object.assign(hash, step.set);
  for (const [k, v] of Object.entries(step.incr)) hash[k] = String(Number(hash[k] ?? 0) + v);
  if (step.transition) {
    expect(canTransition(s.run.status as LoopRunStatus, step.transition.to as LoopRunStatus, step.transition.cause), `${s.run.status} → ${step.transition.to}`).to.equal(true);
    hash.status = step.transition.to;
    hash.cause = step.transition.cause;
    hash.reason = step.transition.reason ?? '';
  }
  s.run = viewOf(hash, s.run);
}

function viewOf(h: Record<string, string>, prev: RunView): RunView {
  return {
    ...prev, status: h.status, generation: Number(h.generation), pause_requested: h.pause_requested === '1', active_gate_id: h.active_gate_id ?? '',
    tokens_used: Number(h.tokens_used ?? 0), consecutive_failures: Number(h.consecutive_failures ?? 0), next_generation_requested: Number(h.next_generation_requested ?? 0),
    progress_generation: Number(h.progress_generation ?? 0), progress_hash: h.progress_hash ?? '', no_progress_count: Number(h.no_progress_count ?? 0),
    boundary: h.boundary ? JSON.parse(h.boundary) : undefined,
  };
}

describe('Loop planner: property over random DAGs', () => {
  it('every run reaches a terminal status or a visible wait, never live and idle, and never no_ready_nodes', () => {
    fc.assert(fc.property(shapeArb, (shape) => {
      const def: LoopDefinition = { meta: { name: 'p' }, graph: { nodes: shape.nodes, edges: shape.edges }, contract: { iteration_cap: 3, stop_when: shape.generations > 1 ? '{{ .nodes.missing.output }}' : undefined } };
      // random graphs the lint refuses (a nested fan-out, a mapped node mixing scopes) are not runs
      if (lintLoop(def).some((i) => i.severity === 'error')) return;
      const hash: Record<string, string> = { status: 'running', generation: '1', pause_requested: '0', tokens_used: '0', consecutive_failures: '0' };
      const run: RunView = {
        id: 'r', workspace_id: 'w', loop_name: 'p', status: 'running', generation: 1, pause_requested: false, active_gate_id: '', tokens_used: 0,
        consecutive_failures: 0, budget_approval_seq: 0, started_ms: 0, waited_ms: 0, config: effectiveConfig(def), inputs: {}, next_generation_requested: 0,
        progress_generation: 0, progress_hash: '', no_progress_count: 0, boundary: undefined,
      };
      const s: Snapshot = { run, def, graph: compileGraph(def), nodes: new Map(), now: 0 };
      let k = 0;
      for (let steps = 0; steps < 2000; steps++) {
        const p = plan(s);
        apply(s, p, hash);
        if (isTerminal(s.run.status)) {
          expect(hash.cause, hash.reason).to.not.equal("no_ready_nodes");
          return;
        }
        if (s.run.status === 'needs-approval') {
          // a visible wait: a gate waits on a person; approve it and go on
          const gate = [...s.nodes.values()].find((r) => r.state === 'waiting' && r.wait?.kind === 'approval');
          expect(gate, 'needs-approval names a waiting gate').to.not.equal(undefined);
          s.nodes.set(fieldOf(gate!.generation, gate!.node_id, gate!.item_index), { ...gate!, v: gate!.v + 1, state: 'succeeded', wait: undefined, route: 'pass' });
          hash.status = 'running';
          s.run = viewOf(hash, s.run);
          continue;
        }
        const inFlight = [...s.nodes.values()].filter((r) => r.generation === s.run.generation && (r.state === 'queued' || r.state === 'running'));
        if (!inFlight.length) {
          // live with nothing queued or running: only a parked gate may explain it, and plan() would have parked the run
          expect(p.transition || p.writes.size, `live and idle: ${JSON.stringify([...s.nodes.values()].map((r) => [r.node_id, r.item_index, r.state]))}`).to.be.ok;
          continue;
        }
        const r = inFlight[0];
        const f = fieldOf(r.generation, r.node_id, r.item_index);
        const running: NodeRecord = { ...r, v: r.v + 1, state: 'running' };
        s.nodes.set(f, running);
        const node = s.graph.nodes.get(r.node_id)!;
        const roll = shape.outcomes[k++ % shape.outcomes.length];
        let out: NodeOutcome;
        if (node.kind === 'gate') out = { outcome: 'succeeded', verdict: { outcome: roll < 3 ? 'awaiting_approval' : roll < 5 ? 'rejected' : 'approved' } };
        else if (node.kind === 'branch') out = { outcome: 'succeeded', route: roll < 5 ? 'a' : 'b' };
        else if (node.kind === 'fan-out') out = roll < 1 ? { outcome: 'failed', error: 'x' } : { outcome: 'succeeded', items: Array.from({ length: roll % 4 }, (_, i) => i) };
        else out = roll < 2 ? { outcome: 'failed', error: 'boom' } : { outcome: 'succeeded', output: roll };
        const o = outcomeStep(s, { runId: 'r', generation: r.generation, nodeId: r.node_id, itemIndex: r.item_index }, r.attempt, out);
        expect(o, 'the running attempt accepts its outcome').to.not.equal(undefined);
        apply(s, o!, hash);
        if (isTerminal(s.run.status)) return;
      }
      expect.fail('the run did not end within 2000 steps');
    }), { numRuns: 300 });
  });
});
