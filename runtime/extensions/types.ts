import type { ExtensionManifest } from '../../codecs/extension-manifest.ts';
import type { Diagnostic } from '../../store/types.ts';

export type { Diagnostic };

/** Trust is the spec's trust object: whether the artifact's checksum was verified, and the decision taken on it. */
export interface Trust {
  allow_unverified: boolean;
  checksum_verified: boolean;
  /** `verified` (checksum matched the one given or published), `allowed_unverified` (the admin accepted none). */
  decision: string;
  registry_tier: string;
  warnings: Diagnostic[];
}

/** Provenance is where an installed extension came from and who accepted it (spec `Extension.provenance`). */
export interface Provenance {
  allow_unverified: boolean;
  /** The archive's SHA-256 as stored in the artifact store (hex). */
  checksum_sha256: string;
  checksum_verified: boolean;
  installed_at: string;
  installed_by: string;
  /** `path:<absolute path>` or `marketplace:<source id>`. */
  installed_from: string;
  permissions: string[];
  registry_tier: string;
  slug: string;
  source_url: string;
  trust: Trust;
  warnings: Diagnostic[];
}

/**
 * ExtensionRecord is one installed extension as kept in Redis (store/extension-store.ts): the decoded manifest, the
 * artifact's address and tree hash, the skills' parsed descriptions, whether it is enabled, and its provenance.
 * `generation` moves with every change of the record (compare-and-set), so a daemon started for one generation is
 * restarted for the next.
 */
export interface ExtensionRecord {
  name: string;
  generation: number;
  enabled: boolean;
  manifest: ExtensionManifest;
  /** The artifact (a tar.gz of the extension tree) in the artifact store, by SHA-256. */
  sha256: string;
  /** The unpacked tree's hash (runtime/marketplace/archive.ts treeHash), checked after every unpack. */
  tree_hash: string;
  /** Descriptions of the shipped skills (from their SKILL.md), by skill directory. */
  skills: Record<string, { name: string; description: string }>;
  provenance: Provenance;
  updated_at: string;
}

/** DaemonState is the supervisor's view of one daemon. */
export type DaemonState = 'Starting' | 'Running' | 'Backoff' | 'CrashLoop' | 'Stopped' | 'MissingEnv' | 'Refused';

/**
 * sameInstall tells whether a record (or a status) is about the same install as another: the same generation of the
 * same artifact. NOTE: removing an extension and installing it anew starts its generation at 1 again.
 */
export function sameInstall(a: { generation: number; sha256?: string }, b: { generation: number; sha256?: string }): boolean {
  return a.generation === b.generation && a.sha256 === b.sha256;
}

/** DaemonStatus is what the runtime that holds a daemon's lease observes and writes (under that lease). */
export interface DaemonStatus {
  /** The runtime holding the lease. */
  owner: string;
  /** The record generation this status is about (a newer generation starts afresh). */
  generation: number;
  /**
   * The artifact of the install this status is about. NOTE: a generation starts again at 1 when an extension is
   * removed and installed anew, so the generation alone does not tell two installs apart.
   */
  sha256?: string;
  state: DaemonState;
  running: boolean;
  pid: number;
  started_at: string;
  /** `ok`, `degraded`, `unhealthy`, `unknown`. */
  health: string;
  health_message: string;
  last_error: string;
  /** Consecutive failures (exit, failed handshake, failed health check); reset by a healthy check. */
  failures: number;
  /** Every start of this generation. */
  starts: number;
  missing_env: string[];
  /** When the next start is due (Backoff). */
  restart_at: string;
  updated_at: string;
}

/** ExtensionView is the spec's `Extension` object. */
export interface ExtensionView {
  actions: string[];
  bundles: { description: string; name: string; profiles: string[] }[];
  capabilities: string[];
  daemon_running: boolean;
  diagnostics: Diagnostic[];
  enabled: boolean;
  health: string;
  health_message: string;
  last_error: string;
  missing_env: string[];
  name: string;
  pid: number;
  provenance: Provenance;
  requires_env: string[];
  source: string;
  state: string;
  trust: Trust;
  type: string;
  uptime_seconds: number;
  version: string;
  /** Beside the spec: the resource records the extension projects (kind and id). */
  resources: { kind: string; id: string }[];
  /** Beside the spec: the daemon's tools (ids in the tool catalog). */
  tools: string[];
  /** Beside the spec: the daemon's consecutive failures and its supervisor state. */
  daemon: { state: string; failures: number; starts: number; owner: string; restart_at: string } | null;
}

/** ExtensionMarketEntry is the spec's marketplace listing item of `GET /api/extensions/marketplace`. */
export interface ExtensionMarketEntry {
  author: string;
  description: string;
  downloads: number | null;
  name: string;
  slug: string;
  source: string;
  trust: Trust;
  type: string;
  version: string;
}

/** ExtensionRemoval is the spec's answer to a removal. */
export interface ExtensionRemoval { name: string; path: string; status: string }

/** ExtensionUpdate is the spec's answer to an update. */
export interface ExtensionUpdate { current_version: string; latest_version: string; name: string; path: string; registry: string; slug: string; status: string }

/** diagnostic builds a Diagnostic with the empty fields filled. */
export function diagnostic(d: Partial<Diagnostic> & Pick<Diagnostic, 'code' | 'message'>): Diagnostic {
  return { category: 'extension', data_freshness: '', doc_url: '', evidence: {}, id: `extension.${d.code}`, severity: 'warning', suggested_command: '', title: '', ...d };
}
