import { readRegistry } from '../../controllers/registry-controller.ts';
import type { ResourceStore } from '../../store/resource-store.ts';

/** SCRIPTED_AGENT is the deterministic ACP agent that ships with the service and is the default. */
export const SCRIPTED_AGENT = 'scripted';

/** ResolvedAgent is what a session runs: the built-in scripted agent or a definition's command. */
export type ResolvedAgent = { name: string; builtin: true } | { name: string; builtin: false; command: string };

/**
 * resolveAgent finds the agent a session runs: a workspace-scoped definition of that workspace wins over a
 * global one (spec/kinds.md §1.4); `scripted` is built in. A definition without a command runs `scripted`.
 */
export async function resolveAgent(store: ResourceStore, name: string, workspaceId: string): Promise<ResolvedAgent | undefined> {
  const entries = (await readRegistry(store, 'agent')).filter((e) => e.spec.name === name);
  // NOTE: entries are sorted by id, so pop() takes the highest id, which wins a tie (spec/kinds.md §1.4).
  const pick = entries.filter((e) => e.scope.kind === 'workspace' && e.scope.id === workspaceId).pop() ?? entries.filter((e) => e.scope.kind === 'global').pop();
  if (pick?.spec.command) return { name, builtin: false, command: pick.spec.command };
  if (pick || name === SCRIPTED_AGENT) return { name, builtin: true };
  return undefined;
}
