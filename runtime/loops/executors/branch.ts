import { renderValue } from '../template.ts';
import type { NodeContext, NodeExecutor, NodeOutcome } from '../types.ts';

/**
 * BranchExecutor renders `condition` to a route name; the engine takes the edges out of the branch whose `when`
 * equals it (and those without `when`) and skips the targets of the others, so a route not taken is an outcome,
 * never a wait.
 */
export class BranchExecutor implements NodeExecutor {
  readonly kind = 'branch';
  readonly sideEffects = 'exactly-once' as const;

  async run(ctx: NodeContext): Promise<NodeOutcome> {
    const v = renderValue(ctx.node.condition ?? '', ctx.scope);
    const route = v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
    return { outcome: 'succeeded', output: { route }, route };
  }
}
