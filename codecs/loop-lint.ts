import { HOOK_EVENTS } from './hook-binding.ts';
import { EMITTED_EVENT_NAMES, PUBLIC_EVENT_NAMES } from './event-names.ts';
import { parseFilter } from './event-filter.ts';
import { classOf, DOD_NODE, edgesOf, topoOrder } from './loop-graph.ts';
import {
  CONTROL_KINDS, CRITERION_TYPES, JOIN_RULES, LOOP_LIMITS, RESERVED_ACTION_KINDS, SOURCE_KINDS, TERMINAL_STATUSES,
  type LintIssue, type LoopDefinition, type LoopNode,
  LOOP_BUS_EVENT_NAMES,
} from './loop-types.ts';

/** NODE_ID is the node id grammar (snake_case). */
export const NODE_ID = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$/;
/** TOOL_KIND is the ToolID grammar an action kind that is not reserved must follow (codecs/tool.ts isToolId). */
const TOOL_SEGMENT = /^[a-z](?:[a-z0-9_]*[a-z0-9])?$/;
export const isToolKind = (k: string) => k.length <= 64 && k.includes('__') && !k.includes('___') && k.split('__').every((s) => TOOL_SEGMENT.test(s));

const WATCHABLE = new Set<string>([...HOOK_EVENTS, ...EMITTED_EVENT_NAMES, ...PUBLIC_EVENT_NAMES, ...LOOP_BUS_EVENT_NAMES]);
/**
 * HIGH_VOLUME are event families a `watch-events` subscription may not take unfiltered: every token of every session
 * would wake the run (watch_events_filter_too_broad).
 */
const HIGH_VOLUME = ['message.', 'turn.', 'tool.', 'session.', 'permission.', 'event.'];

const err = (code: string, message: string, node_id?: string): LintIssue => ({ ...(node_id ? { node_id } : {}), code, message, severity: 'error' });
const warn = (code: string, message: string, node_id?: string): LintIssue => ({ ...(node_id ? { node_id } : {}), code, message, severity: 'warning' });
const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * lintLoop runs the whole lint over a definition whose shape the codec already checked, and returns
 * every finding (errors and warnings), never only the first. It is pure: the same definition gives the same list.
 * Codes beyond the spec's: `edge_unknown_node`, `fan_out_nested`, `collect_without_fan_out`, `criterion_type_unknown`,
 * `join_rule_unknown`, `reserved_node_id`, `goal_too_long`, `goal_missing` (warning), `edge_condition_ignored` (warning).
 */
