import { secretRefProblem } from '../../codecs/shared.ts';
import { MAX_DISPLAY_NAME_LENGTH, MAX_NAME_LENGTH } from '../../codecs/limits.ts';
import type { SettingsFile } from '../process/settings.ts';
import { EFFORTS, PRIORITY, PROVIDER_ID, type Cost, type ModelRow } from './types.ts';

/** ProviderKind is how a provider's live model list is read: `GET {base_url}/models` or Anthropic's `/v1/models`. */
export type ProviderKind = 'openai-compatible' | 'anthropic';

/** ProviderConfig is one entry of the settings file's `providers` list, decoded. */
export interface ProviderConfig {
  name: string;
  display_name: string;
  kind: ProviderKind;
  base_url: string;
  /** A `vault:providers/...` or `env:NAME` ref; never a key itself. Empty: the provider needs none. */
  api_key: string;
  auth_mode: string;
  env_policy: string;
  harness: string;
  home_policy: string;
  runtime_provider: string;
}

/** PROVIDER_FIELDS are the fields a `providers` entry may have. */
const PROVIDER_FIELDS = ['name', 'display_name', 'kind', 'base_url', 'api_key', 'auth_mode', 'env_policy', 'harness', 'home_policy', 'runtime_provider'];
/** MODEL_FIELDS are the fields a `models` entry may have (the `config` source). */
const MODEL_FIELDS = ['provider', 'model', 'display_name', 'context_window', 'max_input_tokens', 'max_output_tokens', 'supports_tools', 'supports_reasoning',
  'reasoning_efforts', 'default_reasoning_effort', 'cost', 'release_date'];
const COST_FIELDS = ['input_per_million', 'output_per_million', 'cache_read_per_million', 'cache_write_per_million', 'reasoning_per_million'];

/** DEFAULT_BASE_URLS are the base URLs of kinds that have one. */
const DEFAULT_BASE_URLS: Partial<Record<ProviderKind, string>> = { anthropic: 'https://api.anthropic.com' };

/** ProviderSettings is what the settings file configures for the catalog, with every problem found (never a value). */
export interface ProviderSettings {
  providers: ProviderConfig[];
  /** The `config` source's rows (the `models` list). */
  models: Omit<ModelRow, 'refreshed_at'>[];
  problems: string[];
}

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const s = (v: unknown) => (typeof v === 'string' ? v.trim() : '');

/**
 * providerSettings decodes the `providers` and `models` lists of the given files, a later file overriding an
 * earlier one's provider of the same name (the global file, then a workspace's). A bad entry is left out and named
 * in `problems` by its path; a literal key (not a ref) is refused, so a key never sits in a file the service reads.
 */
export function providerSettings(files: SettingsFile[]): ProviderSettings {
  const byName = new Map<string, ProviderConfig>();
  const models = new Map<string, Omit<ModelRow, 'refreshed_at'>>();
  const problems: string[] = [];
  for (const file of files) {
    if (file.error) { problems.push(`${file.path}:${file.error.line}:${file.error.column}: ${file.error.message}`); continue; }
    const list = file.data.providers;
    if (list !== undefined && list !== null && !Array.isArray(list)) problems.push(`${file.path}: providers must be a list`);
    (Array.isArray(list) ? list : []).forEach((raw, i) => {
      const where = `${file.path}: providers[${i}]`;
      const p = decodeProvider(raw, where, problems);
      if (p) byName.set(p.name, p);
    });
    const mlist = file.data.models;
    if (mlist !== undefined && mlist !== null && !Array.isArray(mlist)) problems.push(`${file.path}: models must be a list`);
    (Array.isArray(mlist) ? mlist : []).forEach((raw, i) => {
      const row = decodeModel(raw, `${file.path}: models[${i}]`, problems);
      if (row) models.set(`${row.provider_id}\u0000${row.model_id}`, row);
    });
  }
  return { providers: [...byName.values()].sort((a, b) => a.name.localeCompare(b.name)), models: [...models.values()], problems };
}

