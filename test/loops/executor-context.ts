import { randomBytes } from 'node:crypto';
import type { EffectiveConfig, LoopNode, NodeContext } from '../../runtime/loops/types.ts';

/** CONFIG is a run's resolved settings as the executor tests give them. */
export const CONFIG: EffectiveConfig = {
  human_gate_enabled: true, reattempt_strategy: 'failed_only', iteration_cap: 10, budget_tokens: 0, budget_wall_sec: 0, budget_on_exceeded: 'halt',
  no_progress_window: 0, fan_out_width: 64, gate_max_revisions: 3, model_defaults: { worker: '', judge: '' },
};

/**
 * contextOf builds the NodeContext the engine hands an executor for one attempt at a node, in a workspace, with
 * `emitted` collecting its channel messages. Executor tests call executors directly with it; the engine tests drive
 * the same executors through runs.
 */
export function contextOf(workspaceId: string, node: LoopNode, more: Partial<NodeContext> = {}): NodeContext & { emitted: [string, Record<string, unknown>][]; reported: number[] } {
  const emitted: [string, Record<string, unknown>][] = [];
  const reported: number[] = [];
  const runId = more.run?.id ?? `lr-${randomBytes(6).toString('hex')}`;
  const inputs = more.inputs ?? {};
  return {
    run: { id: runId, workspace_id: workspaceId, loop_name: 'test_loop', parent_loop_run_id: '', ancestry: ['test_loop'], started_by_kind: 'operator', started_by_ref: 'test' },
    key: { runId, generation: 1, nodeId: node.id, itemIndex: -1 },
    definition: { graph: { nodes: [node] } },
    config: CONFIG, node, attempt: 1, revision: 0, inputs, upstream: {},
    scope: { inputs, nodes: {}, run: { id: runId } },
    signal: new AbortController().signal,
    reportTokens: async (n) => { reported.push(n); },
    emit: async (kind, payload) => { emitted.push([kind, payload]); },
    ...more,
    emitted, reported,
  };
}
