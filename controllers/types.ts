import type { Condition, ResourceRecord, ResourceStatus } from '../store/types.ts';

/** ResourceKey identifies one record; a reconcile request carries only this. */
export interface ResourceKey {
  kind: string;
  id: string;
}

/** ConditionReport is a condition a controller reports beside Ready and Degraded (e.g. mcp_server's Connected). */
export type ConditionReport = Omit<Condition, 'last_transition_time'>;

/**
 * ReconcileResult is what a reconcile decided. A thrown error means "retry with backoff"; `degraded` is
 * terminal (no retry until the record or its dependencies change, or the next resync) unless `requeueAfterMs`
 * asks to look again: the observed world has not converged yet (e.g. an MCP server is unreachable).
 * `conditions` and `fields` are what the controller observed, written into status beside Ready and Degraded.
 */
export type ReconcileResult = (
  | { outcome: 'ready'; message: string }
  | { outcome: 'degraded'; reason: string; message: string }
) & {
  conditions?: ConditionReport[];
  fields?: Record<string, unknown>;
  requeueAfterMs?: number;
};

/**
 * KindController reconciles the records of one kind into its runtime registry. `record` is the record as
 * read (undefined = deleted); the controller works towards it, so running it twice is harmless. `status` is
 * the status the last reconcile wrote (e.g. to keep a last-seen time or grow a backoff).
 */
export interface KindController {
  readonly kind: string;
  reconcile(key: ResourceKey, record: ResourceRecord | undefined, status?: ResourceStatus): Promise<ReconcileResult>;
}
