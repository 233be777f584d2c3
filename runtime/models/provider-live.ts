import type { EgressPolicy } from '../security/egress.ts';
import { fetchJson, HttpStatusError } from './models-dev.ts';
import type { ProviderConfig } from './providers.ts';
import { PRIORITY, type ModelRow } from './types.ts';

/** LIVE_MAX_BYTES caps one page of a provider's model list (8 MiB, as the original). */
export const LIVE_MAX_BYTES = 8 * 1024 * 1024;
/** MAX_PAGES bounds how many pages of Anthropic's paginated list one refresh follows. */
const MAX_PAGES = 20;
/** ANTHROPIC_VERSION is the API version header Anthropic requires. */
const ANTHROPIC_VERSION = '2023-06-01';

/**
 * FailureClass is what a failed live refresh means for the provider, each with its bus event:
 * 401 auth_required, 403 permission_denied, 429 rate_limited, anything else (5xx, timeout, refused, bad JSON)
 * unavailable.
 */
export type FailureClass = 'auth_required' | 'permission_denied' | 'rate_limited' | 'unavailable';

/** failureClass classifies a live refresh's error. */
export function failureClass(err: unknown): FailureClass {
  if ((err as { authMissing?: boolean })?.authMissing) return 'auth_required';
  const status = err instanceof HttpStatusError ? err.status : 0;
  return status === 401 ? 'auth_required' : status === 403 ? 'permission_denied' : status === 429 ? 'rate_limited' : 'unavailable';
}

/** liveSourceId is a provider's live source id (`provider_live:<provider>`, the original's form). */
export const liveSourceId = (provider: string) => `provider_live:${provider}`;

/** modelsUrl is where a provider lists its models: `{base_url}/models`, or Anthropic's `/v1/models`. */
export function modelsUrl(p: ProviderConfig): string {
  if (p.kind === 'anthropic') return /\/v1$/.test(p.base_url) ? `${p.base_url}/models` : `${p.base_url}/v1/models`;
  return `${p.base_url}/models`;
}

const int = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined);

/**
 * listLiveModels reads a provider's own model list with its key (`key` '' sends none): the only source that can say
 * a model is available with the configured credentials. OpenAI-compatible servers answer `{data: [{id}]}`; some
 * (OpenRouter, vLLM) add a context length, which is kept. NOTE: the key goes in a header only; an error message
 * never carries the request's headers.
 */
export async function listLiveModels(p: ProviderConfig, key: string, timeoutMs: number, refreshedAt: string, egress: EgressPolicy): Promise<ModelRow[]> {
  const headers: Record<string, string> = p.kind === 'anthropic'
    ? { 'anthropic-version': ANTHROPIC_VERSION, ...(key ? { 'x-api-key': key } : {}) }
    : key ? { authorization: `Bearer ${key}` } : {};
  const base = modelsUrl(p);
  const rows = new Map<string, ModelRow>();
  let after = '';
  for (let page = 0; page < MAX_PAGES; page++) {
    const url = p.kind === 'anthropic' ? `${base}?limit=1000${after ? `&after_id=${encodeURIComponent(after)}` : ''}` : base;
    const body = await fetchJson(url, { timeoutMs, maxBytes: LIVE_MAX_BYTES, headers, what: `provider ${p.name}`, egress }) as Record<string, unknown>;
    const data = Array.isArray(body?.data) ? body.data : Array.isArray(body?.models) ? body.models : undefined;
    if (!data) throw new Error(`provider ${p.name} answered a model list without a data array`);
    for (const m of data as Record<string, unknown>[]) {
      const id = typeof m?.id === 'string' ? m.id.trim() : '';
      if (!id || id.length > 253 || rows.has(id)) continue;
      const row: ModelRow = {
        provider_id: p.name, model_id: id, source_id: liveSourceId(p.name), source_kind: 'provider_live', priority: PRIORITY.provider_live,
        refreshed_at: refreshedAt, stale: false, available: true,
      };
      const name = typeof m.display_name === 'string' ? m.display_name : typeof m.name === 'string' ? m.name : '';
      if (name.trim()) row.display_name = name.trim();
      const ctx = int(m.context_length) ?? int(m.context_window) ?? int(m.max_model_len);
      if (ctx) row.context_window = ctx;
      rows.set(id, row);
    }
    if (p.kind !== 'anthropic' || body.has_more !== true || typeof body.last_id !== 'string') break;
    after = body.last_id;
  }
  return [...rows.values()];
}
