import { renderValue } from '../template.ts';
import { LOOP_LIMITS, type NodeContext, type NodeExecutor, type NodeOutcome } from '../types.ts';

/**
 * FanOutExecutor resolves the list to fan out over (`collection` template, or `params.items`); each node downstream
 * of it up to the matching `collect` then runs once per item. A list wider than the node's `max_fan_out` (at most
 * 64, and the run's `fan_out_width`) fails the node rather than silently truncating.
 */
export class FanOutExecutor implements NodeExecutor {
  readonly kind = 'fan-out';
  readonly sideEffects = 'exactly-once' as const;

  async run(ctx: NodeContext): Promise<NodeOutcome> {
    const src = ctx.node.collection !== undefined ? renderValue(ctx.node.collection, ctx.scope) : renderValue(ctx.node.params?.items, ctx.scope);
    if (!Array.isArray(src)) return { outcome: 'failed', error: `fan-out ${ctx.node.id}: the collection is not a list` };
    const width = Math.min(ctx.node.max_fan_out ?? LOOP_LIMITS.fanOutWidth, ctx.config.fan_out_width, LOOP_LIMITS.fanOutWidth);
    if (src.length > width) return { outcome: 'failed', error: `fan-out ${ctx.node.id}: ${src.length} items exceed the width ${width}` };
    return { outcome: 'succeeded', output: { count: src.length }, items: src };
  }
}
