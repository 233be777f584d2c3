import type { Workspace } from '../../store/workspace-store.ts';

/** SkillDiagnostic is one discovered definition's outcome. */
export interface SkillDiagnostic {
  failure: { actual_hash: string; code: string; expected_hash: string; message: string };
  name: string;
  path: string;
  source: string;
  state: 'valid' | 'shadowed' | 'verification_failed' | 'invalid';
  verification_status: 'passed' | 'warning' | 'failed' | 'unverified';
  warnings: { message: string; pattern: string; severity: string }[];
  winning_path: string;
  winning_source: string;
}

/** ShadowEntry is one definition of a skill name: the winner first (`resolved_to_winner`), then those it shadows. */
export interface ShadowEntry {
  detected_at: string;
  path: string;
  resolved_to_winner: boolean;
  tier: string;
}

/** Skill is the spec's Skill view. */
export interface Skill {
  description: string;
  diagnostics: SkillDiagnostic[];
  dir: string;
  enabled: boolean;
  metadata: Record<string, unknown>;
  name: string;
  provenance: {
    installed_at: string; installed_from_bundle: string; installed_from_extension: string; precedence_tier: string; registry: string;
    shadowed_by: ShadowEntry[]; slug: string; version: string;
  };
  source: string;
  version: string;
}

/** SkillContext picks the workspace and agent whose skill directories take part. */
export interface SkillContext {
  workspace?: Workspace;
  agentName?: string;
}

/** InstalledSkills is what the catalog reads of marketplace installs (runtime/skills/installs.ts implements it). */
export interface InstalledSkills {
  /** loaded unpacks every install in this process's cache (when needed) and says where, or why not. */
  loaded(): Promise<{
    record: { name: string; slug: string; registry: string; version: string; installed_at: string; tree_hash: string; warnings: SkillDiagnostic['warnings'] };
    dir: string;
    error?: string;
    /** What is off beside the install (a broken marketplace section), shown as a warning of the skill. */
    warning?: string;
  }[]>;
  /** disabled lists the skill names turned off for every agent. */
  disabled(): Promise<Set<string>>;
}
