import { pickAgent, SCRIPTED_AGENT } from '../runtime/agents/resolve-agent.ts';
import type { SecurityPolicy } from '../runtime/security/policy.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { ResourceScope } from '../store/types.ts';
import { readRegistry } from './registry-controller.ts';

/** DEPENDS_ON_AGENTS are the kinds whose records name an agent; an agent's change re-reconciles them. */
export const DEPENDS_ON_AGENTS = ['automation.job', 'automation.trigger'] as const;

/**
 * missingAgent says why the agent a record names does not resolve in the record's scope (a workspace's own
 * definition or a global one; the built-in `scripted` always does), or undefined when it resolves or none is named.
 */
export async function missingAgent(store: ResourceStore, name: string | undefined, scope: ResourceScope): Promise<string | undefined> {
  if (!name || name === SCRIPTED_AGENT) return undefined;
  const workspaceId = scope.kind === 'workspace' ? scope.id : undefined;
  if (pickAgent(await readRegistry(store, 'agent'), name, workspaceId)) return undefined;
  return `agent "${name}" does not exist ${workspaceId ? `in workspace ${workspaceId} or globally` : 'globally'}`;
}

/** unresolvedSecret says why a secret ref (`env:NAME`, `vault:…`) does not resolve on this service, or undefined. */
export function unresolvedSecret(security: SecurityPolicy, field: string, ref: string | undefined): string | undefined {
  if (!ref) return undefined;
  const r = security.secrets.resolve({ SECRET: ref });
  if (r.refused.length) return `${field} ${ref} is outside SECRET_ENV_ALLOWLIST`;
  if (r.missing.length) return `${field} ${ref} does not resolve on the service`;
  return undefined;
}