export function lintLoop(def: LoopDefinition): LintIssue[] {
  const out: LintIssue[] = [];
  const nodes = def.graph?.nodes ?? [];
  const ids = new Set<string>();
  for (const n of nodes) {
    if (ids.has(n.id)) out.push(err('duplicate_node_id', `node id "${n.id}" is used more than once`, n.id));
    ids.add(n.id);
    if (!NODE_ID.test(n.id) || n.id.length > LOOP_LIMITS.nodeIdLength) {
      out.push(err('node_id_invalid', `node id "${n.id}" must be snake_case ([a-z][a-z0-9]*(_[a-z0-9]+)*), at most ${LOOP_LIMITS.nodeIdLength} characters`, n.id));
    }
    if (n.id === DOD_NODE && def.contract?.verification?.length) {
      out.push(err('reserved_node_id', `node id "${DOD_NODE}" is the synthetic gate of contract.verification`, n.id));
    }
    lintNode(n, out);
  }
  if (nodes.length > LOOP_LIMITS.nodes) out.push(err('non_terminating_structure', `the graph has ${nodes.length} nodes; at most ${LOOP_LIMITS.nodes}`));

  const edges = edgesOf(def);
  const upstream = new Map<string, string[]>([...ids].map((id) => [id, []]));
  const downstream = new Map<string, string[]>([...ids].map((id) => [id, []]));
  for (const e of edges) {
    const missing = [e.from, e.to].filter((x) => !ids.has(x));
    if (missing.length) {
      out.push(err('edge_unknown_node', `edge ${e.from} -> ${e.to} names ${missing.map((m) => `"${m}"`).join(' and ')}, not a node of the graph`, ids.has(e.to) ? e.to : undefined));
      continue;
    }
    if (e.from === e.to) { out.push(err('cycle', `node "${e.from}" depends on itself`, e.from)); continue; }
    upstream.get(e.to)!.push(e.from);
    downstream.get(e.from)!.push(e.to);
    if (e.when !== undefined && classOf(byId(nodes, e.from)?.kind ?? '') !== 'control') {
      out.push(warn('edge_condition_ignored', `edge ${e.from} -> ${e.to} has "when" but "${e.from}" is not a branch or gate: the condition is ignored`, e.to));
    }
  }
  const order = topoOrder([...ids], upstream, downstream);
  if (!order) {
    for (const cycle of cyclesOf([...ids], upstream, downstream)) {
      out.push(err('cycle', `nodes ${cycle.map((x) => `"${x}"`).join(', ')} form a cycle (${[...cycle, cycle[0]].join(' -> ')}); repetition is a new generation, not an edge back`, cycle[0]));
    }
    // NOTE: nodes that only a cycle leads to never become ready: unreachable from every entry node.
    const reach = reachable([...ids].filter((id) => !upstream.get(id)!.length), downstream);
    for (const id of ids) if (!reach.has(id)) out.push(err('unreachable_node', `node "${id}" cannot be reached from an entry node (a node with no upstream)`, id));
  } else {
    lintFanOut(nodes, order, upstream, out);
  }
  if (nodes.length === 0) out.push(err('non_terminating_structure', 'the graph has no nodes'));

  const c = def.contract ?? {};
  for (const s of c.terminal_states ?? []) {
    if (!(TERMINAL_STATUSES as readonly string[]).includes(s)) out.push(err('unknown_terminal_state', `terminal state "${s}" is not one of ${TERMINAL_STATUSES.join(', ')}`));
  }
  if (c.iteration_cap !== undefined && (c.iteration_cap < 1 || c.iteration_cap > LOOP_LIMITS.iterationCap)) {
    out.push(err('non_terminating_structure', `contract.iteration_cap must be from 1 to ${LOOP_LIMITS.iterationCap}`));
  }
  if (c.no_progress?.window !== undefined && (c.no_progress.window < 1 || c.no_progress.window > LOOP_LIMITS.noProgressWindow)) {
    out.push(err('non_terminating_structure', `contract.no_progress.window must be from 1 to ${LOOP_LIMITS.noProgressWindow}`));
  }
  if (typeof c.goal === 'string' && c.goal.length > 4096) out.push(err('goal_too_long', 'contract.goal is longer than 4096 characters'));
  if (c.definition_of_done && !c.goal) out.push(warn('goal_missing', 'contract.definition_of_done is set but contract.goal is not'));
  for (const [i, cr] of (c.verification ?? []).entries()) {
    if (!(CRITERION_TYPES as readonly string[]).includes(cr.type)) out.push(err('criterion_type_unknown', `contract.verification[${i}].type "${cr.type}" is not one of ${CRITERION_TYPES.join(', ')}`));
  }
  return out;
}

const byId = (nodes: LoopNode[], id: string) => nodes.find((n) => n.id === id);

