import type { FieldValidation } from '../validation/field-validation.ts';

/** WriteOptions are the `?dry_run`, `?wait` and `?field_validation` switches of PUT and DELETE. */
export interface WriteOptions {
  dryRun?: boolean;
  /** What a PUT does with fields its body or spec does not define (default strict). */
  fieldValidation?: FieldValidation;
  /** Wait for the reconcile of the written version, up to this many ms; undefined = do not wait. */
  waitMs?: number;
  /** The caller's role (undefined without authentication): writing an executable field needs admin. */
  role?: string;
  /**
   * The request body's size in bytes as received, when known and not content-encoded. NOTE: canonical JSON of any
   * part of a body is at most 6 times the body's bytes (only numbers grow: `1e20` is 21 digits), so a body
   * under a sixth of the spec cap skips serializing the spec only to measure it.
   */
  bodyBytes?: number;
}

/**
 * WriteOutcome adds whether the write was reconciled within the wait (undefined when not waited), and the warnings
 * to answer (unknown fields under `?field_validation=warn`).
 */
export type WriteOutcome<T> = T & { reconciled?: boolean; warnings?: string[] };
