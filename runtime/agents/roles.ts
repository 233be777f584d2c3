import { parseDuration } from '../../codecs/duration.ts';
import { NotFoundError } from '../../store/errors.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { Workspace } from '../../store/workspace-store.ts';
import { agentEntries, SCRIPTED_AGENT } from './resolve-agent.ts';
import type { Settings, SettingsFile } from '../process/settings.ts';

/** EFFORTS are the reasoning efforts a session (and so a role) may ask for. */
export const EFFORTS = ['minimal', 'low', 'medium', 'high', 'xhigh'];

/** FallbackStep is one provider and model a role falls back to, in order. */
export interface FallbackStep { model: string; provider: string; reasoning_effort: string }

/** Role is the spec's Role view. */
export interface Role {
  agent: string;
  diagnostics: { agent: string; code: string; message: string }[];
  enabled: boolean;
  fallback_chain: FallbackStep[];
  model: string;
  provenance: Record<string, string>;
  provider: string;
  reasoning_effort: string;
  resolution_mode: 'builtin' | 'global' | 'workspace';
  role: string;
  timeout: string;
}

type Fields = Pick<Role, 'agent' | 'enabled' | 'fallback_chain' | 'model' | 'provider' | 'reasoning_effort' | 'timeout'>;

/**
 * BUILTIN_ROLES are the roles this service resolves for work nobody named an agent for:
 * - `session`: the agent (and provider, model, reasoning effort) a new session runs when neither the request nor
 *   the workspace's `default_agent` names one. Built in: the `scripted` agent.
 * - `spawn`: the agent a spawned child session runs when `/api/agent/spawn` names none. Built in: empty, which
 *   means the parent's agent. `enabled: false` refuses spawning. An agent definition with a `command` (an external
 *   program) is spawned only when the global configuration's spawn role names it (a workspace's `.svc/config.yaml`
 *   does not count: agents can write there).
 * `timeout` reports the prompt inactivity timeout that supervises these sessions (SESSION_INACTIVITY_TIMEOUT);
 * it is set through the environment, not per role.
 * NOTE: the original also has roles for memory extraction, memory consolidation ("dream"), heartbeat wakes and
 * task workers. This service runs none of that work (no memory store, no wake scheduler, and automation jobs are
 * declarations without a runner), so listing those roles would describe agents that never run.
 */
export const BUILTIN_ROLES: Record<string, Omit<Fields, 'timeout'>> = {
  session: { agent: SCRIPTED_AGENT, enabled: true, fallback_chain: [], model: '', provider: '', reasoning_effort: '' },
  spawn: { agent: '', enabled: true, fallback_chain: [], model: '', provider: '', reasoning_effort: '' },
};

const FIELDS = ['agent', 'enabled', 'fallback_chain', 'model', 'provider', 'reasoning_effort', 'timeout'] as const;

/**
 * RoleResolver resolves each role from the built-in defaults, the global configuration file's `roles.<role>`
 * and the workspace's, field by field (a later layer wins), and checks what it refers to: unknown agents,
 * models no agent declares and the configuration's `models` list does not name, invalid efforts.
 */
export class RoleResolver {
  /** `models`, when given, is the model catalog: a model it knows is known, beside the ones agents and the `models` list name. */
  constructor(private readonly o: { store: ResourceStore; settings: Settings; inactivityTimeout: string; models?: { knows(provider: string, model: string): Promise<boolean> } }) {}

  /** list resolves every role, for a workspace when one is given, sorted by name. */
  async list(ws?: Workspace): Promise<Role[]> {
    const c = await this.context(ws);
    return Promise.all(Object.keys(BUILTIN_ROLES).sort().map((name) => this.resolve(name, c.files, c.agentNames, c.knownModels)));
  }

  /**
   * get resolves one role; an unknown role is a 404 naming the roles there are. NOTE: only that role: every session
   * create asks for `session`, and resolving all of them checked every role's models against the catalog.
   */
  async get(name: string, ws?: Workspace): Promise<Role> {
    if (!Object.hasOwn(BUILTIN_ROLES, name)) throw new NotFoundError(`role "${name}" does not exist; roles: ${Object.keys(BUILTIN_ROLES).sort().join(', ')}`, 'role_not_found', { role: name });
    const c = await this.context(ws);
    return this.resolve(name, c.files, c.agentNames, c.knownModels);
  }

  /** context is what resolving a role reads: the configuration files, the agents in scope and the models they name. */
  private async context(ws?: Workspace): Promise<{ files: SettingsFile[]; agentNames: Set<string>; knownModels: Set<string> }> {
    const [files, entries] = await Promise.all([
      Promise.all([this.o.settings.global(), ...(ws ? [this.o.settings.workspace(ws.root_dir)] : [])]),
      agentEntries(this.o.store),
    ]);
    const agents = entries.filter((e) => e.scope.kind === 'global' || e.scope.id === ws?.id);
    const agentNames = new Set([SCRIPTED_AGENT, ...agents.map((e) => String(e.spec.name))]);
    const catalog = files.flatMap((f) => (Array.isArray(f.data.models) ? f.data.models : [])).map((m: any) => `${m?.provider ?? ''}/${m?.model ?? ''}`);
    const knownModels = new Set([...catalog, ...agents.filter((e) => e.spec.model).map((e) => `${e.spec.provider ?? ''}/${e.spec.model}`)]);
    return { files, agentNames, knownModels };
  }

