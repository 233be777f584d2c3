import type { NodeExecutor } from '../types.ts';
import { BranchExecutor } from './branch.ts';
import { CollectExecutor } from './collect.ts';
import { FanOutExecutor } from './fan-out.ts';
import { GateExecutor, HumanCriterion } from './gate.ts';
import { InputExecutor } from './input.ts';
import { RunLoopExecutor } from './run-loop.ts';
import { TransformExecutor } from './transform.ts';

export { BranchExecutor, CollectExecutor, FanOutExecutor, GateExecutor, HumanCriterion, InputExecutor, RunLoopExecutor, TransformExecutor };

/**
 * ExecutorRegistry maps a node kind to the executor that runs it. The engine asks it for every node; the lint asks
 * `has` (an action kind that is neither registered nor a tool id is `unknown_action_kind`). A kind registered twice
 * is a wiring mistake and throws.
 */
export class ExecutorRegistry {
  private readonly byKind = new Map<string, NodeExecutor>();
  /** Runs any action kind that no executor claims (tool ids through the tool runtime), when one is set. */
  private fallback?: NodeExecutor;

  constructor(executors: NodeExecutor[] = []) {
    for (const e of executors) this.register(e);
  }

  register(e: NodeExecutor): this {
    if (this.byKind.has(e.kind)) throw new Error(`loop node kind ${e.kind} is registered twice`);
    this.byKind.set(e.kind, e);
    return this;
  }

  /** setToolFallback sets the executor of tool-id action nodes (kinds that are not reserved). */
  setToolFallback(e: NodeExecutor): this {
    this.fallback = e;
    return this;
  }

  has(kind: string): boolean {
    return this.byKind.has(kind);
  }

  /** get answers the executor of a kind (the tool fallback for an unregistered action kind), or undefined. */
  get(kind: string): NodeExecutor | undefined {
    return this.byKind.get(kind) ?? this.fallback;
  }

  kinds(): string[] {
    return [...this.byKind.keys()].sort();
  }
}

/**
 * builtinExecutors are the kinds that need nothing outside the run: input, transform, branch, fan-out, collect and
 * gate (human criteria; other criterion types register on the gate: `registry.get('gate') as GateExecutor`).
 * run-loop needs the engine (executors/run-loop.ts) and is registered by the composition root.
 */
export function builtinExecutors(): NodeExecutor[] {
  return [new InputExecutor(), new TransformExecutor(), new BranchExecutor(), new FanOutExecutor(), new CollectExecutor(), new GateExecutor([new HumanCriterion()])];
}
