import type { ResourceRecord } from '../store/types.ts';

/** ResourceKey identifies one record; a reconcile request carries only this. */
export interface ResourceKey {
  kind: string;
  id: string;
}

/**
 * ReconcileResult is what a reconcile decided. A thrown error means "retry with backoff"; `degraded` is
 * terminal (no retry until the record or its dependencies change, or the next resync).
 */
export type ReconcileResult =
  | { outcome: 'ready'; message: string }
  | { outcome: 'degraded'; reason: string; message: string };

/**
 * KindController reconciles the records of one kind into its runtime registry. `record` is the record as
 * read (undefined = deleted); the controller works towards it, so running it twice is harmless.
 */
export interface KindController {
  readonly kind: string;
  reconcile(key: ResourceKey, record: ResourceRecord | undefined): Promise<ReconcileResult>;
}
