import { createHash } from 'node:crypto';
import { renderValue } from '../template.ts';
import type { LoopEngineControl, NodeContext, NodeExecutor, NodeOutcome } from '../types.ts';

/** childRunId derives a child run's id from the node execution attempt, so a repeated attempt finds the same child. */
export function childRunId(ctx: Pick<NodeContext, 'key' | 'attempt' | 'revision'>): string {
  const h = createHash('sha256').update(JSON.stringify([ctx.key.runId, ctx.key.generation, ctx.key.nodeId, ctx.key.itemIndex, ctx.attempt, ctx.revision])).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/**
 * RunLoopExecutor starts a child run of the loop named by `loop` (same workspace; inputs from `params.inputs`,
 * templated) and waits for its terminal status (the node is `waiting`, a visible wait, until the child ends: done
 * or no-op succeed, anything else fails), or with `detach: true` succeeds at once with the child's id. The engine
 * refuses a child deeper than 8 or a loop already in its own ancestry (the node fails naming why).
 */
export class RunLoopExecutor implements NodeExecutor {
  readonly kind = 'run-loop';
  readonly sideEffects = 'exactly-once' as const;

  constructor(private readonly control: () => LoopEngineControl) {}

  async run(ctx: NodeContext): Promise<NodeOutcome> {
    const name = ctx.node.loop;
    if (!name) return { outcome: 'failed', error: `run-loop ${ctx.node.id} names no loop (field "loop")` };
    const inputs = renderValue(ctx.node.params?.inputs ?? {}, ctx.scope);
    let child;
    try {
      child = await this.control().startRun({
        workspace_id: ctx.run.workspace_id, loop_name: name, inputs: inputs as Record<string, unknown>, parent_loop_run_id: ctx.run.id,
        parent_node: ctx.node.detach ? undefined : ctx.key, run_id: childRunId(ctx),
        started_by_kind: 'loop_run', started_by_ref: ctx.run.id, started_origin_kind: 'loop', started_origin_ref: `${ctx.run.id}/${ctx.node.id}`,
      });
    } catch (err) {
      return { outcome: 'failed', error: `run-loop ${ctx.node.id}: ${(err as Error).message}` };
    }
    if (ctx.node.detach) return { outcome: 'succeeded', output: { child_loop_run_id: child.id, detached: true }, child_loop_run_id: child.id };
    return { outcome: 'waiting', wait: { kind: 'child_loop', ref: child.id }, child_loop_run_id: child.id };
  }
}
