import { formatDuration } from '../../codecs/duration.ts';
import type { DailyLimits } from './daily.ts';
import { DEFAULT_DREAM_CONFIG, type DreamConfig } from './dream-policy.ts';
import { UNBOUND_PARTITION } from './ledger.ts';
import type { MemoryPolicy } from './memory-service.ts';
import type { RecallWeights } from './search.ts';
import { DEFAULT_RAW_CANDIDATES, DEFAULT_TOP_K, RECENCY_HALF_LIFE_DAYS } from './search.ts';

/** ProviderStatus is one memory provider's real status (`MemoryConfig` providers). */
export interface ProviderStatus {
  active: boolean;
  builtin: boolean;
  cooldown_until: string;
  failure_count: number;
  last_error_code: string;
  name: string;
  status: 'active' | 'standby' | 'cooling_down' | 'failed';
  tools: string[];
}

/** MemoryConfigView is the answer of `GET /api/memory/config`. */
export interface MemoryConfigView {
  config: Record<string, unknown>;
  locked_paths: string[];
  mutable_paths: string[];
  providers: ProviderStatus[];
}

/**
 * memoryConfig is the configuration in effect (`MemoryConfig`, with its defaults). NOTE: the
 * controller runs in `rule` mode: the original's LLM tie-breaker needs a model provider and this service configures
 * none, so `controller.llm.enabled` is false and the mode says so instead of claiming `hybrid`. The one provider is
 * the built-in Redis store, active. Every value is set by environment at start (locked); none changes at run time.
 * NOTE: memories, daily logs and session ledgers live in Redis; `global_dir`, `session.ledger_root` and the daily
 * logs' and ledgers' `path`s name where each goes in an export, relative to the export's root. Archiving and purging
 * are not done, so their settings are 0 (off).
 */
export function memoryConfig(o: { policy: MemoryPolicy; daily: DailyLimits; weights: RecallWeights; modelProvider?: string; dream?: DreamConfig }): MemoryConfigView {
  const llm = !!o.modelProvider;
  const dream = o.dream ?? DEFAULT_DREAM_CONFIG;
  const config = {
    enabled: true,
    controller: {
      mode: llm ? 'hybrid' : 'rule', max_latency: '300ms', default_op_on_fail: 'noop',
      llm: { enabled: llm, model: llm ? o.modelProvider : '', prompt_version: 'v1', top_k: 5, timeout: '250ms', max_tokens_out: 256 },
      policy: { allow_origins: [...o.policy.allowOrigins], max_content_chars: o.policy.maxContentChars, max_writes_per_min: o.policy.maxWritesPerMin },
    },
    daily: { max_bytes: o.daily.maxBytes, max_lines: o.daily.maxLines, rotate_format: '{date}.{seq}.md', dreaming_window: 7, archive_path: '', cold_archive_days: 0, hard_delete_days: 0, max_archive_bytes: 0, sweep_hour: 0 },
    decisions: { keep_audit_summary: true, max_post_content_bytes: 65536, prune_after_applied_days: 0 },
    file: { max_bytes: 25600, max_lines: 200 },
    recall: {
      fusion: 'weighted', top_k: DEFAULT_TOP_K, raw_candidates: DEFAULT_RAW_CANDIDATES, include_already_surfaced: false, include_system: false,
      freshness: { banner_after_days: 1 }, weights: { ...o.weights }, recency_half_life_days: RECENCY_HALF_LIFE_DAYS,
      signals: { metrics_enabled: false, queue_capacity: 0, worker_retry_max: 0 },
    },
    provider: { name: 'redis', timeout: '2s', failure_threshold: 5, cooldown: '30s' },
    extractor: { enabled: false, mode: 'post_message' },
    dream: {
      enabled: dream.enabled, agent: dream.agent, check_interval: formatDuration(dream.check_interval_ms), debounce: formatDuration(dream.debounce_ms),
      min_hours: dream.min_hours, min_sessions: dream.min_sessions, prompt_version: dream.prompt_version,
      gates: { min_recall_count: dream.gates.min_recall_count, min_score: dream.gates.min_score, min_unpromoted: dream.gates.min_unpromoted },
      scoring: { recency_half_life_days: dream.scoring.recency_half_life_days, weights: { ...dream.scoring.weights } },
    },
    session: {
      ledger_format: 'jsonl', ledger_root: '', unbound_partition: UNBOUND_PARTITION, events_purge_grace: '0s', cold_archive_days: 0, hard_delete_days: 0, max_archive_bytes: 0,
    },
    // NOTE: a memory write names an existing workspace (404 otherwise); none is created for it.
    workspace: { auto_create: false, toml_path: '.svc/config.yaml' },
    global_dir: 'global',
  };
  const locked = [
    'controller.policy.max_content_chars', 'controller.policy.max_writes_per_min', 'controller.mode', 'daily.max_bytes', 'daily.max_lines',
    'dream.enabled', 'dream.agent', 'dream.check_interval', 'dream.debounce', 'dream.min_hours', 'dream.min_sessions', 'dream.gates.min_recall_count',
    'dream.gates.min_score', 'dream.gates.min_unpromoted',
  ];
  return {
    config, locked_paths: locked, mutable_paths: [],
    providers: [
      { name: 'redis', builtin: true, active: true, status: 'active', failure_count: 0, last_error_code: '', cooldown_until: '', tools: ['svc__memory_search', 'svc__memory_write'] },
      { name: 'llm', builtin: true, active: false, status: 'standby', failure_count: 0, last_error_code: llm ? '' : 'no_model_provider_configured', cooldown_until: '', tools: [] },
    ],
  };
}
