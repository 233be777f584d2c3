import type { ResourceScope } from '../codecs/types.ts';

export type { ResourceScope };

/** Ref names who owns a record or where it came from, as `{kind, id}`. */
export interface Ref {
  kind: string;
  id: string;
}

/** ResourceRecord is the canonical stored form of a desired-state resource. */
export interface ResourceRecord<S = unknown> {
  kind: string;
  id: string;
  scope: ResourceScope;
  owner: Ref;
  source: Ref;
  spec: S;
  version: number;
  created_at: string;
  updated_at: string;
}

/** Condition is one Kubernetes-style status condition (`Ready` or `Degraded`). */
export interface Condition {
  /** Ready and Degraded for every kind; a controller may add its own (mcp_server: Connected, hook.binding: EventEmitted, agent: ModelKnown). */
  type: 'Ready' | 'Degraded' | 'Connected' | 'EventEmitted' | 'ModelKnown';
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  last_transition_time: string;
}

/** ResourceStatus is a record's reconcile status, written only by its controller; it never bumps `version`. */
export interface ResourceStatus {
  observed_version: number;
  conditions: Condition[];
  last_reconciled_at: string;
  last_error: string;
  /** Kind-specific observed fields (mcp_server: tools_discovered, server_info, last_connected_at). */
  [field: string]: unknown;
}

/** PutRequest is one create-or-update of a record with optimistic concurrency. */
export interface PutRequest {
  kind: string;
  id: string;
  scope: ResourceScope;
  owner: Ref;
  source: Ref;
  /** The canonical spec, as decoded by the kind's codec. */
  spec: unknown;
  expectedVersion: number;
  dryRun?: boolean;
}

/** PutResult says what a put did: `created` (201 vs 200) and `changed` (false = idempotent no-op). */
export interface PutResult {
  record: ResourceRecord;
  /**
   * The record exactly as the store wrote it (canonical JSON). NOTE: a route answers with these bytes instead of
   * re-serializing `record`; `record` is parsed from them only when read.
   */
  readonly recordJson?: string;
  created: boolean;
  changed: boolean;
  /** The global revision of the record's last change (the existing one when unchanged; 0 on a dry run). */
  revision: number;
}

/** DeleteResult carries the record as it was and the revision of the deletion (0 on a dry run). */
export interface DeleteResult {
  record: ResourceRecord;
  revision: number;
}

/** ListFilter selects records; every given field must match. `limit` 0 means no limit. */
export interface ListFilter {
  kind?: string;
  scope?: { kind: string; id?: string };
  owner?: Ref;
  source?: Ref;
  limit?: number;
}

/** ChangeEvent is one entry of the change log: a put or delete at a global revision. */
export interface ChangeEvent {
  revision: number;
  type: 'put' | 'delete';
  kind: string;
  id: string;
  version: number;
  record: ResourceRecord;
}

/** Diagnostic is the spec's diagnostic object: the `{error, diagnostic}` bodies of the API and the diagnostics extensions show. */
export interface Diagnostic {
  category: string;
  code: string;
  data_freshness: string;
  doc_url: string;
  evidence: Record<string, unknown>;
  id: string;
  message: string;
  severity: string;
  suggested_command: string;
  title: string;
}
