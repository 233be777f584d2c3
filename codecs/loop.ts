import { parse as parseShell } from 'shell-quote';
import * as yup from 'yup';
// NOTE: the lint and the loop types are pure leaf modules of runtime/loops (they import only codecs and other pure
// modules), kept beside the engine that shares them; importing them here makes no cycle.
import { lintLoop } from './loop-lint.ts';
import {
  BUDGET_ON_EXCEEDED, LOOP_LIMITS, NETWORK_MODES, NODE_CLASSES, ON_RESULT_KEYS, REATTEMPT_STRATEGIES, ROUTE_ACTIONS, VERDICT_POLICIES,
  type Criterion, type LintIssue, type LoopDefinition,
} from './loop-types.ts';
import { isPositiveDuration } from './duration.ts';
import { at, check, ID_PATTERN, isObject, Issues, str, y } from './shared.ts';
import type { Codec, DecodeResult } from './types.ts';

/** LOOP_API_VERSION is the apiVersion a definition gets when it names none. */
export const LOOP_API_VERSION = 'svc.loops/v1';

const int = (min: number, max: number) => yup.number().typeError('must be an integer').integer('must be an integer').min(min, `must be at least ${min}`).max(max, `must be at most ${max}`);
const duration = () => y.string().test('duration', 'must be a duration such as 30s or 5m', (v) => v === undefined || isPositiveDuration(v));

const criterion = y.object().shape({
  id: y.string(), type: y.string().required('is required'), check: yup.mixed().test('argv', 'must be a string or a list of strings', (v) => v === undefined || typeof v === 'string' || (Array.isArray(v) && v.every((x) => typeof x === 'string'))),
  expect: y.string(), agent: y.string(), model: y.string(), prompt: y.string(), rubric: y.string(), tool: y.string(), inputs: y.object(),
});

/** Node fields with a type; any other property is kept as given (spec: "free extra properties allowed"). */
const node = y.object().shape({
  id: y.string().required('is required'), kind: y.string().required('is required'), class: y.oneOf(NODE_CLASSES),
  depends_on: y.stringList(), join: y.string(), agent: y.string(), prompt: y.string(), loop: y.string(), detach: y.bool(),
  condition: y.string(), collection: y.string(), input_ref: y.string(),
  max_fan_out: int(1, 1_000_000), max_parallel: int(1, 1_000_000), batch_size: int(1, 1_000_000), max_revisions: int(0, 1_000_000),
  criteria: yup.array(criterion), verdict_policy: y.oneOf(VERDICT_POLICIES),
  on_result: y.object().test('on-result', `must map ${ON_RESULT_KEYS.join('|')} to ${ROUTE_ACTIONS.join('|')}`, (v) => v === undefined || (isObject(v) && Object.entries(v).every(([k, a]) => (ON_RESULT_KEYS as readonly string[]).includes(k) && (ROUTE_ACTIONS as readonly string[]).includes(a as string)))),
  params: y.object(), timeout: duration(),
  retry: y.object().shape({ max: int(0, 10), backoff: duration() }).default(undefined),
  body: y.object(), contract: y.object(), harvest: yup.mixed(), parse: y.string(), pattern: y.string(), produces: y.object(), session: y.object(), watch: yup.mixed(),
  events: yup.mixed(), filter: y.string(),
});

const NODE_FIELDS = Object.keys(node.fields);

/**
 * isNodeFieldTypo tells a node property that is not a node field but nearly one (`dependson`, `dependsOn`,
 * `Prompt`: the same letters but for case and `_`, or one edit away). NOTE: nodes keep free extra properties (spec
 * `Node`), so only these are unknown fields (refused unless ?field_validation=warn|ignore): a typo'd `depends_on`
 * kept as a free property silently made its node an entry node.
 */
export function isNodeFieldTypo(k: string): boolean {
  if (NODE_FIELDS.includes(k)) return false;
  const bare = (x: string) => x.toLowerCase().replace(/[_-]/g, '');
  return NODE_FIELDS.some((f) => bare(f) === bare(k) || (f.length > 3 && withinOneEdit(f, k)));
}

/** withinOneEdit: b is a with at most one character changed, added, removed, or two neighbours swapped. */
function withinOneEdit(a: string, b: string): boolean {
  if (Math.abs(a.length - b.length) > 1) return false;
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  const rest = (x: string, y: string) => x === y;
  return rest(a.slice(i + 1), b.slice(i + 1)) || rest(a.slice(i), b.slice(i + 1)) || rest(a.slice(i + 1), b.slice(i))
    || (a[i] === b[i + 1] && a[i + 1] === b[i] && rest(a.slice(i + 2), b.slice(i + 2)));
}

const edge = y.object().shape({ from: y.string().required('is required'), to: y.string().required('is required'), when: y.string() });

