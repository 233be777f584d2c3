import type { LoopDefinition } from '../runtime/loops/types.ts';
import type { SecurityPolicy } from '../runtime/security/policy.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { ResourceRecord } from '../store/types.ts';
import { missingAgent } from './dependencies.ts';
import { RegistryCache, RegistryController } from './registry-controller.ts';
import type { KindController, ReconcileResult, ResourceKey } from './types.ts';

/**
 * LoopController projects `loop` records into their registry, as every registry kind does, and says honestly
 * whether the loop can run: Degraded `AgentNotFound` when a run-agent node or an agent-judge criterion names an agent
 * that does not resolve in the loop's workspace (or globally), `LoopNotFound` when a run-loop node names a loop the
 * workspace does not define. NOTE: the entry stays projected either way, so runs work as soon as the dependency
 * appears; an agent's change re-reconciles every loop (DEPENDS_ON_AGENTS), a loop's change every loop.
 */
export class LoopController implements KindController {
  readonly kind = 'loop';
  private readonly registry: RegistryController;
  private readonly registries: RegistryCache;

  constructor(private readonly o: { store: ResourceStore; security?: SecurityPolicy; onChange?: () => Promise<void> }) {
    this.registry = new RegistryController({ kind: this.kind, store: o.store, onChange: o.onChange, commandRefusal: o.security && ((k, spec) => o.security!.commandRefusal(k, spec)) });
    this.registries = new RegistryCache(o.store);
  }

  async reconcile(key: ResourceKey, record: ResourceRecord | undefined): Promise<ReconcileResult> {
    const projected = await this.registry.reconcile(key, record);
    if (!record || projected.outcome === 'degraded') return projected;
    const def = record.spec as LoopDefinition;
    const agents = new Set<string>();
    for (const n of def.graph.nodes) {
      if (n.kind === 'run-agent' && n.agent) agents.add(n.agent);
      for (const c of n.criteria ?? []) if (c.type === 'agent-judge' && c.agent) agents.add(c.agent);
    }
    for (const c of def.contract?.verification ?? []) if (c.type === 'agent-judge' && c.agent) agents.add(c.agent);
    for (const name of [...agents].sort()) {
      const why = await missingAgent(this.registries, name, record.scope);
      if (why) return { outcome: 'degraded', reason: 'AgentNotFound', message: `${why}: runs of this loop would fail at that node` };
    }
    const children = [...new Set(def.graph.nodes.filter((n) => n.kind === 'run-loop' && n.loop).map((n) => n.loop!))].sort();
    if (children.length) {
      const names = new Set((await this.o.store.list({ kind: 'loop', scope: record.scope })).map((r) => (r.spec as LoopDefinition).meta?.name ?? r.id));
      const missing = children.filter((c) => !names.has(c));
      if (missing.length) return { outcome: 'degraded', reason: 'LoopNotFound', message: `run-loop names ${missing.map((m) => `"${m}"`).join(', ')}, not a loop of workspace ${record.scope.id}` };
    }
    return projected;
  }
}
