import { pickAgent, SCRIPTED_AGENT } from '../runtime/agents/resolve-agent.ts';
import { secretRefsOf } from '../runtime/security/child-env.ts';
import type { SecurityPolicy } from '../runtime/security/policy.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { ResourceScope } from '../store/types.ts';
import type { RegistryCache } from './registry-controller.ts';
import type { ConditionReport } from './types.ts';

/** DEPENDS_ON_AGENTS are the kinds whose records name an agent; an agent's change re-reconciles them. */
export const DEPENDS_ON_AGENTS = ['automation.job', 'automation.trigger', 'loop'] as const;

/**
 * missingAgent says why the agent a record names does not resolve in the record's scope (a workspace's own
 * definition or a global one; the built-in `scripted` always does), or undefined when it resolves or none is named.
 * NOTE: through a RegistryCache: an agent's change re-reconciles every job and trigger, which would otherwise each
 * read and parse the whole agent registry.
 */
export async function missingAgent(registries: RegistryCache, name: string | undefined, scope: ResourceScope): Promise<string | undefined> {
  if (!name || name === SCRIPTED_AGENT) return undefined;
  const workspaceId = scope.kind === 'workspace' ? scope.id : undefined;
  if (pickAgent((await registries.read(['agent'])).entries.agent, name, workspaceId)) return undefined;
  return `agent "${name}" does not exist ${workspaceId ? `in workspace ${workspaceId} or globally` : 'globally'}`;
}

/** SecretProblem is why a record's secret refs do not all resolve, as a Degraded reason and a message naming each. */
export interface SecretProblem {
  /** `SecretNotFound`: a vault ref with no secret (writing it re-reconciles the record); `SecretUnavailable`: an env: ref unset or refused. */
  reason: 'SecretNotFound' | 'SecretUnavailable';
  message: string;
}

/**
 * unresolvedSecrets resolves a record's secret refs (field path → ref) and says why some do not, or undefined
 * when all do. A missing vault secret comes first: it is the one the caller can fix through the API.
 * NOTE: only field paths, refs and reasons are named, never a value.
 */
export async function unresolvedSecrets(security: SecurityPolicy, refs: Record<string, string>): Promise<SecretProblem | undefined> {
  const given = Object.fromEntries(Object.entries(refs).filter(([, ref]) => ref));
  if (!Object.keys(given).length) return undefined;
  const r = await security.secrets.resolve(given);
  const vault = r.missing.filter((f) => given[f].startsWith('vault:'));
  if (vault.length) return { reason: 'SecretNotFound', message: vault.map((f) => `${f}: ${r.problems[f]}`).join('; ') };
  if (r.refused.length) return { reason: 'SecretUnavailable', message: r.refused.map((f) => `${f}: ${security.secrets.refusal(given[f])}`).join('; ') };
  if (r.missing.length) return { reason: 'SecretUnavailable', message: r.missing.map((f) => `${f}: ${given[f]} does not resolve on the service`).join('; ') };
  return undefined;
}

/** SECRET_USER_KINDS are the kinds whose controllers report unresolved secret refs: a vault write re-reconciles their records that name it. */
export const SECRET_USER_KINDS = ['mcp_server', 'bridge.instance', 'automation.trigger', 'hook.binding', 'agent', 'skill'] as const;

/**
 * secretUsers lists the records of SECRET_USER_KINDS whose spec names `ref` (as a whole string value), so a
 * vault write or delete can re-reconcile them. NOTE: a scan, not an index: vault writes are rare and these kinds
 * small; a missed record still heals at the next resync.
 */
export async function secretUsers(store: ResourceStore, ref: string): Promise<{ kind: string; id: string }[]> {
  const needle = JSON.stringify(ref);
  const out: { kind: string; id: string }[] = [];
  for (const kind of SECRET_USER_KINDS) {
    for (const rec of await store.list({ kind })) if (JSON.stringify(rec.spec).includes(needle)) out.push({ kind, id: rec.id });
  }
  return out;
}

/**
 * secretEnvProblems checks every `secret_env` ref of a spec, at any depth (an agent's own and its MCP servers' and
 * hooks'), naming each by its field path: undefined when all resolve (or there are none, at no cost).
 */
export async function secretEnvProblems(security: SecurityPolicy, spec: unknown): Promise<SecretProblem | undefined> {
  const refs = secretRefsOf(spec);
  return refs.length ? unresolvedSecrets(security, Object.fromEntries(refs.map((r) => [r.path, r.ref]))) : undefined;
}

/** ModelChecker is what an agent's model check reads: the model catalog (runtime/models/catalog.ts). */
export interface ModelChecker {
  knows(provider: string, model: string): Promise<boolean>;
}

/**
 * modelConditions is an agent's `ModelKnown` condition: False (`ModelNotInCatalog`) when it names a model the
 * catalog does not know. NOTE: a warning, not Degraded: live sources lag a provider's releases, and the agent may
 * well run; nothing when it names no model.
 */
export async function modelConditions(models: ModelChecker, spec: unknown): Promise<ConditionReport[]> {
  const s = spec as { provider?: string; model?: string };
  return modelKnown(models, s.provider ?? '', s.model ?? '');
}

/**
 * curationConditions is a `model.curation` record's `ModelKnown` condition: a curation of a model the catalog does
 * not know curates nothing (a typo'd model id looked Ready and did nothing). NOTE: a warning, as for agents: GitOps
 * may apply a curation before a provider's live list names the model; a refresh re-checks it.
 */
export async function curationConditions(models: ModelChecker, spec: unknown): Promise<ConditionReport[]> {
  const s = spec as { provider_id?: string; model_id?: string };
  return modelKnown(models, s.provider_id ?? '', s.model_id ?? '');
}

async function modelKnown(models: ModelChecker, provider: string, model: string): Promise<ConditionReport[]> {
  if (!model) return [];
  if (await models.knows(provider, model)) return [{ type: 'ModelKnown', status: 'True', reason: 'ModelInCatalog', message: '' }];
  return [{
    type: 'ModelKnown', status: 'False', reason: 'ModelNotInCatalog',
    message: `model "${model}"${provider ? ` of provider "${provider}"` : ''} is not in the model catalog (GET /api/model-catalog/models?view=all); refresh it or declare it in the settings file's models`,
  }];
}
