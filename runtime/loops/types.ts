// NOTE: the definition half (statuses, transitions, node kinds, LoopDefinition, LintIssue) is the `loop` kind's spec and
// lives with its codec (codecs/loop-types.ts); this half is the engine's.
export * from '../../codecs/loop-types.ts';
import type {
  BudgetOnExceeded, Criterion, CriterionType, EffectiveConfig, LoopConfig, LoopDefinition, LoopNode, LoopRunStatus, VerdictOutcome,
} from '../../codecs/loop-types.ts';
/** LoopRun is a run as the routes return it. */
export interface LoopRun {
  id: string;
  workspace_id: string;
  loop_name: string;
  status: LoopRunStatus;
  generation: number;
  active_gate_id: string;
  budget_approval_seq: number;
  budget_on_exceeded: BudgetOnExceeded;
  budget_tokens: number;
  budget_wall_sec: number;
  tokens_used: number;
  iteration_cap: number;
  consecutive_failures: number;
  created_at: string;
  started_at: string;
  last_progress_at: string;
  definition_digest: string;
  definition_version: number;
  inputs: Record<string, unknown>;
  parent_loop_run_id: string;
  pause_requested: boolean;
  reattempt_strategy: string;
  resolved_network_participation: { mode: string; source: string; version: string };
  start_metadata: Record<string, unknown>;
  started_by_kind: string;
  started_by_ref: string;
  started_origin_kind: string;
  started_origin_ref: string;
  /** The cause of the last status change, and for a failure what failed (e.g. no_ready_nodes naming the waiters). */
  status_cause?: string;
  status_reason?: string;
  ended_at?: string;
}

/** NODE_STATES are the states of one node execution (a node, generation and item index). */
export const NODE_STATES = ['pending', 'queued', 'running', 'waiting', 'succeeded', 'failed', 'skipped'] as const;
export type NodeState = (typeof NODE_STATES)[number];
export type NodeOutcomeKind = 'succeeded' | 'failed' | 'skipped';

/** LoopRunEventKind are the event kinds of a run. */
export const LOOP_EVENT_KINDS = [
  'node_running', 'node_succeeded', 'node_failed', 'node_skipped', 'node_waiting', 'gate_verdict', 'generation_started',
  'channel_msg', 'token_tick', 'needs_approval', 'status_changed',
] as const;
export type LoopEventKind = (typeof LOOP_EVENT_KINDS)[number];

/** LoopRunEvent is one row of a run's event stream. */
export interface LoopRunEvent {
  id: string;
  seq: number;
  at: string;
  kind: LoopEventKind | string;
  loop_run_id: string;
  workspace_id: string;
  payload: Record<string, unknown>;
}

// ---------------------------------------------------------------------------------------------------------------
// The executor interface

/** GateVerdict is what a gate (or a criterion of one) decided. */
export interface GateVerdict {
  outcome: VerdictOutcome;
  /** Which criterion decided, when one did. */
  criterion_id?: string;
  reason?: string;
  /** Free-form findings handed to the revised upstream as `feedback`. */
  findings?: unknown;
}

/** UpstreamResult is what a node sees of one upstream node: its outcome and output (a collect: outputs in item order). */
export interface UpstreamResult {
  outcome: NodeOutcomeKind;
  output?: unknown;
  error?: string;
}

/**
 * NodeWait tells the engine that the node is waiting for something outside the run (a child loop's terminal status,
 * an event on the bus, a tool approval). The node stays `waiting` (a visible wait) until someone calls
 * `LoopEngineControl.completeWaiting` with the node's key and its outcome.
 */
export interface NodeWait {
  kind: 'child_loop' | 'event' | 'approval' | string;
  /** What it waits on (a child run id, an event name, an approval id), shown in the run and in no_ready_nodes. */
  ref: string;
  detail?: Record<string, unknown>;
}

/** NodeKey names one node execution: the run, the generation, the node and the fan-out item (-1 when not fanned). */
export interface NodeKey {
  runId: string;
  generation: number;
  nodeId: string;
  itemIndex: number;
}

/**
 * NodeOutcome is what an executor returns for one attempt. `failed` is retried per the node's retry policy
 * (throwing counts as `failed` with the error's message); `waiting` parks the node (see NodeWait).
 */
export interface NodeOutcome {
  outcome: NodeOutcomeKind | 'waiting';
  /** JSON; at most LOOP_LIMITS.outputBytes once serialised. */
  output?: unknown;
  error?: string;
  /** Tokens used by this attempt (added to the run's tokens_used if not already reported through reportTokens). */
  tokens?: number;
  /** Gates: the verdict. `awaiting_approval` parks the run in `needs-approval` with this node as the active gate. */
  verdict?: GateVerdict;
  /** Branch: the route taken; edges out of the node whose `when` differs are not taken (their targets skip). */
  route?: string;
  /** Fan-out: the items; each downstream node up to the matching collect runs once per item, in item order. */
  items?: unknown[];
  /** run-loop: the child run started. */
  child_loop_run_id?: string;
  wait?: NodeWait;
}