/**
 * CONNECTION_FIELDS are a provider's fields that say where the catalog sends its key; only the global settings file
 * sets them. NOTE: a workspace's `.svc/config.yaml` sits in a directory agents write to, so a provider it adds, or a
 * base_url it changes, would let whatever writes there make the service send a configured key (`env:` or
 * `vault:providers/...`) to a URL of its choosing.
 */
export const CONNECTION_FIELDS = ['kind', 'base_url', 'api_key'] as const;

/** LayeredProvider is a provider as a workspace sees it: where it is configured, and the workspace changes not applied. */
export interface LayeredProvider {
  provider: ProviderConfig;
  scope: 'global' | 'workspace';
  /** CONNECTION_FIELDS the workspace file sets differently from the global one (the global values stay). */
  ignored: string[];
}

/**
 * layeredProviders lays a workspace file's `providers` over the global file's, field by field: an entry naming a
 * global provider changes the fields it sets (display_name, auth_mode, env_policy, harness, home_policy,
 * runtime_provider), except CONNECTION_FIELDS, which keep the global values and are named in `ignored`; an entry
 * naming no global provider is the workspace's own (`scope: workspace`). Bad entries are left out, as in
 * providerSettings.
 */
export function layeredProviders(global: SettingsFile, ws: SettingsFile): LayeredProvider[] {
  const globals = new Map(providerSettings([global]).providers.map((p) => [p.name, p]));
  const rawOf = (file: SettingsFile) => (file.error || !Array.isArray(file.data.providers) ? [] : file.data.providers).filter(isObj);
  const globalRaw = new Map(rawOf(global).map((r) => [s(r.name), r]));
  const out = new Map<string, LayeredProvider>([...globals.values()].map((p) => [p.name, { provider: p, scope: 'global' as const, ignored: [] }]));
  const problems: string[] = [];
  rawOf(ws).forEach((raw, i) => {
    const where = `${ws.path}: providers[${i}]`;
    const g = globals.get(s(raw.name));
    if (!g) {
      const p = decodeProvider(raw, where, problems);
      if (p) out.set(p.name, { provider: p, scope: 'workspace', ignored: [] });
      return;
    }
    const p = decodeProvider({ ...globalRaw.get(g.name), ...raw }, where, problems);
    if (!p) return;
    const ignored = CONNECTION_FIELDS.filter((f) => p[f] !== g[f]);
    out.set(g.name, { provider: { ...p, kind: g.kind, base_url: g.base_url, api_key: g.api_key }, scope: 'global', ignored });
  });
  return [...out.values()].sort((a, b) => a.provider.name.localeCompare(b.provider.name));
}

function decodeProvider(raw: unknown, where: string, problems: string[]): ProviderConfig | undefined {
  if (!isObj(raw)) { problems.push(`${where} must be a mapping`); return undefined; }
  const bad = (field: string, why: string) => problems.push(`${where}.${field} ${why}`);
  const before = problems.length;
  for (const k of Object.keys(raw)) if (!PROVIDER_FIELDS.includes(k)) bad(k, 'is not a provider field');
  for (const k of PROVIDER_FIELDS) if (raw[k] !== undefined && typeof raw[k] !== 'string') bad(k, 'must be a string');
  const name = s(raw.name);
  if (!name) bad('name', 'is required');
  else if (!PROVIDER_ID.test(name) || name.length > MAX_NAME_LENGTH) bad('name', `must match ^[a-z0-9][a-z0-9_-]*$ (at most ${MAX_NAME_LENGTH} characters)`);
  const kind = s(raw.kind) || 'openai-compatible';
  if (kind !== 'openai-compatible' && kind !== 'anthropic') bad('kind', 'must be openai-compatible or anthropic');
  const baseUrl = (s(raw.base_url) || DEFAULT_BASE_URLS[kind as ProviderKind] || '').replace(/\/+$/, '');
  if (!baseUrl) bad('base_url', 'is required for an openai-compatible provider');
  else if (!/^https?:\/\/[^\s/]+/.test(baseUrl)) bad('base_url', 'must be an http:// or https:// URL');
  else if (/^[a-z]+:\/\/[^/]*@/i.test(baseUrl)) bad('base_url', 'must not carry credentials; use api_key');
  const apiKey = s(raw.api_key);
  // NOTE: the value is never repeated: a literal key in the file must not reach an answer or a log through its error.
  if (apiKey) { const why = secretRefProblem(apiKey, 'providers'); if (why) bad('api_key', 'must be env:NAME or vault:providers/<path> (a ref, never the key itself)'); }
  const displayName = s(raw.display_name);
  if (displayName.length > MAX_DISPLAY_NAME_LENGTH) bad('display_name', `must be at most ${MAX_DISPLAY_NAME_LENGTH} characters`);
  if (problems.length > before) return undefined;
  return {
    name, display_name: displayName || name, kind: kind as ProviderKind, base_url: baseUrl, api_key: apiKey,
    auth_mode: s(raw.auth_mode) || (apiKey ? 'api_key' : 'none'), env_policy: s(raw.env_policy) || 'allowlist',
    harness: s(raw.harness) || 'acp', home_policy: s(raw.home_policy) || 'inherit', runtime_provider: s(raw.runtime_provider) || name,
  };
}

