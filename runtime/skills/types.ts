import type { Workspace } from '../../store/workspace-store.ts';

/** TIERS are the skill sources in precedence order, lowest first: a later tier shadows an earlier one. */
export const TIERS = ['bundled', 'marketplace', 'user', 'additional', 'workspace', 'agent-local'] as const;

/** SkillSource is where a skill definition came from; it is also its precedence tier. */
export type SkillSource = (typeof TIERS)[number];

/** SkillFailure says why a definition was rejected; every field is '' on an accepted one. */
export interface SkillFailure {
  actual_hash: string;
  code: string;
  expected_hash: string;
  message: string;
}

/** SkillWarning is one suspicious pattern found in a SKILL.md. */
export interface SkillWarning {
  message: string;
  pattern: string;
  severity: string;
}

/**
 * SkillDiagnostic is how one discovered definition of a skill resolved (spec/concepts.md, "Skills"): the winner
 * (`valid`), a lower tier it hides (`shadowed`), a file that does not parse (`invalid`), or a file whose declared
 * hash does not match its body (`verification_failed`).
 */
export interface SkillDiagnostic {
  failure: SkillFailure;
  name: string;
  path: string;
  source: string;
  state: 'valid' | 'shadowed' | 'invalid' | 'verification_failed';
  /** `passed` (declared hash matches), `unverified` (none declared), `warning` (suspicious content) or `failed`. */
  verification_status: 'passed' | 'unverified' | 'warning' | 'failed';
  warnings: SkillWarning[];
  winning_path: string;
  winning_source: string;
}

/** ShadowEntry is one lower-tier definition the winner hides (`provenance.shadowed_by`). */
export interface ShadowEntry {
  detected_at: string;
  path: string;
  resolved_to_winner: boolean;
  tier: string;
}

/** SkillProvenance says where the winning definition came from and what it shadows. */
export interface SkillProvenance {
  installed_at: string;
  installed_from_bundle: string;
  installed_from_extension: string;
  precedence_tier: string;
  registry: string;
  shadowed_by: ShadowEntry[];
  slug: string;
  version: string;
}

/** Skill is the operator view of the winning definition of one skill name (spec/concepts.md). */
export interface Skill {
  description: string;
  diagnostics: SkillDiagnostic[];
  dir: string;
  enabled: boolean;
  metadata: Record<string, unknown>;
  name: string;
  provenance: SkillProvenance;
  source: string;
  version: string;
}

/** SkillRef is a workspace snapshot's entry for one of the workspace's own skills. */
export interface SkillRef {
  dir: string;
  name: string;
  source: string;
}

/** SkillContext picks the workspace and agent whose skill directories and records take part in resolution. */
export interface SkillContext {
  workspace?: Workspace;
  agentName?: string;
}