/** LoopRunRef is what an executor may know of the run it serves. */
export interface LoopRunRef {
  id: string;
  workspace_id: string;
  loop_name: string;
  parent_loop_run_id: string;
  /** Loop names from the root run down to this run, this run's last (run-loop ancestry). */
  ancestry: string[];
  started_by_kind: string;
  started_by_ref: string;
  /**
   * The agent session the run acts for: the one that started it, or that started the run-loop ancestor it descends
   * from ('' or absent: an operator's run). Its tool nodes call tools as that session, and the sessions its agent
   * nodes open are held to that session's tool policy too.
   */
  agent_session_id?: string;
}

/** NodeContext is everything an executor gets for one attempt at one node execution. */
export interface NodeContext {
  run: LoopRunRef;
  key: NodeKey;
  /** The executed definition (the snapshot the run started with) and the resolved run settings. */
  definition: LoopDefinition;
  config: EffectiveConfig;
  node: LoopNode;
  /** 1-based; a BullMQ retry after a crash reuses the attempt only if it never recorded a start. */
  attempt: number;
  /** How many times a gate sent this node back (0 the first time), and the gate's findings when it did. */
  revision: number;
  feedback?: unknown;
  /**
   * Set when an operator approved this node's wait for approval and the node runs again: a tool call that needed
   * approval (executors/tool.ts waits with `detail.rerun: true`) may now go through.
   */
  approval?: { decision: 'approve'; gate_id: string; /** The input digest approved (the call goes through only with that input). */ input_digest?: string };
  /** Fan-out: the item this execution serves (itemIndex ≥ 0). */
  item?: unknown;
  /** The run's resolved inputs. */
  inputs: Record<string, unknown>;
  /** Every upstream node's result by node id (a fanned upstream of the same item: that item's result). */
  upstream: Record<string, UpstreamResult>;
  /** The template scope (`{{ .inputs.x }}`, `{{ .nodes.<id>.output }}`, `{{ .item }}`, `{{ .run.id }}`). */
  scope: Record<string, unknown>;
  /** Aborted on stop, on the node's timeout and on shutdown. */
  signal: AbortSignal;
  /** Counts tokens against the run's budget at once (so a long agent turn can be halted by the budget). */
  reportTokens(tokens: number): Promise<void>;
  /** Appends a `channel_msg` event to the run's stream (payload ≤ 16 KiB). */
  emit(kind: 'channel_msg' | string, payload: Record<string, unknown>): Promise<void>;
}

/**
 * NodeExecutor runs one kind of node. `sideEffects` documents what a crash mid-attempt does: `at-least-once` kinds
 * (tools, agents, commands) may repeat their effect when a worker dies after acting but before the engine recorded
 * the outcome; `exactly-once` kinds have no effect outside the run's own state, which the engine records once by CAS.
 */
export interface NodeExecutor {
  kind: string;
  sideEffects: 'exactly-once' | 'at-least-once' | 'at-most-once';
  run(ctx: NodeContext): Promise<NodeOutcome>;
}

/**
 * LoopEngineControl is what executors that wait or start runs reach of the engine (given to them at construction
 * by the composition root, after the engine exists).
 */
export interface LoopEngineControl {
  /** Starts a run (run-loop): checks ancestry depth and cycles, answers the new run. */
  startRun(req: StartRunRequest): Promise<LoopRun>;
  /** Reads a run, or undefined. */
  getRun(runId: string): Promise<LoopRun | undefined>;
  /** Ends a waiting node with its outcome; a no-op (false) when it is no longer waiting (exactly once). */
  completeWaiting(key: NodeKey, outcome: Omit<NodeOutcome, 'wait'> & { outcome: NodeOutcomeKind }): Promise<boolean>;
}

/** StartRunRequest is what starting a run takes (the start route's body plus who starts it). */
export interface StartRunRequest {
  workspace_id: string;
  loop_name: string;
  inputs?: Record<string, unknown>;
  parent_loop_run_id?: string;
  config_overrides?: LoopConfig;
  network_participation?: { mode?: string };
  started_by_kind?: string;
  started_by_ref?: string;
  started_origin_kind?: string;
  started_origin_ref?: string;
  start_metadata?: Record<string, unknown>;
  /** For run-loop: the parent node's key, so the child's end completes it. */
  parent_node?: NodeKey;
  /** A run id chosen by the caller (run-loop derives it from its node execution, so a repeated attempt finds the same child). */
  run_id?: string;
}

/**
 * CriterionEvaluator checks one gate criterion of a type (`command`, `agent-judge`, `human`, …); the gate executor
 * (executors/gate.ts) runs the node's criteria in order through the evaluators registered for their types.
 */
export interface CriterionEvaluator {
  type: CriterionType | string;
  sideEffects: NodeExecutor['sideEffects'];
  evaluate(ctx: NodeContext, criterion: Criterion): Promise<GateVerdict & { tokens?: number }>;
}
