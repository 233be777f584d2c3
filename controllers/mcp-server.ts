import { decodeSpec } from '../codecs/index.ts';
import { probeMcpServer, type McpProbeResult, type McpServerSpec } from '../runtime/tools/mcp.ts';
import type { SecurityPolicy } from '../runtime/security/policy.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { ResourceRecord, ResourceStatus } from '../store/types.ts';
import { unresolvedSecrets } from './dependencies.ts';
import { RegistryController } from './registry-controller.ts';
import type { KindController, ReconcileResult, ResourceKey } from './types.ts';

/** The first and the longest wait before looking again at an unreachable server. */
const MIN_REQUEUE_MS = 1_000;
const MAX_REQUEUE_MS = 60_000;

/** McpServerControllerOptions configures an McpServerController. */
export interface McpServerControllerOptions {
  store: ResourceStore;
  security: SecurityPolicy;
  /** probe observes one server (connect, list tools, close); probeMcpServer unless a caller passes its own. */
  probe?: (spec: McpServerSpec) => Promise<McpProbeResult>;
}

/**
 * McpServerController reconciles `mcp_server` records: it projects the record into the registry (as every
 * registry kind does; the api role's McpPool connects from there) and then observes the server itself with a
 * short-lived client (connect, list tools, close), because the controller may run in a process without the pool.
 * Status says what it saw: Ready/Degraded, a `Connected` condition whose reason is a tool connection reason code, and
 * `tools_discovered`, `server_info`, `last_connected_at`. An unreachable server is looked at again with a backoff.
 * A `vault:` ref of its `secret_env` with no secret makes it Degraded `SecretNotFound` naming the ref, without a
 * probe; writing that secret re-reconciles it (VaultService's onChange).
 */
export class McpServerController implements KindController {
  readonly kind = 'mcp_server';
  private readonly registry: RegistryController;
  private readonly probe: (spec: McpServerSpec) => Promise<McpProbeResult>;

  constructor(private readonly o: McpServerControllerOptions) {
    this.registry = new RegistryController({ kind: this.kind, store: o.store, commandRefusal: (k, spec) => o.security.commandRefusal(k, spec) });
    this.probe = o.probe ?? ((spec) => probeMcpServer(spec, o.security));
  }

  async reconcile(key: ResourceKey, record: ResourceRecord | undefined, status?: ResourceStatus): Promise<ReconcileResult> {
    const projected = await this.registry.reconcile(key, record);
    if (!record || projected.outcome === 'degraded') return projected;
    const decoded = decodeSpec(this.kind, record.spec, { scope: record.scope });
    if (!decoded.ok) return projected;
    const spec = decoded.spec as McpServerSpec;
    const secrets = await unresolvedSecrets(this.o.security, Object.fromEntries(Object.entries(spec.secret_env ?? {}).map(([k, ref]) => [`secret_env.${k}`, ref])));
    if (secrets?.reason === 'SecretNotFound') {
      return { outcome: 'degraded', reason: 'SecretNotFound', message: secrets.message, conditions: [{ type: 'Connected', status: 'False', reason: 'SecretNotFound', message: secrets.message }] };
    }
    return observedResult(await this.probe(spec), status, new Date());
  }
}

/**
 * observedResult maps one probe to the reconcile's result (a pure function, tested as a table). The wait before
 * the next look at an unreachable server is as long as it has been unreachable, between MIN_REQUEUE_MS and
 * MAX_REQUEUE_MS: a doubling backoff without a counter to keep. A refused secret or command is terminal until the
 * record changes (or the resync): looking again would not change the answer.
 */
export function observedResult(probe: McpProbeResult, prev: ResourceStatus | undefined, now: Date): ReconcileResult {
  if (probe.ok) {
    const { name, version } = probe.serverInfo;
    return {
      outcome: 'ready', message: `connected to ${name || 'the server'}${version ? ` ${version}` : ''}; ${probe.tools.length} tools listed`,
      conditions: [{ type: 'Connected', status: 'True', reason: 'Connected', message: '' }],
      fields: { tools_discovered: probe.tools.length, server_info: probe.serverInfo, last_connected_at: now.toISOString() },
    };
  }
  const fields = { tools_discovered: 0, server_info: prev?.server_info ?? null, last_connected_at: prev?.last_connected_at ?? null };
  const result: ReconcileResult = {
    outcome: 'degraded', reason: probe.reason, message: probe.message,
    conditions: [{ type: 'Connected', status: 'False', reason: probe.reason, message: probe.message }], fields,
  };
  if (probe.reason !== 'mcp_unreachable') return result;
  const was = prev?.conditions.find((c) => c.type === 'Connected');
  const since = was && was.status === 'False' && was.reason === 'mcp_unreachable' ? Date.parse(was.last_transition_time) : now.getTime();
  return { ...result, requeueAfterMs: Math.min(MAX_REQUEUE_MS, Math.max(MIN_REQUEUE_MS, now.getTime() - since)) };
}
