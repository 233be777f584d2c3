import { decodeSpec } from '../codecs/index.ts';
import { eventCondition } from '../runtime/hooks/catalog.ts';
import type { SecurityPolicy } from '../runtime/security/policy.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { ResourceRecord } from '../store/types.ts';
import { secretEnvProblems } from './dependencies.ts';
import { RegistryController } from './registry-controller.ts';
import type { KindController, ReconcileResult, ResourceKey } from './types.ts';

/**
 * HookBindingController projects `hook.binding` records into the hook registry (as every registry kind does)
 * and says in status whether the binding can ever run: condition `EventEmitted` is False with reason
 * `EventNotEmitted` when the service does not publish its event yet (runtime/hooks/catalog.ts NOT_EMITTED), or
 * `SyncPointNotGated` for a sync binding on an event that is published but not gated. The binding is still
 * accepted and projected (Ready): it runs as soon as its event is emitted.
 */
export class HookBindingController implements KindController {
  readonly kind = 'hook.binding';
  private readonly registry: RegistryController;

  constructor(o: { store: ResourceStore; security?: SecurityPolicy }) {
    const { security } = o;
    this.registry = new RegistryController({
      kind: this.kind, store: o.store, commandRefusal: security && ((k, spec) => security.commandRefusal(k, spec)),
      // NOTE: a subprocess hook whose secret_env does not resolve would fail every run: its status says so first.
      dependencies: security && ((spec) => secretEnvProblems(security, spec)),
    });
  }

  async reconcile(key: ResourceKey, record: ResourceRecord | undefined): Promise<ReconcileResult> {
    const projected = await this.registry.reconcile(key, record);
    if (!record) return projected;
    const decoded = decodeSpec(this.kind, record.spec, { scope: record.scope });
    if (!decoded.ok) return projected;
    const spec = decoded.spec as { event: string; mode: string };
    const condition = eventCondition(spec.event, spec.mode);
    const message = projected.outcome === 'ready' && condition.status === 'False' ? `${projected.message}; ${condition.message}` : projected.message;
    return { ...projected, message, conditions: [...(projected.conditions ?? []), condition] };
  }
}
