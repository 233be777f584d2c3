import type { Criterion, CriterionEvaluator, GateVerdict, NodeContext, NodeExecutor, NodeOutcome } from '../types.ts';

/**
 * HumanCriterion parks the run: its verdict is `awaiting_approval`, and the engine moves the run to
 * `needs-approval` with the gate as `active_gate_id` until someone approves, requests changes or rejects.
 * With `human_gate_enabled: false` in the run's config, a human criterion approves at once.
 */
export class HumanCriterion implements CriterionEvaluator {
  readonly type = 'human';
  readonly sideEffects = 'exactly-once' as const;

  async evaluate(ctx: NodeContext, c: Criterion): Promise<GateVerdict> {
    if (!ctx.config.human_gate_enabled) return { outcome: 'approved', criterion_id: c.id, reason: 'human gates are disabled for this run' };
    return { outcome: 'awaiting_approval', criterion_id: c.id, reason: c.prompt ?? 'waiting for a person to approve' };
  }
}

/**
 * GateExecutor evaluates a gate's criteria in order and stops at the first that does not approve: its verdict is
 * the gate's. The engine maps the verdict to the route (`on_result`, `verdict_policy`, `max_revisions`). A criterion
 * type with no evaluator is an `error` verdict naming it, never a silent pass.
 */
export class GateExecutor implements NodeExecutor {
  readonly kind = 'gate';
  private readonly evaluators = new Map<string, CriterionEvaluator>();

  constructor(evaluators: CriterionEvaluator[] = [new HumanCriterion()]) {
    for (const e of evaluators) this.register(e);
  }

  /** The weakest guarantee of its evaluators: a command or judge criterion may repeat after a crash. */
  get sideEffects(): NodeExecutor['sideEffects'] {
    return [...this.evaluators.values()].some((e) => e.sideEffects !== 'exactly-once') ? 'at-least-once' : 'exactly-once';
  }

  register(e: CriterionEvaluator): this {
    if (this.evaluators.has(e.type)) throw new Error(`gate criterion type ${e.type} is registered twice`);
    this.evaluators.set(e.type, e);
    return this;
  }

  has(type: string): boolean {
    return this.evaluators.has(type);
  }

  async run(ctx: NodeContext): Promise<NodeOutcome> {
    let tokens = 0;
    let verdict: GateVerdict = { outcome: 'approved', reason: 'no criteria' };
    for (const c of ctx.node.criteria ?? []) {
      const ev = this.evaluators.get(c.type);
      if (!ev) { verdict = { outcome: 'error', criterion_id: c.id, reason: `no evaluator for criterion type ${c.type}` }; break; }
      const v = await ev.evaluate(ctx, c);
      tokens += v.tokens ?? 0;
      verdict = { outcome: v.outcome, criterion_id: v.criterion_id ?? c.id, reason: v.reason, findings: v.findings };
      if (verdict.outcome !== 'approved') break;
    }
    return { outcome: 'succeeded', output: { verdict: verdict.outcome, reason: verdict.reason ?? '' }, verdict, tokens };
  }
}
