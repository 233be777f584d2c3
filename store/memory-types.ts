/**
 * Types of the memory family: memories, controller decisions,
 * the write input every writer passes to MemoryService.write, and daily logs. The store keeps these shapes, so they
 * live here (store imports nothing from runtime); runtime/memory/types.ts re-exports them.
 */

/** MEMORY_SCOPES are the scopes a memory lives at. */
export const MEMORY_SCOPES = ['global', 'workspace', 'agent'] as const;
export type MemoryScope = (typeof MEMORY_SCOPES)[number];

/** AGENT_TIERS: an agent memory follows its agent in one workspace (`workspace`) or everywhere (`global`). */
export const AGENT_TIERS = ['workspace', 'global'] as const;
export type AgentTier = (typeof AGENT_TIERS)[number];

/** MEMORY_TYPES are the kinds of fact a memory holds. */
export const MEMORY_TYPES = ['user', 'feedback', 'project', 'reference'] as const;
export type MemoryType = (typeof MEMORY_TYPES)[number];

/** DECISION_OPS are the controller's outcomes. */
export const DECISION_OPS = ['noop', 'add', 'update', 'delete', 'reject'] as const;
export type DecisionOp = (typeof DECISION_OPS)[number];

/** ORIGINS are who asked for a write; `dreaming`, `extractor` and `provider` write autonomously. */
export const ORIGINS = ['cli', 'http', 'uds', 'tool', 'extractor', 'dreaming', 'file', 'provider'] as const;
export type Origin = (typeof ORIGINS)[number];

/** AUTONOMOUS_ORIGINS never get the explicit-filename escape from an ambiguous match. */
export const AUTONOMOUS_ORIGINS: readonly Origin[] = ['dreaming', 'extractor', 'provider'];

/**
 * MemoryWriteInput is the body of `POST /api/memory` without `dry_run` and `origin`, which are the
 * caller's options: every writer (HTTP, agent tool, dream, ad-hoc) passes this to MemoryService.write.
 */
export interface MemoryWriteInput {
  scope: string;
  type: string;
  name: string;
  content: string;
  workspace_id?: string;
  agent_name?: string;
  agent_tier?: string;
  description?: string;
  entity?: string;
  attribute?: string;
  /** `operation`/`op` = delete|forget|remove deletes; `filename`/`target_filename` names the file; `reason`. */
  metadata?: Record<string, string>;
  idempotency_key?: string;
  /** Given to new sessions of the memory's scope (runtime/memory/injection.ts). */
  injection?: boolean;
  /** The sessions the fact came from (a dream's consolidation sets them). */
  source_session_ids?: string[];
}

/** WriteOptions are the caller's side of a write. */
export interface WriteOptions {
  origin: Origin;
  /** Run the controller and answer its decision; store nothing anywhere. */
  dryRun?: boolean;
  /**
   * The write is a note (an ad-hoc note): its own memory under the new filename it names, kept unless the same
   * content is there already, never taken for a change of a similar memory.
   */
  note?: boolean;
}

/** Partition names the scope a memory belongs to: its scope, workspace, agent and tier. */
export interface Partition {
  scope: MemoryScope;
  workspace_id: string;
  agent_name: string;
  agent_tier: AgentTier | '';
}

/** Provenance is where a memory came from (MemoryFrontmatter.provenance). */
export interface Provenance {
  confidence: string;
  created_at: string;
  source_actor: string;
  source_session_ids: string[];
  superseded_by: string;
  updated_at: string;
}

/** MemoryFrontmatter is the YAML header of a memory document. */
export interface MemoryFrontmatter {
  name: string;
  description: string;
  type: MemoryType;
  scope: MemoryScope;
  agent_name: string;
  agent_tier: string;
  filename: string;
  mod_time: string;
  provenance: Provenance;
}

/**
 * StoredMemory is a memory as Redis holds it: the rendered markdown `document` (frontmatter + body) is the
 * source of truth and `content_hash` is its SHA-256; the rest is its decoded fields for indexes and views.
 */
export interface StoredMemory extends Partition {
  filename: string;
  name: string;
  description: string;
  type: MemoryType;
  entity: string;
  attribute: string;
  injection: boolean;
  /** The markdown body (without frontmatter). */
  content: string;
  document: string;
  content_hash: string;
  created_at: string;
  updated_at: string;
  provenance: Provenance;
}

/** RecallStats are kept beside each memory (dreams read them). */
export interface RecallStats {
  recall_count: number;
  last_recalled_at: string;
  /** The last fused recall score of a hit, 0..1. */
  recall_score: number;
}

/** Memory is the API view of a memory (`Memory`), plus its body `content`. */
export interface Memory extends RecallStats {
  agent_name: string;
  agent_tier: string;
  content_hash: string;
  created_at: string;
  description: string;
  filename: string;
  injection: boolean;
  last_recalled_at: string;
  mod_time: string;
  name: string;
  scope: string;
  staleness_banner: string;
  superseded_by: string;
  system_managed: boolean;
  type: string;
  updated_at: string;
  workspace_id: string;
  entity: string;
  attribute: string;
  content: string;
}

/** RuleHit is one entry of a decision's rule_trace. */
export interface RuleHit {
  name: string;
  passed: boolean;
  reason: string;
  target?: string;
  details?: string;
}

/**
 * MemoryDecision is one controller decision, with what a revert needs: the content hashes
 * before and after and the previous content (`prior_content`; the whole prior record is kept internally).
 */
export interface MemoryDecision extends Partition {
  id: string;
  op: DecisionOp;
  source: 'rule' | 'llm';
  confidence: number;
  reason: string;
  rule_trace: RuleHit[];
  targets: string[];
  target_filename: string;
  candidate_hash: string;
  post_content_hash: string;
  prior_content_hash: string;
  prior_content: string;
  frontmatter: MemoryFrontmatter;
  idempotency_key: string;
  prompt_version: string;
  decided_at: string;
  applied_at: string;
  origin: Origin;
  /** The decision this one reverts, when it is a revert. */
  reverts: string;
  /** The decision that reverted this one, when one did. */
  reverted_by: string;
  llm_trace: { error: string; latency_ms: number; model: string; prompt_version: string };
}

/** StoredDecision is a decision as Redis holds it: the view plus the full prior and post records. */
export interface StoredDecision extends Omit<MemoryDecision, 'reverted_by'> {
  prior: StoredMemory | null;
  post: StoredMemory | null;
}

/** DailyLog is one day's log of a scope (`DailyLog`). */
export interface DailyLog {
  agent_name: string;
  agent_tier: string;
  date: string;
  operation_count: number;
  path: string;
  scope: string;
  workspace_id: string;
}
