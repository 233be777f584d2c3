import { childId } from '../../controllers/bundle-activation.ts';
import { readRegistry, type RegistryEntry } from '../../controllers/registry-controller.ts';
import { ConflictError } from '../../store/errors.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { ResourceScope } from '../../store/types.ts';
import { SCRIPTED_AGENT } from './resolve-agent.ts';
import type { Agent, Provider } from './types.ts';

/** agentView turns a projected agent registry entry into the Agent view. */
export function agentView(e: Pick<RegistryEntry, 'spec'>): Agent {
  const s = e.spec ?? {};
  return {
    category_path: s.category_path ?? [], command: s.command ?? '', deny_tools: s.deny_tools ?? [], diagnostics: [],
    mcp_servers: s.mcp_servers ?? [], model: s.model ?? '', name: s.name, permissions: s.permissions ?? '',
    prompt: s.prompt ?? '', provider: s.provider ?? '', tools: s.tools ?? [], toolsets: s.toolsets ?? [],
  };
}

/**
 * providersOf lists the providers of a workspace snapshot: the ones the settings configure (`configured`,
 * with their model catalog status), and the ones the given agents reference that no setting configures (status
 * `configured: false`: an agent runs as an ACP process with the scrubbed environment of README "Security model").
 */
export function providersOf(agents: Agent[], configured: Provider[] = []): Provider[] {
  const byName = new Map(configured.map((p) => [p.name, p]));
  for (const name of new Set(agents.map((a) => a.provider).filter(Boolean))) {
    if (byName.has(name)) continue;
    byName.set(name, {
      auth_mode: 'none', display_name: name, env_policy: 'allowlist', harness: 'acp', home_policy: 'inherit', name, runtime_provider: name,
      status: { configured: false, scope: '', kind: '', base_url: '', refresh_state: 'disabled', last_refresh: '', last_success: '', last_error: '', row_count: 0, warnings: [] },
    });
  }
  return [...byName.values()].sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * AgentCatalog reads agents from the projected agent registry. Operators see global agents, one per name;
 * with a workspace, that workspace's agents are merged in and win a name clash.
 */
export class AgentCatalog {
  constructor(private readonly store: ResourceStore) {}

  /**
   * definitionTarget names the `agent` record a write of `name` at `scope` must update so that it takes effect: the
   * record that wins for that name there (the highest id, as list shows), at its version; or a new record (version 0).
   * A definition owned by a bundle activation changes only through it (409 naming it).
   */
  async definitionTarget(scope: ResourceScope, name: string): Promise<{ id: string; version: number }> {
    const current = (await this.store.list({ kind: 'agent', scope })).filter((r) => (r.spec as { name?: string }).name === name).at(-1);
    if (current?.owner.kind === 'bundle.activation') {
      throw new ConflictError(`agent "${name}" is defined by ${current.owner.kind} "${current.owner.id}" (record ${current.id}); change it through the activation`, 'owned_by_activation', { record: current.id, owner: current.owner });
    }
    return current ? { id: current.id, version: current.version } : { id: childId('agt-', scope.kind, scope.id ?? '', name), version: 0 };
  }

  /**
   * list returns the agents visible globally, or in a workspace, sorted by name: the built-in `scripted` agent
   * (what sessions run by default) unless a definition takes its name.
   */
  async list(workspaceId?: string): Promise<Agent[]> {
    const byName = new Map<string, RegistryEntry>();
    // NOTE: entries come in id order, so for equal names the highest id wins, as in the original.
    const entries = await readRegistry(this.store, 'agent');
    for (const e of entries) if (e.scope.kind === 'global') byName.set(e.spec.name, e);
    if (workspaceId) for (const e of entries) if (e.scope.kind === 'workspace' && e.scope.id === workspaceId) byName.set(e.spec.name, e);
    const views = [...byName.values()].map(agentView);
    if (!byName.has(SCRIPTED_AGENT)) {
      views.push({ ...agentView({ spec: { name: SCRIPTED_AGENT, prompt: 'The deterministic ACP agent built into the service (the default).', provider: 'builtin' } }) });
    }
    return views.sort((a, b) => a.name.localeCompare(b.name));
  }
}
