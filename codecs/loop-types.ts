/**
 * The `loop` kind's spec: the definition a `loop` record holds, the
 * run statuses and their transitions, node and criterion kinds. The engine's half (runs, node records, the
 * NodeExecutor interface) is runtime/loops/types.ts, which re-exports this file.
 */

// ---------------------------------------------------------------------------------------------------------------
// Statuses and transitions

/** LIVE_STATUSES are the statuses of a run that is not over. */
export const LIVE_STATUSES = ['queued', 'running', 'watching', 'needs-approval', 'paused'] as const;
/** TERMINAL_STATUSES are the statuses a run never leaves. */
export const TERMINAL_STATUSES = ['done', 'no-op', 'blocked', 'failed', 'exhausted', 'stalled'] as const;
export const LOOP_RUN_STATUSES = [...LIVE_STATUSES, ...TERMINAL_STATUSES] as const;
export type LiveStatus = (typeof LIVE_STATUSES)[number];
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];
export type LoopRunStatus = LiveStatus | TerminalStatus;

/** TRANSITION_CAUSES are the causes a status change names, plus `no_ready_nodes` and `node_failed`. */
export const TRANSITION_CAUSES = [
  'start', 'promote', 'operator_stop', 'goal_replace', 'goal_clear', 'pause_boundary', 'operator_resume', 'approval',
  'gate_rejected', 'contract', 'budget', 'iteration_cap', 'no_progress', 'watch_poll', 'watch_events',
  'coordinator_failure', 'no_ready_nodes', 'node_failed', 'failure_breaker', 'child_loop',
] as const;
export type TransitionCause = (typeof TRANSITION_CAUSES)[number];

/**
 * TRANSITIONS is the run status table: from → the statuses it may move to. A cause listed in ONLY_BY narrows an
 * edge to that cause (`failed` out of queued, needs-approval and paused is an operator stop only).
 */
export const TRANSITIONS: Readonly<Record<LoopRunStatus, readonly LoopRunStatus[]>> = {
  queued: ['running', 'failed'],
  running: ['watching', 'needs-approval', 'paused', ...TERMINAL_STATUSES],
  watching: ['running', 'needs-approval', ...TERMINAL_STATUSES],
  'needs-approval': ['running', 'blocked', 'failed'],
  paused: ['running', 'failed'],
  done: [], 'no-op': [], blocked: [], failed: [], exhausted: [], stalled: [],
};

/** ONLY_BY names the edges of TRANSITIONS that a single cause may take (`from>to` → cause). */
export const ONLY_BY: Readonly<Record<string, TransitionCause>> = {
  'queued>failed': 'operator_stop',
  'needs-approval>failed': 'operator_stop',
  'paused>failed': 'operator_stop',
};

/** canTransition says whether the table allows `from` → `to` for `cause` (the Lua script applies the same table). */
export function canTransition(from: LoopRunStatus, to: LoopRunStatus, cause: TransitionCause): boolean {
  if (!TRANSITIONS[from]?.includes(to)) return false;
  const only = ONLY_BY[`${from}>${to}`];
  return only === undefined || only === cause;
}

export const isTerminal = (s: string): s is TerminalStatus => (TERMINAL_STATUSES as readonly string[]).includes(s);

// ---------------------------------------------------------------------------------------------------------------
// Definition (spec concepts `LoopDefinition`)

/** NODE_CLASSES are the three node classes; a node's class is implied by its kind when omitted. */
export const NODE_CLASSES = ['action', 'control', 'source'] as const;
export type NodeClass = (typeof NODE_CLASSES)[number];
/** RESERVED_ACTION_KINDS are the action kinds the engine knows; any other action kind is a tool id. */
export const RESERVED_ACTION_KINDS = ['run-agent', 'run-loop', 'transform'] as const;
/** CONTROL_KINDS is the closed set of control kinds. */
export const CONTROL_KINDS = ['fan-out', 'collect', 'branch', 'gate', 'sub-loop'] as const;
/** SOURCE_KINDS is the closed set of source kinds. */
export const SOURCE_KINDS = ['input', 'file-import', 'watch-source', 'watch-events'] as const;

/** JOIN_RULES say when a node with several upstreams runs (see JoinRule). */
export const JOIN_RULES = ['wait_all', 'fail_fast', 'best_effort'] as const;
/**
 * JoinRule: `wait_all` (default) runs once every upstream is terminal and none failed (skipped counts as done; a
 * failed upstream fails the node); `fail_fast` fails the node as soon as one upstream fails, without waiting for the
 * rest; `best_effort` runs once every upstream is terminal whatever they ended, skipped only when all were skipped.
 */
export type JoinRule = (typeof JOIN_RULES)[number];

