import { createHash } from 'node:crypto';
import { parseDuration } from '../../codecs/duration.ts';
import { BUDGET_GATE, DOD_NODE, type CompiledGraph } from '../../codecs/loop-graph.ts';
import { renderValue } from './template.ts';
import {
  LOOP_LIMITS, type ApprovalDecision, type EffectiveConfig, type GateVerdict, type LoopDefinition, type LoopNode, type NodeKey,
  type NodeOutcome, type NodeState, type NodeWait, type RouteAction, type TransitionCause, type UpstreamResult,
} from './types.ts';

// ---------------------------------------------------------------------------------------------------------------
// Records

/** NodeRecord is the stored state of one node execution (a generation, node and item), versioned for CAS. */
export interface NodeRecord {
  /** The record's version: every write expects the one it read (store/scripts/loop-step-4.lua). */
  v: number;
  generation: number;
  node_id: string;
  item_index: number;
  state: NodeState;
  attempt: number;
  revision: number;
  output?: unknown;
  error?: string;
  /** Why a node ended without running (branch_not_taken, upstream_failed, upstream_skipped, no_items, …). */
  cause?: string;
  route?: string;
  /** fan-out: the items. */
  items?: unknown[];
  verdict?: GateVerdict;
  wait?: NodeWait;
  child_loop_run_id?: string;
  feedback?: unknown;
  tokens: number;
  /** Epoch ms before which a retry must not start (backoff). */
  not_before?: number;
  queued_at?: string;
  started_at?: string;
  ended_at?: string;
  /** Copied from an earlier generation by a failed_only reattempt. */
  reused_from?: number;
  /** A non-gate node an operator approved (a tool call that needed approval): the input digest approved. */
  approved_digest?: string;
}

export const fieldOf = (generation: number, nodeId: string, itemIndex: number) => `${generation}:${nodeId}:${itemIndex}`;
export const keyField = (k: NodeKey) => fieldOf(k.generation, k.nodeId, k.itemIndex);
const TERMINAL_NODE: readonly NodeState[] = ['succeeded', 'failed', 'skipped'];
export const isNodeTerminal = (s: NodeState | undefined) => s !== undefined && TERMINAL_NODE.includes(s);
const IN_FLIGHT: readonly NodeState[] = ['queued', 'running', 'waiting'];

/** serializeRecord writes a record with its version first, which the step script reads without decoding. */
export function serializeRecord(r: NodeRecord): string {
  const { v, ...rest } = r;
  return JSON.stringify({ v, ...rest });
}

/** gateIdOf names a gate execution: the node id, with `[item]` for a gate inside a fan-out. */
export const gateIdOf = (nodeId: string, itemIndex: number) => (itemIndex >= 0 ? `${nodeId}[${itemIndex}]` : nodeId);
/** parseGateId is the inverse of gateIdOf. */
export function parseGateId(id: string): { nodeId: string; itemIndex: number } {
  const m = /^(.*)\[(\d+)\]$/.exec(id);
  return m ? { nodeId: m[1], itemIndex: Number(m[2]) } : { nodeId: id, itemIndex: -1 };
}

// ---------------------------------------------------------------------------------------------------------------
// The run as the planner sees it

/** RunView is the part of a run the planner decides on (parsed from the run's hash). */
export interface RunView {
  id: string;
  workspace_id: string;
  loop_name: string;
  status: string;
  generation: number;
  pause_requested: boolean;
  active_gate_id: string;
  tokens_used: number;
  consecutive_failures: number;
  budget_approval_seq: number;
  started_ms: number;
  /** Time spent waiting for a person (needs-approval, paused), left out of the wall-clock budget. */
  waited_ms: number;
  config: EffectiveConfig;
  inputs: Record<string, unknown>;
  /** The generation a gate asked to end with a next one (route next_generation), or 0. */
  next_generation_requested: number;
  /** No-progress bookkeeping: the last generation hashed, its hash, and how many generations in a row it repeated. */
  progress_generation: number;
  progress_hash: string;
  no_progress_count: number;
  /** A generation end decided but held by a pause: `{generation, reattempt}`; resume starts the next one. */
  boundary: { generation: number; reattempt: boolean } | undefined;
}

/** Snapshot is everything one planning pass reads. `children` holds the status of child runs waiting nodes name. */
export interface Snapshot {
  run: RunView;
  def: LoopDefinition;
  graph: CompiledGraph;
  nodes: Map<string, NodeRecord>;
  now: number;
  children?: Map<string, string>;
}

/** Step is what a pass decided, applied in one atomic step (LoopStore.step) expecting the state it read. */
export interface Step {
  writes: Map<string, { expectV: number; rec: NodeRecord }>;
  events: [string, Record<string, unknown>][];
  transition?: { to: string; cause: TransitionCause; reason?: string };
  set: Record<string, string>;
  incr: Record<string, number>;
  /** Node executions that need a BullMQ job (state queued), with the earliest start. */
  enqueue: NodeRecord[];
}

const newStep = (): Step => ({ writes: new Map(), events: [], set: {}, incr: {}, enqueue: [] });