function lintNode(n: LoopNode, out: LintIssue[]): void {
  const implied = classOf(n.kind);
  const cls = n.class ?? implied;
  if (cls === 'control' && !(CONTROL_KINDS as readonly string[]).includes(n.kind)) {
    out.push(err('unknown_control_kind', `kind "${n.kind}" is not a control kind (${CONTROL_KINDS.join(', ')})`, n.id));
  } else if (cls === 'source' && !(SOURCE_KINDS as readonly string[]).includes(n.kind)) {
    out.push(err('unknown_source_kind', `kind "${n.kind}" is not a source kind (${SOURCE_KINDS.join(', ')})`, n.id));
  } else if (cls === 'action' && (implied !== 'action' || (!(RESERVED_ACTION_KINDS as readonly string[]).includes(n.kind) && !isToolKind(n.kind)))) {
    out.push(err('unknown_action_kind', `kind "${n.kind}" is not an action kind: ${RESERVED_ACTION_KINDS.join(', ')} or a tool id (segments joined by "__")`, n.id));
  }
  if (n.join !== undefined && !(JOIN_RULES as readonly string[]).includes(n.join)) {
    out.push(err('join_rule_unknown', `join "${n.join}" is not one of ${JOIN_RULES.join(', ')}`, n.id));
  }
  if (n.kind === 'fan-out') {
    const literal = Array.isArray(n.params?.items) ? (n.params!.items as unknown[]).length : undefined;
    for (const f of ['max_fan_out', 'max_parallel'] as const) {
      if (n[f] !== undefined && n[f]! > LOOP_LIMITS.fanOutWidth) out.push(err('fan_out_ceiling_exceeded', `${f} ${n[f]} is above the ceiling ${LOOP_LIMITS.fanOutWidth}`, n.id));
    }
    if (literal !== undefined && literal > LOOP_LIMITS.fanOutWidth) out.push(err('fan_out_ceiling_exceeded', `params.items has ${literal} items; at most ${LOOP_LIMITS.fanOutWidth}`, n.id));
    if (n.max_fan_out === undefined && literal === undefined) {
      out.push(err('fan_out_unbounded', `a fan-out over "${n.collection ?? ''}" needs max_fan_out (at most ${LOOP_LIMITS.fanOutWidth}) or a literal params.items list`, n.id));
    }
  }
  if (n.kind === 'gate') {
    if (n.max_revisions !== undefined && n.max_revisions > LOOP_LIMITS.maxRevisions) {
      out.push(err('gate_max_revisions_ceiling_exceeded', `max_revisions ${n.max_revisions} is above the ceiling ${LOOP_LIMITS.maxRevisions}`, n.id));
    }
    const criteria = n.criteria ?? [];
    if (n.verdict_policy === 'revise_until_clean' && !criteria.some((c) => c.type === 'agent-judge' || c.type === 'human')) {
      out.push(err('verdict_policy_requires_judge', 'verdict_policy revise_until_clean needs an agent-judge or human criterion', n.id));
    }
    for (const [i, c] of criteria.entries()) {
      if (!(CRITERION_TYPES as readonly string[]).includes(c.type)) out.push(err('criterion_type_unknown', `criteria[${i}].type "${c.type}" is not one of ${CRITERION_TYPES.join(', ')}`, n.id));
    }
  }
  if (n.harvest !== undefined && (!isObj(n.harvest) || !Object.values(n.harvest).every((v) => typeof v === 'string'))) {
    out.push(err('invalid_harvest', 'harvest must map output names to template strings', n.id));
  }
  if (n.kind === 'watch-source' && !(isObj(n.watch) && typeof n.watch.kind === 'string' && n.watch.kind)) {
    out.push(err('watch_kind_required', 'a watch-source node needs watch.kind', n.id));
  }
  if (n.kind === 'file-import' && !n.parse) out.push(err('file_import_parse_required', 'a file-import node needs parse', n.id));
  if (n.kind === 'watch-events') lintWatch(n, out);
}

