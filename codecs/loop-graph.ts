import {
  CONTROL_KINDS, SOURCE_KINDS, type Criterion, type JoinRule, type LoopDefinition, type LoopEdge, type LoopNode, type NodeClass,
} from './loop-types.ts';

/** DOD_NODE is the id of the synthetic definition-of-done gate a run adds when the contract has verification criteria. */
export const DOD_NODE = 'definition_of_done';
/** BUDGET_GATE is the synthetic gate id a budget escalation parks the run on. */
export const BUDGET_GATE = 'budget';

/** classOf is a node kind's class: the closed control and source sets, and action for anything else (tool ids). */
export function classOf(kind: string): NodeClass {
  if ((CONTROL_KINDS as readonly string[]).includes(kind)) return 'control';
  if ((SOURCE_KINDS as readonly string[]).includes(kind)) return 'source';
  return 'action';
}

/** CompiledGraph is a definition's graph in the form the planner reads: adjacency, order and fan-out scopes. */
export interface CompiledGraph {
  nodes: Map<string, LoopNode>;
  /** Node ids in a topological order (ties in definition order). */
  order: string[];
  upstream: Map<string, string[]>;
  downstream: Map<string, string[]>;
  /** The edge from → to (`from>to`); an upstream named only by depends_on has an edge without `when`. */
  edges: Map<string, LoopEdge>;
  /** The fan-out node whose items a node runs once per item (undefined: the node runs once). */
  scope: Map<string, string | undefined>;
  /** A node's join rule (wait_all when it names none). */
  joinOf(id: string): JoinRule;
}

/** edgesOf merges `graph.edges` and every node's `depends_on` into one edge list (first mention wins). */
export function edgesOf(def: Pick<LoopDefinition, 'graph'>): LoopEdge[] {
  const seen = new Map<string, LoopEdge>();
  for (const e of def.graph.edges ?? []) if (!seen.has(`${e.from}>${e.to}`)) seen.set(`${e.from}>${e.to}`, e);
  for (const n of def.graph.nodes) for (const u of n.depends_on ?? []) if (!seen.has(`${u}>${n.id}`)) seen.set(`${u}>${n.id}`, { from: u, to: n.id });
  return [...seen.values()];
}

/** verificationPolicy is the definition-of-done gate's verdict policy: revise_until_clean with a judge or human. */
export function verificationPolicy(criteria: Criterion[]): 'fixed_passes' | 'revise_until_clean' {
  return criteria.some((c) => c.type === 'agent-judge' || c.type === 'human') ? 'revise_until_clean' : 'fixed_passes';
}

/**
 * executableNodes returns the graph nodes plus, when the contract has verification criteria, the synthetic
 * definition-of-done gate downstream of every sink: the generation passes only when it approves.
 */
export function executableNodes(def: LoopDefinition): { nodes: LoopNode[]; edges: LoopEdge[] } {
  const edges = edgesOf(def);
  const nodes = [...def.graph.nodes];
  const verification = def.contract?.verification ?? [];
  if (verification.length) {
    const hasDown = new Set(edges.map((e) => e.from));
    const sinks = nodes.filter((n) => !hasDown.has(n.id)).map((n) => n.id);
    nodes.push({ id: DOD_NODE, kind: 'gate', class: 'control', criteria: verification, verdict_policy: verificationPolicy(verification), placement: 'definition_of_done', join: 'wait_all' });
    for (const s of sinks) edges.push({ from: s, to: DOD_NODE });
  }
  return { nodes, edges };
}

/**
 * compileGraph builds the planner's view of a definition that passed the lint. It throws on a cycle or an edge to an
 * unknown node (the lint refuses both, so a stored definition never does).
 */
export function compileGraph(def: LoopDefinition): CompiledGraph {
  const { nodes: list, edges: edgeList } = executableNodes(def);
  const nodes = new Map(list.map((n) => [n.id, n]));
  const upstream = new Map<string, string[]>(list.map((n) => [n.id, []]));
  const downstream = new Map<string, string[]>(list.map((n) => [n.id, []]));
  const edges = new Map<string, LoopEdge>();
  for (const e of edgeList) {
    if (!nodes.has(e.from) || !nodes.has(e.to)) throw new Error(`edge ${e.from} -> ${e.to} names an unknown node`);
    edges.set(`${e.from}>${e.to}`, e);
    upstream.get(e.to)!.push(e.from);
    downstream.get(e.from)!.push(e.to);
  }
  const order = topoOrder(list.map((n) => n.id), upstream, downstream);
  if (!order) throw new Error('the graph has a cycle');
  const scope = new Map<string, string | undefined>();
  for (const id of order) {
    const n = nodes.get(id)!;
    let s: string | undefined;
    for (const u of upstream.get(id)!) {
      const un = nodes.get(u)!;
      const us = un.kind === 'fan-out' ? u : scope.get(u);
      if (us !== undefined) s = us;
    }
    // NOTE: a collect gathers its fan-out's items, so it runs once, in the scope around the fan-out (none: nesting is refused by the lint).
    if (n.kind === 'collect') s = undefined;
    scope.set(id, s);
  }
  return { nodes, order, upstream, downstream, edges, scope, joinOf: (id) => nodes.get(id)?.join ?? 'wait_all' };
}

/** topoOrder is Kahn's order of the ids (definition order among the ready), or undefined when there is a cycle. */
export function topoOrder(ids: string[], upstream: Map<string, string[]>, downstream: Map<string, string[]>): string[] | undefined {
  const indeg = new Map(ids.map((id) => [id, upstream.get(id)?.length ?? 0]));
  const pos = new Map(ids.map((id, i) => [id, i]));
  const ready = ids.filter((id) => indeg.get(id) === 0);
  const out: string[] = [];
  while (ready.length) {
    ready.sort((a, b) => pos.get(a)! - pos.get(b)!);
    const id = ready.shift()!;
    out.push(id);
    for (const d of downstream.get(id) ?? []) {
      indeg.set(d, indeg.get(d)! - 1);
      if (indeg.get(d) === 0) ready.push(d);
    }
  }
  return out.length === ids.length ? out : undefined;
}