/** Overlay reads node records through a step's pending writes, so one pass sees its own decisions. */
class Overlay {
  constructor(private readonly s: Snapshot, private readonly step: Step) {}
  get(field: string): NodeRecord | undefined {
    return this.step.writes.get(field)?.rec ?? this.s.nodes.get(field);
  }
  put(rec: NodeRecord, event?: [string, Record<string, unknown>]): void {
    const field = fieldOf(rec.generation, rec.node_id, rec.item_index);
    const prev = this.step.writes.get(field);
    const base = prev ? prev.expectV : (this.s.nodes.get(field)?.v ?? 0);
    const next = { ...rec, v: base + 1 };
    this.step.writes.set(field, { expectV: base, rec: next });
    if (event) this.step.events.push(event);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Upstream views and joins

/** View is a node execution's state as a downstream node sees it. */
interface View { state: NodeState | 'pending'; output?: unknown; route?: string; error?: string; node: string }

/** executions lists the item indexes a node runs at in a generation, or undefined while its fan-out is not over. */
export function executions(s: Snapshot, read: (f: string) => NodeRecord | undefined, gen: number, id: string): number[] | undefined {
  const f = s.graph.scope.get(id);
  if (f === undefined) return [-1];
  const fr = read(fieldOf(gen, f, -1));
  if (!fr || !isNodeTerminal(fr.state)) return undefined;
  if (fr.state !== 'succeeded') return [-1];
  return Array.from({ length: fr.items?.length ?? 0 }, (_, i) => i);
}

function recView(r: NodeRecord | undefined, node: string): View {
  if (!r) return { state: 'pending', node };
  return { state: r.state, output: r.output, route: r.route, error: r.error, node };
}

/** upstreamView is upstream `u` as execution (n, i) sees it: the same item, the single execution, or a collect's list. */
function upstreamView(s: Snapshot, read: (f: string) => NodeRecord | undefined, gen: number, n: string, i: number, u: string): View {
  const g = s.graph;
  const fanOfN = g.scope.get(n);
  const uNode = g.nodes.get(u)!;
  if (fanOfN !== undefined && i >= 0) {
    if (u === fanOfN) {
      const fr = read(fieldOf(gen, u, -1))!;
      return { state: 'succeeded', output: fr.items?.[i], node: u };
    }
    if (g.scope.get(u) === fanOfN) return recView(read(fieldOf(gen, u, i)), u);
    return recView(read(fieldOf(gen, u, -1)), u);
  }
  if (g.nodes.get(n)!.kind === 'collect') {
    if (uNode.kind === 'fan-out') {
      const fr = read(fieldOf(gen, u, -1));
      return fr?.state === 'succeeded' ? { state: 'succeeded', output: fr.items ?? [], node: u } : recView(fr, u);
    }
    if (g.scope.get(u) !== undefined) {
      const items = executions(s, read, gen, u);
      if (!items) return { state: 'pending', node: u };
      if (items.length === 1 && items[0] === -1) return recView(read(fieldOf(gen, u, -1)), u);
      const recs = items.map((x) => read(fieldOf(gen, u, x)));
      if (recs.some((r) => !r || !isNodeTerminal(r.state))) return { state: 'pending', node: u };
      const states = recs.map((r) => r!.state);
      const state: NodeState = states.length && states.every((x) => x === 'skipped') ? 'skipped' : states.includes('failed') ? 'failed' : 'succeeded';
      const failed = recs.find((r) => r!.state === 'failed');
      return { state, output: recs.map((r) => (r!.state === 'succeeded' ? (r!.output ?? null) : null)), error: failed ? `item ${failed.item_index}: ${failed.error ?? 'failed'}` : undefined, node: u };
    }
  }
  return recView(read(fieldOf(gen, u, -1)), u);
}

/** edgeTaken applies an edge's `when` to a succeeded branch or gate upstream: a route not taken reads as skipped. */
function withEdge(s: Snapshot, v: View, from: string, to: string): View {
  const e = s.graph.edges.get(`${from}>${to}`);
  if (v.state !== 'succeeded' || e?.when === undefined) return v;
  return e.when === (v.route ?? '') ? v : { ...v, state: 'skipped', error: undefined, route: `not taken (${e.when} ≠ ${v.route ?? ''})` };
}

/** upstreamViews lists what every upstream of (n, i) is, edges applied. */
function upstreamViews(s: Snapshot, read: (f: string) => NodeRecord | undefined, gen: number, n: string, i: number): View[] {
  return s.graph.upstream.get(n)!.map((u) => withEdge(s, upstreamView(s, read, gen, n, i, u), u, n));
}

/** JoinDecision is what a join rule makes of its upstreams: not yet, run, skip or fail. */
export type JoinDecision = { kind: 'wait'; on: string[] } | { kind: 'ready' } | { kind: 'skip'; cause: string } | { kind: 'fail'; cause: string; error: string };

/**
 * decideJoin applies a join rule (types.ts JoinRule) to the upstream views. NOTE: skipped is an outcome, so a join
 * never waits for a node that will not run: every upstream ends succeeded, failed or skipped.
 */
export function decideJoin(rule: string, views: { state: string; node: string; error?: string }[]): JoinDecision {
  if (!views.length) return { kind: 'ready' };
  const waiting = views.filter((v) => !isNodeTerminal(v.state as NodeState)).map((v) => v.node);
  const failed = views.filter((v) => v.state === 'failed');
  const allSkipped = views.every((v) => v.state === 'skipped');
  const fail = (): JoinDecision => ({ kind: 'fail', cause: 'upstream_failed', error: `upstream ${failed.map((f) => f.node).join(', ')} failed` });
  if (rule === 'fail_fast' && failed.length) return fail();
  if (waiting.length) return { kind: 'wait', on: waiting };
  if (rule !== 'best_effort' && failed.length) return fail();
  if (allSkipped) return { kind: 'skip', cause: 'upstream_skipped' };
  return { kind: 'ready' };
}

// ---------------------------------------------------------------------------------------------------------------
// Template scope and node context

/** scopeOf is the template scope of execution (n, i): inputs, upstream outputs, the item, the run, the previous generation. */
export function scopeOf(s: Snapshot, n: string, i: number, gen = s.run.generation): Record<string, unknown> {
  const read = (f: string) => s.nodes.get(f);
  const nodes: Record<string, unknown> = {};
  for (const [id] of s.graph.nodes) {
    const r = read(fieldOf(gen, id, -1));
    if (r && isNodeTerminal(r.state)) nodes[id] = { output: r.output ?? null, outcome: r.state, route: r.route ?? '' };
  }
  for (const u of s.graph.upstream.get(n) ?? []) {
    const v = upstreamView(s, read, gen, n, i, u);
    nodes[u] = { output: v.output ?? null, outcome: v.state, route: v.route ?? '' };
  }
  const previous: Record<string, unknown> = {};
  if (gen > 1) for (const [id] of s.graph.nodes) {
    const r = read(fieldOf(gen - 1, id, i >= 0 && s.graph.scope.get(id) !== undefined ? i : -1));
    if (r) previous[id] = { output: r.output ?? null, outcome: r.state };
  }
  const fan = s.graph.scope.get(n);
  const item = fan !== undefined && i >= 0 ? read(fieldOf(gen, fan, -1))?.items?.[i] : undefined;
  return {
    inputs: s.run.inputs, nodes, previous, item: item ?? null, item_index: i,
    run: { id: s.run.id, generation: gen, loop_name: s.run.loop_name, workspace_id: s.run.workspace_id, tokens_used: s.run.tokens_used },
  };
}

/** upstreamResults is the executor's view of every upstream of (n, i). */
export function upstreamResults(s: Snapshot, n: string, i: number, gen: number): Record<string, UpstreamResult> {
  const read = (f: string) => s.nodes.get(f);
  const out: Record<string, UpstreamResult> = {};
  for (const u of s.graph.upstream.get(n) ?? []) {
    const v = withEdge(s, upstreamView(s, read, gen, n, i, u), u, n);
    out[u] = { outcome: v.state === 'pending' ? 'skipped' : (v.state as UpstreamResult['outcome']), output: v.output, error: v.error };
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Planning

const truthy = (v: unknown) => !(v === undefined || v === null || v === false || v === 0 || v === '' || (typeof v === 'string' && ['false', '0', 'no'].includes(v.trim().toLowerCase())));

/**
 * plan decides one pass over a run: the nodes that become ready (queued), skipped or failed by their joins, and
 * what the run does at the end of a generation (done, next generation, pause, a guard's terminal status). Its
 * invariant (the property test checks it): a running run leaves the pass with a node in flight, a visible wait, or
 * a new status; when none of those can be found, it fails with `no_ready_nodes` naming what waits on what.
 */
export function plan(s: Snapshot): Step {
  const step = newStep();
  const o = new Overlay(s, step);
  const { run } = s;
  // NOTE: nodes queued before a pause or a parked gate still get their job; nothing new is scheduled until running.
  const requeue = () => {
    for (const [, r] of s.nodes) if (r.generation === run.generation && r.state === 'queued' && !step.writes.has(fieldOf(r.generation, r.node_id, r.item_index))) step.enqueue.push(r);
  };
  if (run.status !== 'running') { requeue(); return step; }

  if (budgetCheck(s, step)) return step;

  // A run parks on the first gate that waits for a person.
  const parked = [...s.nodes.values()].find((r) => r.generation === run.generation && r.state === 'waiting' && r.wait?.kind === 'approval');
  if (parked) {
    const gate = gateIdOf(parked.node_id, parked.item_index);
    step.transition = { to: 'needs-approval', cause: 'approval', reason: `gate ${gate} waits for approval` };
    step.set.active_gate_id = gate;
    step.events.push(['needs_approval', { gate_id: gate, generation: run.generation, reason: parked.verdict?.reason ?? '' }]);
    requeue();
    return step;
  }

  // Child loops that ended while nobody was listening (a crash between the child's end and the parent's update).
  for (const r of s.nodes.values()) {
    if (r.generation !== run.generation || r.state !== 'waiting' || r.wait?.kind !== 'child_loop') continue;
    const st = s.children?.get(r.wait.ref);
    if (st && isRunTerminal(st)) o.put(childOutcome(r, st, s.now), childEvent(r, st));
  }

  if (run.boundary && run.boundary.generation === run.generation) {
    startGeneration(s, step, o, run.boundary.reattempt);
    return step;
  }
  evaluate(s, step, o, run.generation);
  if (generationComplete(s, o, run.generation)) return endGeneration(s, step, o);
  const inFlight = [...s.graph.order].some((id) => (executions(s, (f) => o.get(f), run.generation, id) ?? [-1]).some((i) => IN_FLIGHT.includes(o.get(fieldOf(run.generation, id, i))?.state as NodeState)));
  if (!inFlight) {
    step.transition = { to: 'failed', cause: 'no_ready_nodes', reason: `no node can run: ${waitingReport(s, o, run.generation)}` };
    step.writes.clear();
    step.enqueue.length = 0;
  }
  return step;
}

const isRunTerminal = (st: string) => ['done', 'no-op', 'blocked', 'failed', 'exhausted', 'stalled'].includes(st);

function childOutcome(r: NodeRecord, status: string, now: number): NodeRecord {
  const ok = status === 'done' || status === 'no-op';
  return { ...r, state: ok ? 'succeeded' : 'failed', wait: undefined, output: { child_loop_run_id: r.child_loop_run_id ?? r.wait?.ref, status }, error: ok ? undefined : `child loop run ${r.wait?.ref} ended ${status}`, ended_at: new Date(now).toISOString() };
}
function childEvent(r: NodeRecord, status: string): [string, Record<string, unknown>] {
  const ok = status === 'done' || status === 'no-op';
  return [ok ? 'node_succeeded' : 'node_failed', { generation: r.generation, node_id: r.node_id, item_index: r.item_index, attempt: r.attempt, child_loop_run_id: r.wait?.ref, child_status: status }];
}

/** childCompletion is the record write that ends a waiting run-loop node once its child run is terminal. */
export function childCompletion(r: NodeRecord, status: string, now: number): { rec: NodeRecord; event: [string, Record<string, unknown>] } {
  return { rec: { ...childOutcome(r, status, now), v: r.v + 1 }, event: childEvent(r, status) };
}

/** evaluate walks the generation's nodes in order and decides each pending execution by its join. */
function evaluate(s: Snapshot, step: Step, o: Overlay, gen: number): void {
  const read = (f: string) => o.get(f);
  const nowIso = new Date(s.now).toISOString();
  for (const id of s.graph.order) {
    const items = executions(s, read, gen, id);
    if (!items) continue;
    for (const i of items) {
      const f = fieldOf(gen, id, i);
      const cur = read(f);
      if (cur && cur.state !== 'pending') {
        if (cur.state === 'queued' && !step.writes.has(f)) step.enqueue.push(cur);
        continue;
      }
      const base: NodeRecord = cur ?? { v: 0, generation: gen, node_id: id, item_index: i, state: 'pending', attempt: 0, revision: 0, tokens: 0 };
      const d = decideJoin(s.graph.joinOf(id), upstreamViews(s, read, gen, id, i));
      const ev = { generation: gen, node_id: id, item_index: i };
      if (d.kind === 'ready') {
        const rec: NodeRecord = { ...base, state: 'queued', attempt: 1, queued_at: nowIso, error: undefined, cause: undefined };
        o.put(rec);
        step.enqueue.push(rec);
      } else if (d.kind === 'skip') {
        o.put({ ...base, state: 'skipped', cause: d.cause, ended_at: nowIso }, ['node_skipped', { ...ev, reason: d.cause }]);
      } else if (d.kind === 'fail') {
        o.put({ ...base, state: 'failed', cause: d.cause, error: d.error, ended_at: nowIso }, ['node_failed', { ...ev, attempt: 0, error: d.error, reason: d.cause }]);
      }
    }
    // NOTE: a mapped node whose fan-out had no items runs nowhere; downstream reads it as skipped (no_items).
  }
}

/** generationComplete: every node's executions are known and terminal. */
function generationComplete(s: Snapshot, o: Overlay, gen: number): boolean {
  const read = (f: string) => o.get(f);
  for (const id of s.graph.order) {
    const items = executions(s, read, gen, id);
    if (!items) return false;
    for (const i of items) if (!isNodeTerminal(read(fieldOf(gen, id, i))?.state)) return false;
  }
  return true;
}

/** waitingReport names every node that has not ended and what it waits on, for the no_ready_nodes cause. */
function waitingReport(s: Snapshot, o: Overlay, gen: number): string {
  const read = (f: string) => o.get(f);
  const parts: string[] = [];
  for (const id of s.graph.order) {
    const items = executions(s, read, gen, id);
    if (!items) { parts.push(`${id} waits on fan-out ${s.graph.scope.get(id)}`); continue; }
    for (const i of items) {
      const r = read(fieldOf(gen, id, i));
      if (isNodeTerminal(r?.state)) continue;
      const on = upstreamViews(s, read, gen, id, i).filter((v) => !isNodeTerminal(v.state as NodeState)).map((v) => v.node);
      parts.push(`${gateIdOf(id, i)} (${r?.state ?? 'pending'}) waits on ${on.length ? on.join(', ') : 'nothing'}`);
    }
  }
  return parts.join('; ').slice(0, 4000);
}

/** budgetCheck ends or parks a running run whose token or wall-clock budget is spent; true when it did. */
function budgetCheck(s: Snapshot, step: Step): boolean {
  const { run } = s;
  const c = run.config;
  const grants = 1 + run.budget_approval_seq;
  const tokens = c.budget_tokens > 0 && run.tokens_used >= c.budget_tokens * grants;
  const wall = c.budget_wall_sec > 0 && s.now - run.started_ms - run.waited_ms >= c.budget_wall_sec * 1000 * grants;
  if (!tokens && !wall) return false;
  const what = tokens ? `tokens_used ${run.tokens_used} reached the budget ${c.budget_tokens * grants}` : `wall clock reached ${c.budget_wall_sec * grants}s`;
  if (c.budget_on_exceeded === 'escalate') {
    step.transition = { to: 'needs-approval', cause: 'budget', reason: what };
    step.set.active_gate_id = BUDGET_GATE;
    step.events.push(['needs_approval', { gate_id: BUDGET_GATE, generation: run.generation, reason: what }]);
  } else {
    step.transition = { to: 'exhausted', cause: 'budget', reason: what };
  }
  return true;
}

/** endGeneration decides what a complete generation leads to: done, a guard's terminal status, a pause or the next one. */
function endGeneration(s: Snapshot, step: Step, o: Overlay): Step {
  const { run, graph } = s;
  const gen = run.generation;
  const read = (f: string) => o.get(f);
  const failedSinks: string[] = [];
  for (const id of graph.order) {
    if (graph.downstream.get(id)!.length) continue;
    for (const i of executions(s, read, gen, id) ?? []) if (read(fieldOf(gen, id, i))?.state === 'failed') failedSinks.push(gateIdOf(id, i));
  }
  let reattempt = false;
  if (failedSinks.length) {
    const cf = run.consecutive_failures + 1;
    step.set.consecutive_failures = String(cf);
    const errors = failedSinks.map((id) => { const p = parseGateId(id); return `${id}: ${read(fieldOf(gen, p.nodeId, p.itemIndex))?.error ?? 'failed'}`; }).join('; ').slice(0, 2000);
    if (cf >= LOOP_LIMITS.failureBreaker) {
      step.transition = { to: 'failed', cause: 'failure_breaker', reason: `${cf} consecutive generations failed (${errors})` };
      return step;
    }
    if (gen >= run.config.iteration_cap) {
      step.transition = { to: 'failed', cause: 'node_failed', reason: errors };
      return step;
    }
    reattempt = true;
  } else {
    if (run.consecutive_failures) step.set.consecutive_failures = '0';
    if (run.next_generation_requested !== gen) {
      const stopWhen = s.def.contract?.stop_when;
      const done = stopWhen ? truthy(renderValue(stopWhen, scopeOf(s, '', -1, gen))) : true;
      if (done) {
        step.transition = { to: 'done', cause: 'contract', reason: stopWhen ? `stop_when held after generation ${gen}` : `generation ${gen} finished` };
        return step;
      }
    }
    // No progress: the outputs the contract names (every node's when it names none) hashed per generation.
    const window = run.config.no_progress_window;
    if (window > 0 && run.progress_generation !== gen) {
      const fields = s.def.contract?.no_progress?.hash_fields?.length ? s.def.contract.no_progress.hash_fields : graph.order;
      const outputs = fields.map((id) => (executions(s, read, gen, id) ?? []).map((i) => read(fieldOf(gen, id, i))?.output ?? null));
      const hash = createHash('sha256').update(JSON.stringify(outputs)).digest('hex');
      const count = hash === run.progress_hash ? run.no_progress_count + 1 : 0;
      step.set.progress_generation = String(gen);
      step.set.progress_hash = hash;
      step.set.no_progress_count = String(count);
      if (count >= window) {
        step.transition = { to: 'stalled', cause: 'no_progress', reason: `the outputs did not change for ${count} generations (window ${window})` };
        return step;
      }
    }
  }
  if (gen >= run.config.iteration_cap) {
    step.transition = { to: 'exhausted', cause: 'iteration_cap', reason: `iteration_cap ${run.config.iteration_cap} reached` };
    return step;
  }
  if (run.pause_requested) {
    step.transition = { to: 'paused', cause: 'pause_boundary', reason: `paused after generation ${gen}` };
    step.set.pause_requested = '0';
    step.set.boundary = JSON.stringify({ generation: gen, reattempt });
    return step;
  }
  startGeneration(s, step, o, reattempt);
  return step;
}

/**
 * startGeneration moves the run to the next generation and plans its first nodes in the same step. A failed_only
 * reattempt keeps the nodes that succeeded (copied, not re-run); a full_body one, and every ordinary iteration,
 * runs everything again.
 */
function startGeneration(s: Snapshot, step: Step, o: Overlay, reattempt: boolean): void {
  const { run } = s;
  const next = run.generation + 1;
  step.set.generation = String(next);
  step.set.boundary = '';
  step.set.next_generation_requested = '0';
  step.events.push(['generation_started', { generation: next, reason: reattempt ? 'reattempt' : 'iteration' }]);
  if (reattempt && run.config.reattempt_strategy === 'failed_only') {
    for (const r of s.nodes.values()) {
      // NOTE: only unmapped nodes and whole fan-outs are kept: a mapped node's items depend on its fan-out's run.
      if (r.generation === run.generation && r.state === 'succeeded' && s.graph.scope.get(r.node_id) === undefined && r.node_id !== DOD_NODE) {
        o.put({ ...r, v: 0, generation: next, reused_from: run.generation });
      }
    }
  }
  const s2: Snapshot = { ...s, run: { ...run, generation: next } };
  evaluate(s2, step, o, next);
}

// ---------------------------------------------------------------------------------------------------------------
// Outcomes

/** retryOf is a node's retry policy resolved: extra attempts and the delay before each. */
export function retryOf(node: LoopNode): { max: number; backoffMs: number } {
  return { max: Math.min(node.retry?.max ?? 0, 10), backoffMs: node.retry?.backoff ? (parseDuration(node.retry.backoff) ?? 0) : 0 };
}

const ON_RESULT_OF: Record<string, string> = {
  approved: 'pass', rejected: 'fail', awaiting_approval: 'approval', blocked: 'blocked', error: 'error', timeout: 'timeout', invalid_output: 'invalid_output',
};

/**
 * gateAction maps a verdict to the route the gate takes: the node's `on_result` first, then the defaults:
 * pass continues, approval parks the run (escalate), blocked halts, a rejection revises while revisions remain
 * (then fixed_passes continues and revise_until_clean halts; the definition-of-done gate starts the next
 * generation), and error, timeout and invalid_output fail the gate (its retry policy applies).
 */
export function gateAction(node: LoopNode, verdict: GateVerdict, revision: number, maxRevisions: number): RouteAction | 'fail' {
  const key = ON_RESULT_OF[verdict.outcome] ?? 'error';
  const chosen = node.on_result?.[key] as RouteAction | undefined;
  if (chosen) return chosen === 'revise' && revision >= maxRevisions ? exhaustedRevisions(node) : chosen;
  switch (key) {
    case 'pass': return 'continue';
    case 'approval': return 'escalate';
    case 'blocked': return 'halt';
    case 'fail':
      if (node.placement === 'definition_of_done') return 'next_generation';
      return revision < maxRevisions ? 'revise' : exhaustedRevisions(node);
    default: return 'fail';
  }
}

const exhaustedRevisions = (node: LoopNode): RouteAction => ((node.verdict_policy ?? 'fixed_passes') === 'fixed_passes' ? 'continue' : 'halt');

/** maxRevisionsOf is a gate's revision limit: its own, else the run's gate_max_revisions. */
export const maxRevisionsOf = (node: LoopNode, config: EffectiveConfig) => Math.min(node.max_revisions ?? config.gate_max_revisions, LOOP_LIMITS.maxRevisions);

/**
 * reviseTargets are the executions a gate's revise runs again: its direct upstream nodes that are not sources (a
 * source reads the run's inputs, which a revision does not change), at the gate's item.
 */
function reviseTargets(s: Snapshot, gateNode: string, item: number): { id: string; item: number }[] {
  const out: { id: string; item: number }[] = [];
  for (const u of s.graph.upstream.get(gateNode) ?? []) {
    const un = s.graph.nodes.get(u)!;
    if (un.kind === 'input' || un.kind === 'fan-out') continue;
    out.push({ id: u, item: s.graph.scope.get(u) !== undefined && item >= 0 ? item : -1 });
  }
  return out;
}

/** applyRevise sends a gate back: its targets are queued again with revision+1 and the gate's findings; the gate waits on them. */
function applyRevise(s: Snapshot, step: Step, o: Overlay, gate: NodeRecord, verdict: GateVerdict | undefined, nowIso: string): void {
  for (const t of reviseTargets(s, gate.node_id, gate.item_index)) {
    const cur = o.get(fieldOf(gate.generation, t.id, t.item));
    if (!cur || !isNodeTerminal(cur.state)) continue;
    const rec: NodeRecord = { ...cur, state: 'queued', attempt: 1, revision: cur.revision + 1, feedback: verdict?.findings ?? verdict?.reason ?? '', output: undefined, error: undefined, route: undefined, items: undefined, queued_at: nowIso, started_at: undefined, ended_at: undefined, not_before: undefined, tokens: 0 };
    o.put(rec);
    step.enqueue.push(rec);
  }
  o.put({ ...gate, state: 'pending', revision: gate.revision + 1, attempt: 0, verdict, wait: undefined, started_at: undefined, ended_at: nowIso });
}

/**
 * outcomeStep records the end of an attempt: the node record (expecting it `running` at this attempt, so a repeated
 * or late completion writes nothing), tokens, retries, and for gates the route their verdict takes. Returns
 * undefined when the attempt is no longer the node's current one.
 */
export function outcomeStep(s: Snapshot, key: NodeKey, attempt: number, out: NodeOutcome, errorOf = (e?: string) => e ?? 'failed'): Step | undefined {
  const step = newStep();
  const o = new Overlay(s, step);
  const f = keyField(key);
  const rec = s.nodes.get(f);
  if (!rec || rec.state !== 'running' || rec.attempt !== attempt) return undefined;
  const node = s.graph.nodes.get(key.nodeId)!;
  const nowIso = new Date(s.now).toISOString();
  const ev = { generation: key.generation, node_id: key.nodeId, item_index: key.itemIndex, attempt };
  const tokens = Math.max(0, Math.floor(out.tokens ?? 0));
  if (tokens) step.incr.tokens_used = tokens;
  const base: NodeRecord = { ...rec, tokens: rec.tokens + tokens, ended_at: nowIso };

  const fail = (error: string) => {
    const r = retryOf(node);
    if (attempt <= r.max) {
      const next: NodeRecord = { ...base, state: 'queued', attempt: attempt + 1, error, not_before: s.now + r.backoffMs, ended_at: undefined, started_at: undefined };
      o.put(next, ['node_failed', { ...ev, error, will_retry: true }]);
      step.enqueue.push(next);
    } else {
      o.put({ ...base, state: 'failed', error }, ['node_failed', { ...ev, error, will_retry: false }]);
    }
  };

  if (out.verdict && node.kind === 'gate') {
    const v = out.verdict;
    const action = gateAction(node, v, rec.revision, maxRevisionsOf(node, s.run.config));
    const gateId = gateIdOf(key.nodeId, key.itemIndex);
    step.events.push(['gate_verdict', { ...ev, gate_id: gateId, outcome: v.outcome, reason: v.reason ?? '', criterion_id: v.criterion_id ?? '', action, revision: rec.revision, placement: node.placement ?? 'in_body' }]);
    const key2 = ON_RESULT_OF[v.outcome] ?? 'error';
    const output = { verdict: v.outcome, reason: v.reason ?? '', revision: rec.revision, action };
    switch (action) {
      case 'continue': case 'branch':
        o.put({ ...base, state: 'succeeded', verdict: v, route: key2, output });
        break;
      case 'next_generation':
        o.put({ ...base, state: 'succeeded', verdict: v, route: key2, output });
        step.set.next_generation_requested = String(key.generation);
        break;
      case 'done':
        o.put({ ...base, state: 'succeeded', verdict: v, route: key2, output });
        step.transition = { to: 'done', cause: 'contract', reason: `gate ${gateId} routed to done` };
        break;
      case 'halt':
        o.put({ ...base, state: 'failed', verdict: v, route: key2, output, error: `gate ${gateId} ${v.outcome}${v.reason ? `: ${v.reason}` : ''}` });
        step.transition = { to: 'blocked', cause: 'gate_rejected', reason: `gate ${gateId} ${v.outcome}${v.reason ? `: ${v.reason}` : ''}` };
        break;
      case 'escalate':
        o.put({ ...base, state: 'waiting', verdict: v, wait: { kind: 'approval', ref: gateId }, ended_at: undefined });
        if (s.run.status === 'running') {
          step.transition = { to: 'needs-approval', cause: 'approval', reason: v.reason ?? `gate ${gateId} waits for approval` };
          step.set.active_gate_id = gateId;
          step.events.push(['needs_approval', { gate_id: gateId, generation: key.generation, reason: v.reason ?? '' }]);
        }
        break;
      case 'revise':
        applyRevise(s, step, o, { ...base, verdict: v }, v, nowIso);
        break;
      default:
        fail(`gate ${gateId} ${v.outcome}${v.reason ? `: ${v.reason}` : ''}`);
    }
    return step;
  }

  switch (out.outcome) {
    case 'succeeded': {
      const items = out.items;
      o.put({ ...base, state: 'succeeded', output: out.output ?? null, route: out.route, items, child_loop_run_id: out.child_loop_run_id, error: undefined },
        ['node_succeeded', { ...ev, output_ref: outputRef(s.run.id, key), tokens, ...(items ? { items: items.length } : {}), ...(out.route !== undefined ? { route: out.route } : {}) }]);
      step.set.last_progress_at = nowIso;
      break;
    }
    case 'skipped':
      o.put({ ...base, state: 'skipped', cause: out.error ?? 'skipped_by_executor' }, ['node_skipped', { ...ev, reason: out.error ?? 'skipped_by_executor' }]);
      break;
    case 'waiting':
      o.put({ ...base, state: 'waiting', wait: out.wait, child_loop_run_id: out.child_loop_run_id, ended_at: undefined }, ['node_waiting', { ...ev, wait: out.wait ?? null }]);
      break;
    default:
      fail(errorOf(out.error));
  }
  return step;
}

/** outputRef names a node execution's output in the run detail. */
export const outputRef = (runId: string, k: NodeKey) => `loop-run://${runId}/${k.generation}/${k.nodeId}/${k.itemIndex}`;

/**
 * approvalStep applies an operator's decision on the parked gate: approve runs on, request_changes revises
 * (the definition-of-done gate: next generation), reject blocks. The synthetic budget gate: approve grants another
 * budget, reject blocks. Returns an error string for a decision that does not apply.
 */
export function approvalStep(s: Snapshot, gateId: string, decision: ApprovalDecision): Step | string {
  const step = newStep();
  const o = new Overlay(s, step);
  const nowIso = new Date(s.now).toISOString();
  step.set.active_gate_id = '';
  if (gateId === BUDGET_GATE) {
    if (decision === 'request_changes') return 'the budget gate takes approve or reject';
    step.events.push(['gate_verdict', { gate_id: BUDGET_GATE, outcome: decision === 'approve' ? 'approved' : 'rejected', decision, generation: s.run.generation }]);
    if (decision === 'approve') {
      step.incr.budget_approval_seq = 1;
      step.transition = { to: 'running', cause: 'approval', reason: 'budget approved' };
    } else step.transition = { to: 'blocked', cause: 'budget', reason: 'budget escalation rejected' };
    return step;
  }
  const { nodeId, itemIndex } = parseGateId(gateId);
  const rec = s.nodes.get(fieldOf(s.run.generation, nodeId, itemIndex));
  const node = s.graph.nodes.get(nodeId);
  if (!rec || !node || rec.state !== 'waiting' || rec.wait?.kind !== 'approval') return `gate ${gateId} is not waiting for approval`;
  const detail = rec.wait.detail as { rerun?: boolean; input_digest?: string } | undefined;
  if (node.kind !== 'gate' && detail?.rerun) {
    // NOTE: an action node that waits for approval (a tool call that needed it, executors/tool.ts) is not decided by
    // the approval: approve runs it again, with the approved input digest, and reject blocks the run.
    if (decision === 'request_changes') return `${gateId} waits for a tool call's approval: approve or reject`;
    const ev = { generation: rec.generation, node_id: nodeId, item_index: itemIndex, gate_id: gateId, decision, revision: rec.revision };
    if (decision === 'approve') {
      const next: NodeRecord = { ...rec, state: 'queued', attempt: rec.attempt + 1, wait: undefined, approved_digest: detail.input_digest ?? '', queued_at: nowIso, started_at: undefined, ended_at: undefined };
      o.put(next, ['gate_verdict', { ...ev, outcome: 'approved', action: 'continue' }]);
      step.enqueue.push(next);
      step.transition = { to: 'running', cause: 'approval', reason: `${gateId} approved` };
    } else {
      o.put({ ...rec, state: 'failed', wait: undefined, error: `${gateId}: the tool call was rejected by an operator`, ended_at: nowIso }, ['gate_verdict', { ...ev, outcome: 'rejected', action: 'halt' }]);
      step.transition = { to: 'blocked', cause: 'gate_rejected', reason: `${gateId} rejected` };
    }
    return step;
  }
  const verdict: GateVerdict = { outcome: decision === 'approve' ? 'approved' : 'rejected', criterion_id: rec.verdict?.criterion_id, reason: `operator ${decision}` };
  const ev = { generation: rec.generation, node_id: nodeId, item_index: itemIndex, gate_id: gateId, decision, revision: rec.revision };
  const base: NodeRecord = { ...rec, wait: undefined, verdict, ended_at: nowIso };
  if (decision === 'approve') {
    o.put({ ...base, state: 'succeeded', route: 'pass', output: { verdict: 'approved', decision, revision: rec.revision } }, ['gate_verdict', { ...ev, outcome: 'approved', action: 'continue' }]);
    step.transition = { to: 'running', cause: 'approval', reason: `gate ${gateId} approved` };
  } else if (decision === 'reject') {
    o.put({ ...base, state: 'failed', route: 'fail', error: `gate ${gateId} rejected by an operator` }, ['gate_verdict', { ...ev, outcome: 'rejected', action: 'halt' }]);
    step.transition = { to: 'blocked', cause: 'gate_rejected', reason: `gate ${gateId} rejected` };
  } else {
    const action = node.placement === 'definition_of_done' ? 'next_generation' : rec.revision < maxRevisionsOf(node, s.run.config) ? 'revise' : exhaustedRevisions(node);
    step.events.push(['gate_verdict', { ...ev, outcome: 'rejected', action }]);
    if (action === 'revise') applyRevise(s, step, o, base, { outcome: 'rejected', reason: 'changes requested by an operator' }, nowIso);
    else if (action === 'halt') {
      o.put({ ...base, state: 'failed', route: 'fail', error: `gate ${gateId}: changes requested after ${rec.revision} revisions (max_revisions)` });
      step.transition = { to: 'blocked', cause: 'gate_rejected', reason: `gate ${gateId}: max_revisions reached` };
      return step;
    } else {
      o.put({ ...base, state: 'succeeded', route: 'fail', output: { verdict: 'rejected', decision, revision: rec.revision } });
      if (action === 'next_generation') step.set.next_generation_requested = String(rec.generation);
    }
    step.transition = { to: 'running', cause: 'approval', reason: `gate ${gateId}: changes requested` };
  }
  return step;
}

/** resumeRecord is the record write that ends a waiting node (LoopEngineControl.completeWaiting). */
export function completeRecord(rec: NodeRecord, out: { outcome: 'succeeded' | 'failed' | 'skipped'; output?: unknown; error?: string }, now: number): NodeRecord {
  return { ...rec, v: rec.v + 1, state: out.outcome, wait: undefined, output: out.output ?? rec.output, error: out.error, ended_at: new Date(now).toISOString() };
}
