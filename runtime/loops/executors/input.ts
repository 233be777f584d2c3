import type { NodeContext, NodeExecutor, NodeOutcome } from '../types.ts';

/** InputExecutor makes a run input a node's output: `input_ref` (default the node id) names the input. */
export class InputExecutor implements NodeExecutor {
  readonly kind = 'input';
  readonly sideEffects = 'exactly-once' as const;

  async run(ctx: NodeContext): Promise<NodeOutcome> {
    const name = ctx.node.input_ref ?? ctx.node.id;
    if (!Object.hasOwn(ctx.inputs, name)) return { outcome: 'failed', error: `run input ${name} is not set` };
    return { outcome: 'succeeded', output: ctx.inputs[name] };
  }
}