function lintWatch(n: LoopNode, out: LintIssue[]): void {
  const subs = n.events as unknown;
  if (subs === undefined || (Array.isArray(subs) && subs.length === 0)) {
    out.push(err('watch_events_subscription_required', 'a watch-events node needs events: [{kind, filter?}]', n.id));
    return;
  }
  if (!Array.isArray(subs) || !subs.every((s) => isObj(s) && typeof s.kind === 'string' && (s.filter === undefined || typeof s.filter === 'string'))) {
    out.push(err('watch_events_shape_invalid', 'events must be a list of {kind: string, filter?: string}', n.id));
    return;
  }
  for (const [i, s] of (subs as { kind: string; filter?: string }[]).entries()) {
    if (s.kind.includes('*')) out.push(err('watch_events_kind_unsupported', `events[${i}].kind "${s.kind}": a subscription names one event, not a pattern`, n.id));
    else if (!WATCHABLE.has(s.kind)) out.push(err('watch_events_kind_unknown', `events[${i}].kind "${s.kind}" is not an event the service publishes or the hook catalog names`, n.id));
    const f = parseFilter(s.filter ?? '');
    // NOTE: the filter grammar is the notification presets', where the original used CEL.
    if (!f.ok) out.push(err('watch_events_filter_invalid', `events[${i}].filter: ${f.error}`, n.id));
    else if (!f.expr && HIGH_VOLUME.some((p) => s.kind.startsWith(p))) {
      out.push(err('watch_events_filter_too_broad', `events[${i}]: ${s.kind} is high-volume; give a filter (e.g. workspace=… AND agent=…)`, n.id));
    }
  }
}

/** lintFanOut checks fan-out scopes: no fan-out inside another, no node mixing two, every collect after a fan-out. */
function lintFanOut(nodes: LoopNode[], order: string[], upstream: Map<string, string[]>, out: LintIssue[]): void {
  const kind = new Map(nodes.map((n) => [n.id, n.kind]));
  const scope = new Map<string, string | undefined>();
  for (const id of order) {
    const scopes = new Set<string>();
    for (const u of upstream.get(id)!) {
      const s = kind.get(u) === 'fan-out' ? u : scope.get(u);
      if (s !== undefined) scopes.add(s);
    }
    if (scopes.size > 1) out.push(err('fan_out_nested', `node "${id}" runs in the items of ${[...scopes].map((s) => `"${s}"`).join(' and ')}; join them with a collect first`, id));
    const s = [...scopes][0];
    if (kind.get(id) === 'fan-out' && s !== undefined) out.push(err('fan_out_nested', `fan-out "${id}" is inside the items of "${s}"; collect them first`, id));
    if (kind.get(id) === 'collect') {
      if (s === undefined) out.push(err('collect_without_fan_out', `collect "${id}" has no fan-out upstream to gather`, id));
      scope.set(id, undefined);
    } else scope.set(id, s);
  }
}

function reachable(roots: string[], downstream: Map<string, string[]>): Set<string> {
  const seen = new Set(roots);
  const stack = [...roots];
  while (stack.length) for (const d of downstream.get(stack.pop()!) ?? []) if (!seen.has(d)) { seen.add(d); stack.push(d); }
  return seen;
}

/**
 * cyclesOf lists each cycle of the graph as the nodes in it (a strongly connected component of two nodes or more),
 * in the order a walk along its edges meets them; nodes that only lie behind a cycle are in none.
 */
function cyclesOf(ids: string[], upstream: Map<string, string[]>, downstream: Map<string, string[]>): string[][] {
  const blocked = new Set(ids.filter((id) => !upstream.get(id)!.length));
  const out: string[][] = [];
  const seen = new Set<string>();
  for (const id of ids) {
    if (seen.has(id) || blocked.has(id)) continue;
    const ahead = reachable([id], downstream);
    const behind = reachable([id], upstream);
    const scc = [...ahead].filter((x) => behind.has(x));
    for (const x of scc) seen.add(x);
    if (scc.length < 2) continue;
    // NOTE: the members in walk order from the first one, so the message reads as the cycle runs.
    const members = new Set(scc);
    const walk = [id];
    for (let cur = id; ;) {
      const next = downstream.get(cur)!.find((d) => members.has(d) && !walk.includes(d));
      if (!next) break;
      walk.push(next);
      cur = next;
    }
    out.push(walk.length === scc.length ? walk : scc);
  }
  return out;
}

/** lintErrors is the findings that refuse a definition (warnings are reported by validate but do not refuse). */
export const lintErrors = (issues: LintIssue[]) => issues.filter((i) => i.severity === 'error');
