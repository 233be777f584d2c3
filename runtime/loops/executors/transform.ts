import { renderValue } from '../template.ts';
import type { NodeContext, NodeExecutor, NodeOutcome } from '../types.ts';

/**
 * TransformExecutor computes `params.output` (a JSON template over the node's scope) as the node's output. It is a
 * pure function of the run's state, so the engine's CAS on the node's attempt makes its output exactly once.
 */
export class TransformExecutor implements NodeExecutor {
  readonly kind = 'transform';
  readonly sideEffects = 'exactly-once' as const;

  async run(ctx: NodeContext): Promise<NodeOutcome> {
    const params = ctx.node.params ?? {};
    if (params.fail === true) return { outcome: 'failed', error: typeof params.error === 'string' ? params.error : 'transform failed (params.fail)' };
    const output = Object.hasOwn(params, 'output') ? renderValue(params.output, ctx.scope) : null;
    return { outcome: 'succeeded', output };
  }
}
