import type { RunView } from './planner.ts';
import {
  LOOP_LIMITS, type EffectiveConfig, type LoopConfig, type LoopDefinition, type LoopRun, type LoopRunRef, type LoopRunStatus, type NodeKey,
} from './types.ts';

/** DEFAULT_ITERATION_CAP is the generations a run may take when neither the contract nor the config caps them. */
export const DEFAULT_ITERATION_CAP = 10;

/**
 * effectiveConfig layers a run's settings: defaults, then the contract, then the definition's config, then the start
 * request's config_overrides (each only where it sets a value).
 */
export function effectiveConfig(def: LoopDefinition, overrides: LoopConfig = {}): EffectiveConfig {
  const c = def.contract ?? {};
  const out: EffectiveConfig = {
    human_gate_enabled: true, reattempt_strategy: 'failed_only',
    iteration_cap: c.iteration_cap ?? DEFAULT_ITERATION_CAP,
    budget_tokens: c.budget?.tokens ?? 0, budget_wall_sec: c.budget?.wall_clock_sec ?? 0, budget_on_exceeded: c.budget?.on_exceeded ?? 'halt',
    no_progress_window: c.no_progress?.window ?? 0, fan_out_width: LOOP_LIMITS.fanOutWidth, gate_max_revisions: LOOP_LIMITS.maxRevisionsDefault,
    model_defaults: { worker: c.model_defaults?.worker ?? '', judge: c.model_defaults?.judge ?? '' },
  };
  for (const layer of [def.config ?? {}, overrides]) {
    for (const [k, v] of Object.entries(layer)) {
      if (v === undefined || k === 'enabled_checks_json') continue;
      if (k === 'model_defaults') out.model_defaults = { ...out.model_defaults, ...(v as object) };
      else (out as unknown as Record<string, unknown>)[k] = v;
    }
  }
  return out;
}

const num = (v: string | undefined) => (v === undefined || v === '' ? 0 : Number(v));
const json = <T>(v: string | undefined, dflt: T): T => {
  if (!v) return dflt;
  try { return JSON.parse(v) as T; } catch { return dflt; }
};

/** runFromHash is the LoopRun the routes return, from a run's stored hash. */
export function runFromHash(h: Record<string, string>): LoopRun {
  return {
    id: h.id, workspace_id: h.workspace_id, loop_name: h.loop_name, status: h.status as LoopRunStatus, generation: num(h.generation),
    active_gate_id: h.active_gate_id ?? '', budget_approval_seq: num(h.budget_approval_seq), budget_on_exceeded: (h.budget_on_exceeded || 'halt') as LoopRun['budget_on_exceeded'],
    budget_tokens: num(h.budget_tokens), budget_wall_sec: num(h.budget_wall_sec), tokens_used: num(h.tokens_used), iteration_cap: num(h.iteration_cap),
    consecutive_failures: num(h.consecutive_failures), created_at: h.created_at, started_at: h.started_at ?? '', last_progress_at: h.last_progress_at ?? '',
    definition_digest: h.definition_digest, definition_version: num(h.definition_version), inputs: json(h.inputs, {}),
    parent_loop_run_id: h.parent_loop_run_id ?? '', pause_requested: h.pause_requested === '1', reattempt_strategy: h.reattempt_strategy,
    resolved_network_participation: json(h.resolved_network_participation, { mode: 'local', source: 'explicit_request', version: 'network-participation/v1' }),
    start_metadata: json(h.start_metadata, {}), started_by_kind: h.started_by_kind ?? '', started_by_ref: h.started_by_ref ?? '',
    started_origin_kind: h.started_origin_kind ?? '', started_origin_ref: h.started_origin_ref ?? '',
    status_cause: h.status_cause ?? '', status_reason: h.status_reason ?? '', ended_at: h.ended_at ?? '',
  };
}

/** runViewFromHash is the planner's view of a run's hash. */
export function runViewFromHash(h: Record<string, string>): RunView {
  return {
    id: h.id, workspace_id: h.workspace_id, loop_name: h.loop_name, status: h.status, generation: num(h.generation),
    pause_requested: h.pause_requested === '1', active_gate_id: h.active_gate_id ?? '', tokens_used: num(h.tokens_used),
    consecutive_failures: num(h.consecutive_failures), budget_approval_seq: num(h.budget_approval_seq), started_ms: num(h.started_ms), waited_ms: num(h.waited_ms),
    config: json(h.config, {} as EffectiveConfig), inputs: json(h.inputs, {}), next_generation_requested: num(h.next_generation_requested),
    progress_generation: num(h.progress_generation), progress_hash: h.progress_hash ?? '', no_progress_count: num(h.no_progress_count),
    boundary: json<RunView['boundary']>(h.boundary, undefined),
  };
}

/** runRefFromHash is what an executor learns of its run. */
export function runRefFromHash(h: Record<string, string>): LoopRunRef {
  return {
    id: h.id, workspace_id: h.workspace_id, loop_name: h.loop_name, parent_loop_run_id: h.parent_loop_run_id ?? '',
    ancestry: json<string[]>(h.ancestry, [h.loop_name]), started_by_kind: h.started_by_kind ?? '', started_by_ref: h.started_by_ref ?? '',
    agent_session_id: agentSessionOf(h),
  };
}

/**
 * agentSessionOf is the agent session a stored run acts for (LoopRunRef.agent_session_id). NOTE: a run stored before
 * the field was kept acts for the session that started it, if one did.
 */
export function agentSessionOf(h: Record<string, string>): string {
  return h.agent_session_id ?? (h.started_by_kind === 'agent_session' ? h.started_by_ref ?? '' : '');
}

/** parentNodeOf reads the run-loop node a child run completes when it ends. */
export const parentNodeOf = (h: Record<string, string>): NodeKey | undefined => json<NodeKey | undefined>(h.parent_node, undefined);

/** clipPayload keeps an event payload within 16 KiB: long strings are cut, and a payload still too big keeps its small fields. */
export function payloadJson(p: Record<string, unknown>): string {
  const s = JSON.stringify(p, (_, v) => (typeof v === 'string' && v.length > 4096 ? `${v.slice(0, 4096)}…(${v.length - 4096} more)` : v));
  if (Buffer.byteLength(s) <= LOOP_LIMITS.eventPayloadBytes) return s;
  const small = Object.fromEntries(Object.entries(p).filter(([, v]) => typeof v !== 'object' || v === null));
  return JSON.stringify({ ...small, truncated: true });
}