function decodeModel(raw: unknown, where: string, problems: string[]): Omit<ModelRow, 'refreshed_at'> | undefined {
  if (!isObj(raw)) { problems.push(`${where} must be a mapping`); return undefined; }
  const before = problems.length;
  const bad = (field: string, why: string) => problems.push(`${where}.${field} ${why}`);
  for (const k of Object.keys(raw)) if (!MODEL_FIELDS.includes(k)) bad(k, 'is not a model field');
  const provider = s(raw.provider);
  const model = s(raw.model);
  if (!PROVIDER_ID.test(provider)) bad('provider', 'must match ^[a-z0-9][a-z0-9_-]*$');
  if (!model || model.length > MAX_NAME_LENGTH) bad('model', `is required (at most ${MAX_NAME_LENGTH} characters)`);
  const row: Omit<ModelRow, 'refreshed_at'> = { provider_id: provider, model_id: model, source_id: 'config', source_kind: 'config', priority: PRIORITY.config, stale: false };
  for (const k of ['context_window', 'max_input_tokens', 'max_output_tokens'] as const) {
    if (raw[k] === undefined) continue;
    if (!Number.isInteger(raw[k]) || (raw[k] as number) < 0) bad(k, 'must be a non-negative integer');
    else row[k] = raw[k] as number;
  }
  for (const k of ['supports_tools', 'supports_reasoning'] as const) {
    if (raw[k] === undefined) continue;
    if (typeof raw[k] !== 'boolean') bad(k, 'must be true or false');
    else row[k] = raw[k] as boolean;
  }
  if (raw.display_name !== undefined) row.display_name = s(raw.display_name);
  if (raw.release_date !== undefined) row.release_date = s(raw.release_date);
  if (raw.reasoning_efforts !== undefined) {
    const list = Array.isArray(raw.reasoning_efforts) ? raw.reasoning_efforts : [];
    if (!list.length || !list.every((e) => (EFFORTS as readonly unknown[]).includes(e))) bad('reasoning_efforts', `must be a list of ${EFFORTS.join(', ')}`);
    else row.reasoning_efforts = EFFORTS.filter((e) => list.includes(e));
  }
  if (raw.default_reasoning_effort !== undefined) {
    if (![...EFFORTS, 'none'].includes(raw.default_reasoning_effort as string)) bad('default_reasoning_effort', `must be one of none, ${EFFORTS.join(', ')}`);
    else row.default_reasoning_effort = raw.default_reasoning_effort as string;
  }
  if (raw.cost !== undefined) {
    if (!isObj(raw.cost)) bad('cost', 'must be a mapping');
    else {
      const cost: Cost = {};
      for (const [k, v] of Object.entries(raw.cost)) {
        if (!COST_FIELDS.includes(k)) bad(`cost.${k}`, 'is not a cost field');
        else if (typeof v !== 'number' || !(v >= 0)) bad(`cost.${k}`, 'must be a non-negative number');
        else cost[k as keyof Cost] = v;
      }
      if (Object.keys(cost).length) row.cost = cost;
    }
  }
  return problems.length > before ? undefined : row;
}
