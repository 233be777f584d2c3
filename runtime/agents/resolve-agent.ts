import { RegistryCache, type RegistryEntry } from '../../controllers/registry-controller.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { AgentEnv, ResolvedAgent } from './types.ts';

/** SCRIPTED_AGENT is the deterministic ACP agent that ships with the service and is the default. */
export const SCRIPTED_AGENT = 'scripted';

/**
 * pickAgent picks the definition a name means in a workspace from the agent registry's entries (in id order):
 * a workspace-scoped definition of that workspace wins over a global one, and the highest id wins a tie
 *. Undefined when no definition has the name.
 */
export function pickAgent<S = any>(entries: RegistryEntry<S>[], name: string, workspaceId?: string): RegistryEntry<S> | undefined {
  const named = entries.filter((e) => (e.spec as { name?: string }).name === name);
  return named.filter((e) => e.scope.kind === 'workspace' && e.scope.id === workspaceId).pop() ?? named.filter((e) => e.scope.kind === 'global').pop();
}

/**
 * agentRegistries holds one RegistryCache per store. NOTE: a session start read the agent registry three times (the
 * session role, the API's check and the runtime's start), each an HGETALL and a parse; through the cache an
 * unchanged registry costs no round trip (with the store's RegistryWatch) or one revision GET.
 */
const agentRegistries = new WeakMap<ResourceStore, RegistryCache>();

/** agentEntries is the agent registry's entries (in id order), read through the store's cache (agentRegistries). */
export async function agentEntries(store: ResourceStore): Promise<RegistryEntry[]> {
  let registries = agentRegistries.get(store);
  if (!registries) agentRegistries.set(store, (registries = new RegistryCache(store)));
  return (await registries.read(['agent'])).entries.agent;
}

/**
 * resolveAgent finds the agent a session runs (pickAgent); `scripted` is built in. A definition without a command runs `scripted`.
 */
/** clientFsOf reads a definition's `client_capabilities.fs`: a boolean for both methods, or `{read, write}`. */
export function clientFsOf(caps: { fs?: boolean | { read?: boolean; write?: boolean } } | undefined): { read: boolean; write: boolean } {
  const fs = caps?.fs;
  if (typeof fs === 'boolean') return { read: fs, write: fs };
  return { read: fs?.read ?? true, write: fs?.write ?? true };
}

export async function resolveAgent(store: ResourceStore, name: string, workspaceId: string): Promise<ResolvedAgent | undefined> {
  const pick = pickAgent(await agentEntries(store), name, workspaceId);
  const declared: AgentEnv & Pick<ResolvedAgent, 'provider' | 'permissions' | 'deny_tools' | 'client_fs'> = {
    env: pick?.spec.env, secret_env: pick?.spec.secret_env, auth_method: pick?.spec.auth_method, provider: pick?.spec.provider || undefined,
    permissions: pick?.spec.permissions || undefined, deny_tools: pick?.spec.deny_tools, client_fs: clientFsOf(pick?.spec.client_capabilities),
  };
  if (pick?.spec.command) return { name, builtin: false, command: pick.spec.command, ...declared };
  if (pick || name === SCRIPTED_AGENT) return { name, builtin: true, ...declared };
  return undefined;
}