export const CRITERION_TYPES = ['command', 'agent-judge', 'human', 'extension'] as const;
export type CriterionType = (typeof CRITERION_TYPES)[number];
export const VERDICT_POLICIES = ['fixed_passes', 'revise_until_clean'] as const;
export type VerdictPolicy = (typeof VERDICT_POLICIES)[number];
export const VERDICT_OUTCOMES = ['approved', 'rejected', 'awaiting_approval', 'blocked', 'error', 'timeout', 'invalid_output'] as const;
export type VerdictOutcome = (typeof VERDICT_OUTCOMES)[number];
export const ROUTE_ACTIONS = ['continue', 'revise', 'branch', 'halt', 'escalate', 'done', 'next_generation'] as const;
export type RouteAction = (typeof ROUTE_ACTIONS)[number];
/** ON_RESULT_KEYS are the keys of a gate's `on_result` map (each names a RouteAction). */
export const ON_RESULT_KEYS = ['pass', 'approval', 'fail', 'blocked', 'error', 'timeout', 'invalid_output'] as const;
export const APPROVAL_DECISIONS = ['approve', 'request_changes', 'reject'] as const;
export type ApprovalDecision = (typeof APPROVAL_DECISIONS)[number];
export const BUDGET_ON_EXCEEDED = ['halt', 'escalate'] as const;
export type BudgetOnExceeded = (typeof BUDGET_ON_EXCEEDED)[number];
export const REATTEMPT_STRATEGIES = ['failed_only', 'full_body'] as const;
/** NETWORK_MODES are the modes of `network_participation` (a definition's, and a run start's). */
export const NETWORK_MODES = ['local', 'live'] as const;

/** Structural limits of a loop definition. */
export const LOOP_LIMITS = {
  /** Widest fan-out (`max_fan_out`, `max_parallel`). */
  fanOutWidth: 64,
  /** Longest `no_progress.window`, in generations. */
  noProgressWindow: 30,
  /** Consecutive node failures that trip the failure breaker. */
  failureBreaker: 2,
  /** Deepest run-loop ancestry. */
  ancestryDepth: 8,
  /** Hard ceiling of a gate's `max_revisions`. */
  maxRevisions: 10,
  /** Default `max_revisions`. */
  maxRevisionsDefault: 3,
  /** Broken agent-judge answers in a row after which a gate fails open. */
  brokenJudgesFailOpen: 3,
  /** Largest event payload, bytes of JSON. */
  eventPayloadBytes: 16 * 1024,
  /** Largest node output kept in the run, bytes of JSON. */
  outputBytes: 64 * 1024,
  /** Most nodes in one graph. */
  nodes: 256,
  /** Most generations (`iteration_cap`) a run may be given. */
  iterationCap: 1000,
  /** Longest node id. */
  nodeIdLength: 64,
} as const;

/** Criterion is one check of a gate or of the contract's verification (spec `Criterion`). */
export interface Criterion {
  id?: string;
  type: CriterionType;
  /** command: the program and arguments (argv form: a string is split on whitespace, never given to a shell). */
  check?: string | string[];
  /** command: what the exit code must be (default "0"); agent-judge: the answer that approves. */
  expect?: string;
  agent?: string;
  model?: string;
  prompt?: string;
  rubric?: string;
  tool?: string;
  inputs?: Record<string, unknown>;
  [extra: string]: unknown;
}

/** RetryPolicy is a node's `retry`: how many extra attempts after a failure, with what delay between them. */
export interface RetryPolicy {
  /** Extra attempts after the first (default 0). */
  max?: number;
  /** Delay before a retry, a duration ("500ms", "2s"). */
  backoff?: string;
}

/** LoopNode is one node of the graph (spec `Node`; free extra properties are allowed and kept). */
export interface LoopNode {
  /** snake_case, unique in the graph. */
  id: string;
  kind: string;
  /** Implied by the kind when omitted. */
  class?: NodeClass;
  /** Upstream node ids; the same as edges `{from: <upstream>, to: <this id>}` (both forms merge). */
  depends_on?: string[];
  join?: JoinRule;
  /** run-agent: the agent; run-loop: the child loop's name is in `loop`. */
  agent?: string;
  /** run-agent: the prompt template (`{{ .inputs.x }}`, `{{ .nodes.<id>.output }}`, `{{ .item }}`). */
  prompt?: string;
  /** run-loop: the child loop's name (same workspace). */
  loop?: string;
  /** run-loop: start the child and succeed at once instead of waiting for its terminal status. */
  detach?: boolean;
  /** branch: a template whose rendered value names the route; edges out of the branch carry `when: <route>`. */
  condition?: string;
  /** fan-out: a template naming the list to fan out over (`{{ .inputs.files }}`), or a literal list in `params.items`. */
  collection?: string;
  /** input: the run input it reads (default: the node id). */
  input_ref?: string;
  max_fan_out?: number;
  max_parallel?: number;
  batch_size?: number;
  /** gate */
  criteria?: Criterion[];
  verdict_policy?: VerdictPolicy;
  max_revisions?: number;
  /** gate: on_result key → RouteAction. */
  on_result?: Record<string, string>;
  /** transform: `params.output` is the template of the output; tool ids: the tool's arguments. */
  params?: Record<string, unknown>;
  /** A duration ("30s", "5m"); the node's attempt is aborted after it. */
  timeout?: string;
  retry?: RetryPolicy;
  body?: Record<string, unknown>;
  contract?: Record<string, unknown>;
  events?: { kind: string; filter?: string }[];
  filter?: string;
  harvest?: Record<string, unknown>;
  parse?: string;
  pattern?: string;
  produces?: Record<string, unknown>;
  session?: Record<string, unknown>;
  watch?: Record<string, unknown>;
  [extra: string]: unknown;
}

