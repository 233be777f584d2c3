/** SUPPORT_BUNDLE_SCHEMA is the manifest's `schema_version`. */
export const SUPPORT_BUNDLE_SCHEMA = 'support-bundle.v1';

/** BundleCaps are the byte caps: the whole bundle, one artifact, the log tail, the event summary. */
export const BUNDLE_CAPS = {
  bundle: 25 * 1024 * 1024,
  artifact: 1024 * 1024,
  logTail: 2 * 1024 * 1024,
  eventSummary: 5 * 1024 * 1024,
} as const;

/** BUNDLE_TTL_MS is how long an operation and its archive are kept (24 h), then Redis removes them. */
export const BUNDLE_TTL_MS = 24 * 60 * 60 * 1000;

/** TRUNCATION_MARKER replaces an artifact over its cap. */
export const TRUNCATION_MARKER = '{"truncated":true,"reason":"artifact exceeded byte cap"}';

/** OperationStatus is where a bundle operation is: asked for, being built, ready to download, or given up. */
export type OperationStatus = 'pending' | 'running' | 'completed' | 'failed';

/** BundleArtifact is one file of a bundle as its manifest lists it; `bytes` and `sha256` describe the file as archived. */
export interface BundleArtifact {
  path: string;
  bytes: number;
  sha256: string;
  included: boolean;
  /** Why the file is not in the archive (empty when it is). */
  omitted_reason: string;
  redaction_version: string;
  /** The file is the truncation marker in place of content over its cap. */
  truncated: boolean;
}

/** BundleManifest is `manifest.json` (SupportBundleOperation.manifest, plus each artifact's SHA-256). */
export interface BundleManifest {
  schema_version: string;
  redaction_version: string;
  operation_id: string;
  created_at: string;
  bundle_max_bytes: number;
  artifact_max_bytes: number;
  log_tail_max_bytes: number;
  event_summary_max_bytes: number;
  artifacts: BundleArtifact[];
}

/** SupportBundleOperation is the spec's operation: a bundle asked for, then built by a controller. */
export interface SupportBundleOperation {
  operation_id: string;
  status: OperationStatus;
  created_at: string;
  updated_at: string;
  completed_at: string;
  failure_reason: string;
  file_name: string;
  status_url: string;
  /** Set once completed. */
  download_url: string;
  size_bytes: number;
  /** The archive's SHA-256 (its address in the artifact store), set once completed. */
  sha256: string;
  /** Whether readiness, queue depths and resource statuses go in (`include_status`, default true). */
  include_status: boolean;
  manifest: BundleManifest | null;
}

/** BundleRequest is the decoded body of `POST /api/support/bundles`. */
export interface BundleRequest {
  include_status: boolean;
}