const config = y.object().shape({
  human_gate_enabled: y.bool(), reattempt_strategy: y.oneOf(REATTEMPT_STRATEGIES), enabled_checks_json: y.string(),
  iteration_cap: int(1, LOOP_LIMITS.iterationCap), budget_tokens: int(0, 2_000_000_000), budget_wall_sec: int(0, 31_536_000),
  budget_on_exceeded: y.oneOf(BUDGET_ON_EXCEEDED), no_progress_window: int(0, LOOP_LIMITS.noProgressWindow),
  fan_out_width: int(1, LOOP_LIMITS.fanOutWidth), gate_max_revisions: int(0, LOOP_LIMITS.maxRevisions),
  model_defaults: y.object().shape({ worker: y.string(), judge: y.string() }).default(undefined),
}).default(undefined);

/** NETWORK_PARTICIPATION_SCHEMA checks a `network_participation` (a definition's, and a run start's). */
export const NETWORK_PARTICIPATION_SCHEMA = y.object().shape({ mode: y.oneOf(NETWORK_MODES) }).default(undefined);

/** LOOP_CONFIG_SCHEMA checks a LoopConfig (the definition's `config`, the config route and start's config_overrides). */
export const LOOP_CONFIG_SCHEMA = config;

const shape = yup.object({
  apiVersion: y.string(), kind: y.string(),
  meta: y.object().required('is required').shape({
    name: y.string().required('is required').matches(ID_PATTERN, 'must be a name of letters, digits, ".", "_" and "-"'), description: y.string(), version: int(0, 2_147_483_647),
    catalog: y.object().shape({ category: y.string(), keywords: y.stringList(), use_when: y.string() }).default(undefined),
  }),
  inputs: y.object().test('inputs', 'must map input names to {type?, description?, required?, default?, ref?}', (v) => v === undefined || (isObject(v) && Object.values(v).every(isObject))),
  contract: y.object().shape({
    goal: y.string(), definition_of_done: y.string(), verification: yup.array(),
    budget: y.object().shape({ tokens: int(0, 2_000_000_000), wall_clock_sec: int(0, 31_536_000), on_exceeded: y.oneOf(BUDGET_ON_EXCEEDED) }).default(undefined),
    iteration_cap: int(0, 1_000_000), no_progress: y.object().shape({ window: int(0, 1_000), hash_fields: y.stringList() }).default(undefined),
    stop_when: y.string(), terminal_states: y.stringList(), boundaries: y.stringList(), constraints: y.stringList(),
    model_defaults: y.object().shape({ worker: y.string(), judge: y.string() }).default(undefined),
  }).default(undefined),
  // NOTE: nodes, edges and criteria allow free extra properties (spec `Node`, edges "plus free properties"), so they
  // are checked one by one below, outside the unknown-field walk.
  graph: y.object().required('is required').shape({ nodes: yup.array().required('is required'), edges: yup.array() }),
  concurrency: y.oneOf(['parallel', 'serial']),
  network_participation: NETWORK_PARTICIPATION_SCHEMA,
  start: yup.array(y.object().shape({ kind: y.string().required('is required'), inputs: y.object(), input_mapping: y.stringMap() })),
  config,
  annotations: yup.array(y.object().shape({ node_id: y.string().required('is required'), x: yup.number().typeError('must be a number').required('is required'), y: yup.number().typeError('must be a number').required('is required') })),
});

/** canonicalLoop trims names, fills class and apiVersion, dedupes depends_on and sorts edges, keeping every other value as given. */
export function canonicalLoop(s: Record<string, any>): LoopDefinition {
  const nodes = (s.graph.nodes as Record<string, any>[]).map((n) => {
    const out: Record<string, unknown> = { ...n, id: str(n.id), kind: str(n.kind) };
    if (Array.isArray(n.depends_on)) out.depends_on = [...new Set((n.depends_on as string[]).map(str).filter(Boolean))].sort();
    return out;
  });
  const edges = ((s.graph.edges ?? []) as Record<string, any>[]).map((e) => ({ ...e, from: str(e.from), to: str(e.to) }))
    .sort((a, b) => (a.from === b.from ? (a.to < b.to ? -1 : a.to > b.to ? 1 : 0) : a.from < b.from ? -1 : 1));
  const def: Record<string, unknown> = {
    ...s, apiVersion: str(s.apiVersion) || LOOP_API_VERSION, kind: str(s.kind) || 'Loop',
    meta: { ...s.meta, name: str(s.meta.name) },
    graph: { ...s.graph, nodes, ...(s.graph.edges !== undefined ? { edges } : {}) },
  };
  return def as unknown as LoopDefinition;
}

/**
 * lintFieldErrors maps lint errors to field paths (`graph.nodes[3]` for a node's, `graph` otherwise), code first.
 * NOTE: findings on one path are joined into one error: a caller's map of path → message keeps every one of them.
 */
export function lintFieldErrors(def: LoopDefinition, issues: LintIssue[]): { path: string; message: string }[] {
  const byPath = new Map<string, string[]>();
  for (const i of issues.filter((x) => x.severity === 'error')) {
    const idx = i.node_id ? def.graph.nodes.findIndex((n) => n.id === i.node_id) : -1;
    const path = idx >= 0 ? `graph.nodes[${idx}]` : 'graph';
    byPath.set(path, [...(byPath.get(path) ?? []), `${i.code}: ${i.message}`]);
  }
  return [...byPath].map(([path, messages]) => ({ path, message: messages.join('; ') }));
}

