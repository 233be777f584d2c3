/** WriteOptions are the `?dry_run` and `?wait` switches of PUT and DELETE. */
export interface WriteOptions {
  dryRun?: boolean;
  /** Wait for the reconcile of the written version, up to this many ms; undefined = do not wait. */
  waitMs?: number;
  /** The caller's role (undefined without authentication): writing an executable field needs admin. */
  role?: string;
}

/** WriteOutcome adds whether the write was reconciled within the wait (undefined when not waited). */
export type WriteOutcome<T> = T & { reconciled?: boolean };