/** LoopEdge is `{from, to}`; `when` on an edge out of a branch names the route that takes it. */
export interface LoopEdge {
  from: string;
  to: string;
  when?: string;
  [extra: string]: unknown;
}

/** LoopInputSpec declares one run input. */
export interface LoopInputSpec {
  type?: string;
  description?: string;
  required?: boolean;
  default?: unknown;
  ref?: { kind: string };
}

/** LoopContract is what a run must achieve and within what budget (spec `LoopDefinition.contract`). */
export interface LoopContract {
  goal?: string;
  definition_of_done?: string;
  /** The definition-of-done gate, evaluated after each generation; none = one generation then done. */
  verification?: Criterion[];
  budget?: { tokens?: number; wall_clock_sec?: number; on_exceeded?: BudgetOnExceeded };
  iteration_cap?: number;
  /** window: generations whose output hash did not change before the run stalls; hash_fields: which outputs count. */
  no_progress?: { window?: number; hash_fields?: string[] };
  stop_when?: string;
  terminal_states?: string[];
  boundaries?: string[];
  constraints?: string[];
  model_defaults?: { worker?: string; judge?: string };
}

/** LoopDefinition is the spec of a `loop` resource record (spec concepts `LoopDefinition`). */
export interface LoopDefinition {
  apiVersion?: string;
  kind?: string;
  meta?: {
    name?: string;
    description?: string;
    version?: number;
    catalog?: { category?: string; keywords?: string[]; use_when?: string };
  };
  inputs?: Record<string, LoopInputSpec>;
  contract?: LoopContract;
  graph: { nodes: LoopNode[]; edges?: LoopEdge[] };
  concurrency?: string;
  network_participation?: { mode?: string };
  start?: { kind: string; inputs?: Record<string, unknown>; input_mapping?: Record<string, string> }[];
  /** Run settings kept with the definition (`PUT /loops/{name}/config`). */
  config?: LoopConfig;
  /** Node positions for the console graph (`PUT /loops/{name}/annotations`). */
  annotations?: LoopAnnotation[];
}

/** LoopAnnotation places a node on the console's canvas. */
export interface LoopAnnotation { node_id: string; x: number; y: number }

/** LoopConfig holds run settings that override the contract's; every field optional. */
export interface LoopConfig {
  human_gate_enabled?: boolean;
  reattempt_strategy?: (typeof REATTEMPT_STRATEGIES)[number];
  enabled_checks_json?: string;
  iteration_cap?: number;
  budget_tokens?: number;
  budget_wall_sec?: number;
  budget_on_exceeded?: BudgetOnExceeded;
  no_progress_window?: number;
  fan_out_width?: number;
  gate_max_revisions?: number;
  model_defaults?: { worker?: string; judge?: string };
}

/** EffectiveConfig is LoopConfig with every value resolved (definition contract, config, start overrides, defaults). */
export interface EffectiveConfig {
  human_gate_enabled: boolean;
  reattempt_strategy: (typeof REATTEMPT_STRATEGIES)[number];
  iteration_cap: number;
  /** 0 = no token budget. */
  budget_tokens: number;
  /** 0 = no wall-clock budget. */
  budget_wall_sec: number;
  budget_on_exceeded: BudgetOnExceeded;
  /** 0 = no stall detection. */
  no_progress_window: number;
  fan_out_width: number;
  gate_max_revisions: number;
  model_defaults: { worker: string; judge: string };
}

/** LintIssue is one finding of the lint, as the 422 body and `validate` return it. */
export interface LintIssue {
  node_id?: string;
  code: string;
  message: string;
  severity: 'error' | 'warning';
}

// ---------------------------------------------------------------------------------------------------------------
// Runs (spec `LoopRun`, `LoopRunDetail`)

/**
 * LOOP_BUS_EVENT_NAMES are the loop family's events on the event bus. NOTE: they are also the hook catalog's names
 * (codecs/hook-binding.ts HOOK_EVENTS): the spec's public notification names have no loop family, so one
 * name serves presets, triggers and hooks, with no `loop.run_*` twin published beside it.
 */
export const LOOP_BUS_EVENT_NAMES = ['loop.run.started', 'loop.run.status_changed', 'loop.run.needs_approval', 'loop.run.completed', 'loop.run.failed'] as const;
