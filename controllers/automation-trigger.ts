import type { SecurityPolicy } from '../runtime/security/policy.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { ResourceRecord } from '../store/types.ts';
import { missingAgent, unresolvedSecrets } from './dependencies.ts';
import { RegistryCache, RegistryController } from './registry-controller.ts';
import type { KindController, ReconcileResult, ResourceKey } from './types.ts';

/**
 * AutomationTriggerController projects `automation.trigger` records into their registry, as every registry kind
 * does, and says honestly whether the trigger can do its job: Degraded `AgentNotFound` when its agent does not
 * resolve in its scope, `SecretNotFound` when a webhook trigger's `webhook_secret_ref` names a vault secret that
 * does not exist, `SecretUnavailable` when its env: ref does not resolve (every delivery would be 503). NOTE: the entry stays projected either way, so the trigger works as soon as the
 * dependency appears; an agent's change re-reconciles it (DEPENDS_ON_AGENTS).
 */
export class AutomationTriggerController implements KindController {
  readonly kind = 'automation.trigger';
  private readonly registry: RegistryController;
  private readonly registries: RegistryCache;

  constructor(private readonly o: { store: ResourceStore; security?: SecurityPolicy }) {
    this.registry = new RegistryController({ kind: this.kind, store: o.store, commandRefusal: o.security && ((k, spec) => o.security!.commandRefusal(k, spec)) });
    this.registries = new RegistryCache(o.store);
  }

  async reconcile(key: ResourceKey, record: ResourceRecord | undefined): Promise<ReconcileResult> {
    const projected = await this.registry.reconcile(key, record);
    if (!record || projected.outcome === 'degraded') return projected;
    const spec = record.spec as { enabled?: boolean; agent_name?: string; webhook_secret_ref?: string };
    if (spec.enabled === false) return projected;
    const secret = this.o.security && await unresolvedSecrets(this.o.security, { webhook_secret_ref: spec.webhook_secret_ref ?? '' });
    if (secret) return { outcome: 'degraded', reason: secret.reason, message: `${secret.message}: every delivery is refused with 503` };
    const agent = await missingAgent(this.registries, spec.agent_name, record.scope);
    if (agent) return { outcome: 'degraded', reason: 'AgentNotFound', message: `${agent}: the trigger's runs would fail` };
    return projected;
  }
}