/**
 * criterionArgv turns a `command` criterion's `check` into argv: a list as it is, a string split into words with
 * quotes grouping them. NOTE: a check never runs through a shell, so operators, substitutions, globs and comments
 * are refused (when written, and again before a run) rather than passed on as words.
 */
export function criterionArgv(check: unknown): { ok: true; argv: string[] } | { ok: false; reason: string } {
  if (Array.isArray(check)) {
    return check.length && check.every((a) => typeof a === 'string') && check[0] ? { ok: true, argv: check } : { ok: false, reason: 'must be a non-empty list of strings' };
  }
  if (typeof check !== 'string' || !check.trim()) return { ok: false, reason: 'is required for a command criterion' };
  const words = /[$`]/.test(check) ? [] : parseShell(check);
  if (!words.length || words.some((w) => typeof w !== 'string')) return { ok: false, reason: 'must be a plain command line (no shell operators, substitutions, globs or comments)' };
  return { ok: true, argv: words as string[] };
}

/** YUP_TYPES words yup's type names as a caller knows them. */
const YUP_TYPES: Record<string, string> = { number: 'a number', string: 'a string', boolean: 'true or false', array: 'a list', object: 'an object', date: 'a date' };

/** plainMessage rewords yup's own type error ("must be a `number` type, but the final value was: …") plainly. */
export function plainMessage(message: string): string {
  const m = /^must be a `(\w+)` type\b/.exec(message);
  return m ? `must be ${YUP_TYPES[m[1]] ?? `of type ${m[1]}`}` : message;
}

/**
 * decodeLoop checks a loop definition's shape, canonicalizes it, then runs the whole lint (runtime/loops/lint.ts):
 * every lint error is a field error naming its code, so a refused write lists all of them at once.
 */
export function decodeLoop(input: unknown, unknown?: string[]): DecodeResult<LoopDefinition> & { lint?: LintIssue[] } {
  const issues = new Issues(unknown);
  if (!isObject(input)) return { ok: false, errors: [{ path: 'spec', message: 'must be an object' }] };
  let ok = check(shape, input, issues);
  const open = new Issues();
  const g = isObject(input.graph) ? input.graph : {};
  if (Array.isArray(g.nodes)) g.nodes.forEach((n: unknown, i: number) => {
    if (!check(node, n, open, `graph.nodes[${i}]`)) ok = false;
    if (issues.unknown && isObject(n)) for (const k of Object.keys(n)) if (isNodeFieldTypo(k)) issues.unknown.push(`graph.nodes[${i}].${k}`);
  });
  if (Array.isArray(g.edges)) g.edges.forEach((e: unknown, i: number) => { if (!check(edge, e, open, `graph.edges[${i}]`)) ok = false; });
  const v = isObject(input.contract) ? input.contract.verification : undefined;
  if (Array.isArray(v)) v.forEach((c: unknown, i: number) => { if (!check(criterion, c, open, `contract.verification[${i}]`)) ok = false; });
  if (!ok) return { ok: false, errors: [...issues.list, ...open.list].map((e) => ({ path: e.path, message: plainMessage(e.message) })) };
  const def = canonicalLoop(input);
  const lint = lintLoop(def);
  const errors = lintFieldErrors(def, lint);
  const commands = (base: string, list: Criterion[] | undefined) => {
    for (const [j, c] of (list ?? []).entries()) {
      const argv = c.type === 'command' ? criterionArgv(c.check) : undefined;
      if (argv && !argv.ok) errors.push({ path: `${base}[${j}].check`, message: argv.reason });
    }
  };
  for (const [i, n] of def.graph.nodes.entries()) commands(`graph.nodes[${i}].criteria`, n.criteria);
  commands('contract.verification', def.contract?.verification);
  return errors.length ? { ok: false, errors, lint } : { ok: true, spec: def, lint };
}

/** loopCodec is the codec of kind `loop` (workspace scope): a loop definition (spec concepts `LoopDefinition`). */
export const loopCodec: Codec<LoopDefinition> = {
  kind: 'loop',
  maxBytes: 256 * 1024,
  decode(input, ctx) {
    // NOTE: the spec is decoded whatever the scope, so its unknown fields and errors are reported with the scope's.
    const r = decodeLoop(input, ctx.unknownFields);
    const scope = ctx.scope.kind === 'workspace' ? [] : [{ path: 'scope', message: 'a loop is workspace-scoped: scope must be {kind: "workspace", id}' }];
    if (r.ok && !scope.length) return { ok: true, spec: r.spec };
    return { ok: false, errors: [...scope, ...(r.ok ? [] : r.errors)] };
  },
  // NOTE: the definition routes find a loop by this name, so two records holding one name would make one of them
  // unreachable, and deleting the other would hand the name to a definition nobody asked for.
  uniqueName: (spec) => spec.meta?.name,
};
