import type { NodeContext, NodeExecutor, NodeOutcome } from '../types.ts';

/**
 * CollectExecutor gathers a fan-out's results: the engine hands it each fanned upstream's per-item results in item
 * order (UpstreamResult.output is the list), and its output maps the upstream ids to those lists (`items` alone
 * when there is one upstream).
 */
export class CollectExecutor implements NodeExecutor {
  readonly kind = 'collect';
  readonly sideEffects = 'exactly-once' as const;

  async run(ctx: NodeContext): Promise<NodeOutcome> {
    const ids = Object.keys(ctx.upstream);
    if (ids.length === 1) return { outcome: 'succeeded', output: { items: ctx.upstream[ids[0]].output ?? [] } };
    return { outcome: 'succeeded', output: Object.fromEntries(ids.map((id) => [id, ctx.upstream[id].output ?? []])) };
  }
}
