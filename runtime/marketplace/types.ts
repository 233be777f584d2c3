import type { Diagnostic } from '../../store/types.ts';

/** MARKET_KINDS are the marketplace kinds of the path. */
export const MARKET_KINDS = ['mcp', 'extension', 'skill', 'bundle'] as const;
export type MarketKind = (typeof MARKET_KINDS)[number];
/** SEARCH_KINDS are the kinds refresh and search accept (bundles ride on their extension's entry). */
export const SEARCH_KINDS = ['mcp', 'extension', 'skill'] as const;

/** SourceType is how a source is read: the official MCP Registry API, or a static JSON index. */
export type SourceType = 'mcp-registry' | 'index';

/** SourceConfig is one `marketplace.sources[]` entry of the settings file. */
export interface SourceConfig {
  id: string;
  type: SourceType;
  url: string;
  kinds: MarketKind[];
  /** Higher wins a duplicate entry of the same identity (default 0). */
  priority: number;
}

/** MarketLimits bound what an install downloads and unpacks (settable for tests and small hosts, never loosened). */
export interface MarketLimits {
  maxArchiveBytes: number;
  /** The tar stream after decompression, headers and padding included. */
  maxExpandedBytes: number;
  /** Entries of any type (files and directories). */
  maxFiles: number;
  downloadTimeoutMs: number;
  /** The expanded tar stream may be at most this many times the archive (beyond a 1 MiB floor). */
  maxExpansionRatio: number;
  /** How long reading an archive's entries (inspection, or unpacking) may take. */
  inspectTimeoutMs: number;
}

/** MarketSettings is the decoded `marketplace` section. */
export interface MarketSettings {
  sources: SourceConfig[];
  /** How often every source is synced (0: only on refresh). */
  refreshIntervalMs: number;
  limits: MarketLimits;
}

/**
 * Trust is the contract's trust object, the same on every route that shows an entry:
 * whether the source publishes a checksum the install verifies, the decision that follows, and the source's tier.
 */
export interface Trust {
  /** An entry's trust is before any install: nobody has accepted it unverified yet. */
  allow_unverified: boolean;
  checksum_verified: boolean;
  /** `verifiable` (a published SHA-256 is checked before unpacking) or `unverified` (nothing to check against). */
  decision: string;
  registry_tier: string;
  warnings: Diagnostic[];
}

/** MarketEntry is the spec's list item. */
export interface MarketEntry {
  author: string;
  description: string;
  downloads: number | null;
  entry_id: string;
  install_slug: string;
  installed: boolean;
  installed_name: string;
  installed_version: string;
  kind: MarketKind;
  manage_path: string;
  name: string;
  published_at: string | null;
  source: string;
  tier: string;
  transport: string;
  trust: Trust;
  update_available: boolean;
  updated_at: string | null;
  version: string;
}

/** McpEnv is one environment row of an MCP entry's detail. */
export interface McpEnv { default: string; name: string; prompt: string; required: boolean; secret: boolean }

/** McpPackage is one way to run an MCP entry (a package run by a command, or a remote URL). */
export interface McpPackage {
  /** npm, pypi, oci, or remote. */
  type: string;
  command: string;
  args: string[];
  transport: string;
  url: string;
  env: McpEnv[];
  /** Remote headers (names only: this service's mcp_server records carry none, see the README). */
  headers: { name: string; required: boolean; secret: boolean }[];
}

/** SkillVersion is one downloadable version of a skill entry: an archive and its SHA-256. */
export interface SkillVersion { version: string; url: string; sha256: string; published_at: string }

/** MarketDetail is the spec's detail object; one of bundle/extension/mcp/skill is filled, per kind. */
export interface MarketDetail {
  entry: MarketEntry;
  bundle: { extension_name: string; profiles: { agents: number; bridges: number; channels: number; description: string; jobs: number; name: string; triggers: number }[] } | null;
  extension: { artifact_url: string; digest_sha256: string; install_slug: string; repository: string } | null;
  mcp: {
    args: string[]; command: string; default_scope: string; env: McpEnv[];
    oauth: { authorization_url: string; client_id: string; issuer_url: string; scopes: string[]; token_url: string } | null;
    transport: string; url: string;
  } | null;
  skill: { display_name: string; install_slug: string; license: string; readme: string; repository: string; tags: string[]; versions: string[] } | null;
}

/**
 * MarketRow is what a sync stores per entry: the entry's source-given fields, the detail and, by kind, how to
 * install it. Installed-state is projected per request, never stored.
 */
export interface MarketRow {
  kind: MarketKind;
  entry_id: string;
  /** The identity duplicates are matched on across sources (MCP server name, `@author/name`, extension name). */
  identity: string;
  source: string;
  priority: number;
  name: string;
  author: string;
  description: string;
  downloads: number | null;
  install_slug: string;
  published_at: string | null;
  updated_at: string | null;
  tier: string;
  transport: string;
  version: string;
  tags: string[];
  detail: Omit<MarketDetail, 'entry'>;
  /** mcp: the ways to run it (packages first, then remotes). */
  packages?: McpPackage[];
  /** skill: downloadable versions, newest first. */
  versions?: SkillVersion[];
  /** skill: MCP servers the skill declares (index field `mcp_servers`). */
  mcp_servers?: string[];
}

/** KindState is one source's last sync of one kind. */
export interface KindState {
  synced_at: string;
  ok_at: string;
  stale: boolean;
  error_class: string;
  error: string;
  entry_count: number;
  /** mcp-registry: the start time of the last good sync, for `updated_since`. */
  updated_since?: string;
  /** index: the ETag of the last good fetch. */
  etag?: string;
}

/** MarketKindPage is the spec's page of one kind. */
export interface MarketKindPage {
  error: string;
  error_class: string;
  items: MarketEntry[];
  kind: string;
  next_cursor: string;
  stale: boolean;
  total: number | null;
}

/** MarketRefreshKind is one kind's refresh outcome. */
export interface MarketRefreshKind {
  entry_count: number;
  error_class: string;
  kind: string;
  outcome: 'updated' | 'unchanged' | 'failed' | 'pending';
  stale: boolean;
}

/** InstalledScope picks whose installs are projected: the global ones, or a workspace's (with the global ones). */
export interface InstalledScope { kind: 'global' | 'workspace'; workspaceId?: string }