  private async resolve(name: string, files: SettingsFile[], agentNames: Set<string>, knownModels: Set<string>): Promise<Role> {
    const fields: Fields = { ...BUILTIN_ROLES[name], timeout: this.o.inactivityTimeout };
    const provenance: Record<string, string> = Object.fromEntries(FIELDS.map((f) => [f, 'builtin']));
    const diagnostics: Role['diagnostics'] = [];
    const diag = (code: string, message: string, agent = '') => diagnostics.push({ agent, code, message });
    let mode: Role['resolution_mode'] = 'builtin';
    for (const [i, file] of files.entries()) {
      const layer = i === 0 ? 'global' : 'workspace';
      if (file.error) { diag('config_invalid', `${file.path}:${file.error.line}:${file.error.column}: ${file.error.message}`); continue; }
      const roles = file.data.roles;
      if (roles === undefined || roles === null) continue;
      if (typeof roles !== 'object' || Array.isArray(roles)) { diag('role_config_invalid', `${file.path}: roles must be a mapping of role names`); continue; }
      const raw = (roles as Record<string, unknown>)[name];
      if (raw === undefined) continue;
      if (!raw || typeof raw !== 'object' || Array.isArray(raw)) { diag('role_config_invalid', `${file.path}: roles.${name} must be a mapping`); continue; }
      for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
        const where = `${file.path}: roles.${name}.${k}`;
        if (!(FIELDS as readonly string[]).includes(k)) { diag('role_field_unknown', `${where} is not a role field`); continue; }
        if (k === 'timeout') { diag('role_timeout_not_configurable', `${where} is ignored; the inactivity timeout is SESSION_INACTIVITY_TIMEOUT`); continue; }
        if (k === 'enabled' ? typeof v !== 'boolean' : k === 'fallback_chain' ? !Array.isArray(v) : typeof v !== 'string') { diag('role_config_invalid', `${where} has the wrong type`); continue; }
        if (k === 'enabled' && v === false && name === 'session') { diag('role_cannot_be_disabled', `${where}: new sessions always need an agent`); continue; }
        if (k === 'fallback_chain' && !(v as unknown[]).every((step) => step && typeof step === 'object' && !Array.isArray(step))) { diag('role_config_invalid', `${where} must be a list of {provider, model, reasoning_effort}`); continue; }
        (fields as unknown as Record<string, unknown>)[k] = k === 'fallback_chain'
          ? (v as unknown[]).map((s: any) => ({ provider: String(s?.provider ?? ''), model: String(s?.model ?? ''), reasoning_effort: String(s?.reasoning_effort ?? '') }))
          : v;
        provenance[k] = layer;
        mode = layer;
      }
    }
    if (fields.agent && !agentNames.has(fields.agent)) diag('role_agent_unknown', `agent "${fields.agent}" is not defined (globally or in this workspace)`, fields.agent);
    for (const [i, step] of [{ provider: fields.provider, model: fields.model, reasoning_effort: fields.reasoning_effort }, ...fields.fallback_chain].entries()) {
      const where = i === 0 ? 'the role' : `fallback_chain[${i - 1}]`;
      if (step.model && !step.provider) diag('role_provider_required', `${where} names model "${step.model}" without a provider`);
      if (step.model && !knownModels.has(`${step.provider}/${step.model}`) && !(await this.o.models?.knows(step.provider, step.model))) {
        diag('role_model_unknown', `${where} names model "${step.provider}/${step.model}", which the model catalog does not know, no agent declares and the configuration's models list does not name`);
      }
      if (step.reasoning_effort && !EFFORTS.includes(step.reasoning_effort)) diag('role_reasoning_effort_invalid', `${where} has reasoning_effort "${step.reasoning_effort}"; use one of ${EFFORTS.join(', ')}`);
    }
    // NOTE: what the service does not act on is said, so a configured value is never silently inert.
    if (fields.fallback_chain.length) diag('role_field_not_applied', 'fallback_chain is checked and reported, but this service does not fail over: nothing retries a session with another provider');
    if (name === 'spawn' && (fields.provider || fields.model || fields.reasoning_effort)) diag('role_field_not_applied', 'spawned sessions run their agent\'s own provider and model; the spawn role picks only the agent');
    if (fields.timeout && !parseDuration(fields.timeout)) diag('role_timeout_invalid', `timeout "${fields.timeout}" is not a duration`);
    return { role: name, ...fields, resolution_mode: mode, provenance, diagnostics };
  }
}
