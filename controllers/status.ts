import type { Condition, ResourceStatus } from '../store/types.ts';
import type { ReconcileResult } from './types.ts';

/**
 * reconcileStatus builds a record's status from a reconcile's result, keeping each condition's
 * last_transition_time unless it changed; a degraded result's message is the last error. `terminal` marks a
 * degraded result as Degraded (false: a failure that will be retried).
 */
export function reconcileStatus(prev: ResourceStatus | undefined, version: number, r: ReconcileResult, terminal: boolean): ResourceStatus {
  const now = new Date().toISOString();
  const cond = (type: Condition['type'], status: Condition['status'], reason: string, message: string): Condition => {
    const old = prev?.conditions.find((c) => c.type === type);
    return { type, status, reason, message, last_transition_time: old && old.status === status ? old.last_transition_time : now };
  };
  const conditions = r.outcome === 'ready'
    ? [cond('Ready', 'True', 'Reconciled', r.message), cond('Degraded', 'False', 'Reconciled', '')]
    : [cond('Ready', 'False', r.reason, r.message), cond('Degraded', terminal ? 'True' : 'False', r.reason, r.message)];
  for (const c of r.conditions ?? []) conditions.push(cond(c.type, c.status, c.reason, c.message));
  return { ...r.fields, observed_version: version, conditions, last_reconciled_at: now, last_error: r.outcome === 'degraded' ? r.message : '' };
}
