import { decodeSpec } from '../codecs/index.ts';
import { WEBHOOK_PROVIDER, type BridgeInstanceSpec, type WebhookProviderConfig } from '../codecs/bridge-instance.ts';
import { healthUrlOf, probeOutcome, resolveWebhookSecrets, WebhookClient, webhookHeaders, type WebhookResponse } from '../runtime/notifications/webhook.ts';
import type { SecurityPolicy } from '../runtime/security/policy.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { ResourceRecord, ResourceStatus } from '../store/types.ts';
import { RegistryController } from './registry-controller.ts';
import type { KindController, ReconcileResult, ResourceKey } from './types.ts';

/** The first and the longest wait before looking again at an unreachable receiver; a probe's deadline. */
const MIN_REQUEUE_MS = 1_000;
const MAX_REQUEUE_MS = 60_000;
const PROBE_TIMEOUT_MS = 3_000;

/** BridgeHooks is what delivery gives the bridge controller (NotificationRuntime.bridgeHooks). */
export interface BridgeHooks {
  /** How often a Connected bridge is probed again, so its condition follows the receiver. */
  healthIntervalMs?: number;
  /** Called when a bridge's receiver answers again after it did not: retry its waiting deliveries now. */
  onConnected?: (bridgeId: string) => Promise<void>;
  /** Called when a bridge is deleted: its waiting deliveries end now (failed, the bridge is gone), not at their next retry. */
  onDeleted?: (bridgeId: string) => Promise<void>;
}

/** BridgeInstanceControllerOptions configures a BridgeInstanceController. */
export interface BridgeInstanceControllerOptions {
  store: ResourceStore;
  security: SecurityPolicy;
  hooks?: BridgeHooks;
  /** probe observes one receiver; a HEAD through a WebhookClient unless a caller passes its own. */
  probe?: (url: string, headers: Record<string, string>) => Promise<WebhookResponse>;
}

/**
 * BridgeInstanceController reconciles `bridge.instance` records: it projects the record into the registry (the
 * delivery worker reads bridges from there) and, for an enabled bridge of the built-in webhook provider, probes
 * the receiver and reports a `Connected` condition: True (Ready, looked at again every healthIntervalMs) or False
 * (Degraded `BridgeUnreachable`, looked at again with a backoff). A disabled bridge is not probed; a bridge of a
 * provider that is not installed is projected but reports Connected False (`ProviderNotInstalled`).
 */
export class BridgeInstanceController implements KindController {
  readonly kind = 'bridge.instance';
  private readonly registry: RegistryController;
  private readonly probe: (url: string, headers: Record<string, string>) => Promise<WebhookResponse>;

  constructor(private readonly o: BridgeInstanceControllerOptions) {
    this.registry = new RegistryController({ kind: this.kind, store: o.store });
    const client = new WebhookClient(o.security.egress);
    this.probe = o.probe ?? ((url, headers) => client.probe(url, headers, PROBE_TIMEOUT_MS));
  }

  async reconcile(key: ResourceKey, record: ResourceRecord | undefined, status?: ResourceStatus): Promise<ReconcileResult> {
    const projected = await this.registry.reconcile(key, record);
    if (!record) await this.o.hooks?.onDeleted?.(key.id);
    if (!record || projected.outcome === 'degraded') return projected;
    const decoded = decodeSpec(this.kind, record.spec, { scope: record.scope });
    if (!decoded.ok) return projected;
    const spec = decoded.spec as BridgeInstanceSpec & { enabled: boolean; extension_name: string; provider_config?: WebhookProviderConfig };
    if (!spec.enabled) return notConnected('Disabled', 'the bridge is disabled; it delivers nothing');
    if (spec.extension_name !== WEBHOOK_PROVIDER || !spec.provider_config) {
      // NOTE: Degraded, not only Connected=False: a bridge nothing can deliver through cannot do its job.
      const message = `bridge provider "${spec.extension_name}" is not installed; only the built-in webhook provider delivers`;
      return { outcome: 'degraded', reason: 'ProviderNotInstalled', message, conditions: [{ type: 'Connected', status: 'False', reason: 'ProviderNotInstalled', message }] };
    }
    const cfg = spec.provider_config;
    const secrets = await resolveWebhookSecrets(cfg, this.o.security);
    if (secrets.problem) {
      const reason = secrets.reason ?? 'SecretUnavailable';
      return { outcome: 'degraded', reason, message: secrets.problem, conditions: [{ type: 'Connected', status: 'False', reason, message: secrets.problem }] };
    }
    const res = await this.probe(healthUrlOf(cfg), webhookHeaders(cfg, secrets));
    const result = probedResult(probeOutcome(cfg, res), status, new Date(), this.o.hooks?.healthIntervalMs);
    const was = status?.conditions.find((c) => c.type === 'Connected');
    if (result.outcome === 'ready' && was?.status === 'False') await this.o.hooks?.onConnected?.(key.id);
    return result;
  }
}

function notConnected(reason: string, message: string): ReconcileResult {
  return { outcome: 'ready', message, conditions: [{ type: 'Connected', status: 'False', reason, message }] };
}

/**
 * probedResult maps one probe of a receiver to the reconcile's result (pure; tested as a table). While the receiver
 * is down, the wait before the next look is as long as it has been down, between MIN_REQUEUE_MS and
 * MAX_REQUEUE_MS (a doubling backoff without a counter); while it is up, it is looked at every `intervalMs`.
 * NOTE: the probe's detail names a status or a transport error code, never the URL (it may carry a token).
 */
export function probedResult(probe: { up: boolean; detail: string }, prev: ResourceStatus | undefined, now: Date, intervalMs?: number): ReconcileResult {
  if (probe.up) {
    return {
      outcome: 'ready', message: `the receiver ${probe.detail}`,
      conditions: [{ type: 'Connected', status: 'True', reason: 'Connected', message: '' }],
      fields: { last_connected_at: now.toISOString() },
      ...(intervalMs ? { requeueAfterMs: intervalMs } : {}),
    };
  }
  const was = prev?.conditions.find((c) => c.type === 'Connected');
  const since = was && was.status === 'False' && was.reason === 'BridgeUnreachable' ? Date.parse(was.last_transition_time) : now.getTime();
  const message = `the receiver ${probe.detail}`;
  return {
    outcome: 'degraded', reason: 'BridgeUnreachable', message,
    conditions: [{ type: 'Connected', status: 'False', reason: 'BridgeUnreachable', message }],
    fields: { last_connected_at: prev?.last_connected_at ?? null },
    requeueAfterMs: Math.min(MAX_REQUEUE_MS, Math.max(MIN_REQUEUE_MS, now.getTime() - since)),
  };
}
