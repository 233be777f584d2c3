/** SourceKind is where a catalog row came from. */
export type SourceKind = 'builtin' | 'config' | 'models_dev' | 'provider_live' | 'extension' | 'acp_session';

/** RefreshState is where a source's last refresh stands. */
export type RefreshState = 'idle' | 'refreshing' | 'succeeded' | 'failed' | 'disabled';

/** AvailabilityState says how much a model's availability can be trusted. */
export type AvailabilityState = 'available_live' | 'available_stale' | 'unavailable_live' | 'unavailable_stale' | 'unknown';

/**
 * PRIORITY is each source kind's merge priority: a higher one's field values win. config, provider_live, extension,
 * models_dev and builtin are the original's figures. NOTE: the original gives
 * `acp_session` none (the original defines the kind and never produces rows of it), so it is this service's choice:
 * 90, below the sources an operator set up (config, a provider's own API, an installed extension) and above the
 * static enrichment (models.dev, builtin), because it is a live observation of what an agent runs now.
 */
export const PRIORITY: Record<SourceKind, number> = { config: 120, provider_live: 110, extension: 100, acp_session: 90, models_dev: 50, builtin: 10 };

/** LIVE_KINDS are the source kinds that observe a model live, so only they may say it is available. */
export const LIVE_KINDS: ReadonlySet<SourceKind> = new Set(['provider_live', 'extension', 'acp_session']);

/** EFFORTS are the reasoning efforts a model may offer, lowest first. */
export const EFFORTS = ['minimal', 'low', 'medium', 'high', 'xhigh'] as const;

/** PROVIDER_ID is the grammar of a provider id; models.dev's provider ids all match it. */
export const PROVIDER_ID = /^[a-z0-9][a-z0-9_-]*$/;

/** Cost is a model's price per million tokens, by kind of token (models.dev's `cost`). */
export interface Cost {
  input_per_million?: number;
  output_per_million?: number;
  cache_read_per_million?: number;
  cache_write_per_million?: number;
  reasoning_per_million?: number;
}

/** ModelFacts are what a source may know of a model, and the merged view shows (each from the first row that has it). */
export interface ModelFacts {
  context_window?: number;
  max_input_tokens?: number;
  max_output_tokens?: number;
  supports_tools?: boolean;
  supports_reasoning?: boolean;
  reasoning_efforts?: string[];
  default_reasoning_effort?: string;
  cost?: Cost;
  release_date?: string;
}

/** ModelRow is what one source says about one provider's model; absent fields are unknown to that source. */
export interface ModelRow extends ModelFacts {
  provider_id: string;
  model_id: string;
  source_id: string;
  source_kind: SourceKind;
  priority: number;
  refreshed_at: string;
  stale: boolean;
  /** Only a live source may say; null or absent: it does not know. */
  available?: boolean | null;
  display_name?: string;
  last_error?: string;
}

/** SourceRef is one source a merged model was built from (CatalogModel.sources). */
export interface SourceRef {
  source_id: string;
  source_kind: SourceKind;
  priority: number;
  refreshed_at: string;
  stale: boolean;
  last_error: string;
}

/** CatalogModel is the merged view of one provider's model. */
export interface CatalogModel extends ModelFacts {
  provider_id: string;
  model_id: string;
  display_name: string;
  sources: SourceRef[];
  available: boolean | null;
  availability_state: AvailabilityState;
  stale: boolean;
  refreshed_at: string;
  /** Which source kind (or `curation`) gave the reasoning profile. */
  reasoning_source?: string;
  curated: boolean;
  hidden: boolean;
  featured: boolean;
  deprecated: boolean;
  last_error: string;
}

/** CatalogSourceStatus is one source's health for one provider. */
export interface CatalogSourceStatus {
  source_id: string;
  source_kind: SourceKind;
  provider_id: string;
  priority: number;
  last_refresh: string;
  next_refresh: string;
  last_success: string;
  last_error: string;
  refresh_state: RefreshState;
  row_count: number;
  stale: boolean;
}

/** CurateApply tells what a curation write did. */
export interface CurateApply {
  active_config_hash: string;
  active_generation: number;
  agent_name: string;
  applied: boolean;
  apply_record_id: string;
  lifecycle: string;
  next_action: string;
  partial_failures: { diagnostic: unknown; subsystem: string }[];
  restart_required: boolean;
  restart_scope: string;
  scope: string;
  section: string;
  skipped: boolean;
  skipped_reason: string;
  warnings: string[];
  workspace_id: string;
  write_target: string;
}

/** ListQuery is a catalog listing's query. */
export interface ListQuery {
  view: 'curated' | 'all';
  provider_id?: string;
  source_id?: string;
  include_stale: boolean;
}

/**
 * StoredStatus is a source status as stored: the spec's fields plus the last failure's class and, for a reported
 * source (acp_session), the digest of what was reported (neither is ever answered).
 */
export type StoredStatus = CatalogSourceStatus & { failure_class?: 'auth_required' | 'permission_denied' | 'rate_limited' | 'unavailable' | ''; digest?: string };
