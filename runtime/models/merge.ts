import type { ModelCurationSpec } from '../../codecs/model-curation.ts';
import { EFFORTS, LIVE_KINDS, type AvailabilityState, type CatalogModel, type ModelRow } from './types.ts';

/** Curation is what a `model.curation` record says about one model ('' default_effort keeps the catalog's). */
export type Curation = ModelCurationSpec;

/** FIELDS are the CatalogModel fields a row contributes, each taken from the first row (by precedence) that has it. */
const FIELDS = ['display_name', 'context_window', 'max_input_tokens', 'max_output_tokens', 'supports_tools', 'cost', 'release_date'] as const;

/**
 * rowOrder is the merge precedence: source priority (config 120, provider_live 110, extension 100, acp_session 90,
 * models_dev 50, builtin 10), then freshness (the newer refresh first), then the source id, so the order never depends on input.
 */
export function rowOrder(a: ModelRow, b: ModelRow): number {
  return b.priority - a.priority || (a.refreshed_at === b.refreshed_at ? 0 : a.refreshed_at > b.refreshed_at ? -1 : 1) || (a.source_id < b.source_id ? -1 : a.source_id > b.source_id ? 1 : 0);
}

/** availabilityOf reads availability from the first row (by precedence) of a source that may say (LIVE_KINDS). */
function availabilityOf(rows: ModelRow[]): { available: boolean | null; state: AvailabilityState; stale: boolean } {
  for (const r of rows) {
    if (!LIVE_KINDS.has(r.source_kind) || typeof r.available !== 'boolean') continue;
    const state: AvailabilityState = r.available ? (r.stale ? 'available_stale' : 'available_live') : (r.stale ? 'unavailable_stale' : 'unavailable_live');
    return { available: r.available, state, stale: r.stale };
  }
  return { available: null, state: 'unknown', stale: false };
}

/**
 * mergeModel builds one CatalogModel from every row of one (provider, model), already in precedence order: each
 * field takes the first value present; `sources` lists every row; availability comes from the live sources only.
 * The reasoning profile: a source's explicit efforts win; a model said to reason gets the five efforts, `medium`
 * by default; one said not to reason gets none.
 */
export function mergeModel(rows: ModelRow[], curation?: Curation): CatalogModel {
  const first = rows[0];
  const m: CatalogModel = {
    provider_id: first.provider_id, model_id: first.model_id, display_name: '', sources: [], available: null, availability_state: 'unknown',
    stale: false, refreshed_at: first.refreshed_at, curated: false, hidden: false, featured: false, deprecated: false, last_error: '',
  };
  let reasoningFrom: ModelRow | undefined;
  for (const r of rows) {
    m.sources.push({ source_id: r.source_id, source_kind: r.source_kind, priority: r.priority, refreshed_at: r.refreshed_at, stale: r.stale, last_error: r.last_error ?? '' });
    for (const f of FIELDS) if ((m[f] === undefined || m[f] === '') && r[f] !== undefined && r[f] !== '') (m as any)[f] = r[f];
    if (!reasoningFrom && (r.reasoning_efforts?.length || r.supports_reasoning !== undefined)) reasoningFrom = r;
    if (m.default_reasoning_effort === undefined && r.default_reasoning_effort) m.default_reasoning_effort = r.default_reasoning_effort;
    if (!m.last_error && r.last_error) m.last_error = r.last_error;
    if (r.stale) m.stale = true;
  }
  if (!m.display_name) m.display_name = m.model_id;
  const a = availabilityOf(rows);
  m.available = a.available;
  m.availability_state = a.state;
  if (reasoningFrom) {
    m.reasoning_source = reasoningFrom.source_kind;
    if (reasoningFrom.supports_reasoning === false) {
      m.supports_reasoning = false;
      delete m.default_reasoning_effort;
    } else {
      m.supports_reasoning = true;
      m.reasoning_efforts = reasoningFrom.reasoning_efforts?.length ? [...reasoningFrom.reasoning_efforts] : [...EFFORTS];
      if (!m.default_reasoning_effort) m.default_reasoning_effort = m.reasoning_efforts.includes('medium') ? 'medium' : m.reasoning_efforts[0];
    }
  }
  if (curation) {
    m.hidden = curation.hidden;
    m.featured = curation.featured;
    m.deprecated = curation.deprecated;
    if (curation.default_effort) {
      m.default_reasoning_effort = curation.default_effort;
      m.reasoning_source = 'curation';
    }
  }
  return m;
}

/** mergeRows groups rows by (provider, model) and merges each group, sorted by provider then model id. */
export function mergeRows(rows: ModelRow[], curations: ReadonlyMap<string, Curation> = new Map()): CatalogModel[] {
  const groups = new Map<string, ModelRow[]>();
  for (const r of rows) {
    const k = modelKey(r.provider_id, r.model_id);
    const g = groups.get(k);
    if (g) g.push(r);
    else groups.set(k, [r]);
  }
  const out: CatalogModel[] = [];
  for (const [k, g] of groups) out.push(mergeModel(g.sort(rowOrder), curations.get(k)));
  return out.sort((a, b) => (a.provider_id < b.provider_id ? -1 : a.provider_id > b.provider_id ? 1 : a.model_id < b.model_id ? -1 : a.model_id > b.model_id ? 1 : 0));
}

/** modelKey is the one key of a (provider, model) pair. */
export const modelKey = (provider: string, model: string) => `${provider}\u0000${model}`;
