import { createHash } from 'node:crypto';
import { parseDuration } from '../../codecs/duration.ts';
import { runIdOf, type AutomationRun, type FireLimit, type RunKind } from '../../store/automation-store.ts';
import { maxAttemptsOf, type Retry } from './queue.ts';

/** OwnerSpec is the part of a job's or trigger's spec a firing reads. */
export interface OwnerSpec {
  name: string;
  enabled: boolean;
  workspace_id?: string;
  agent_name?: string;
  prompt?: string;
  retry?: Retry;
  fire_limit?: { max: number; window: string };
  /** How many of its runs the job's or trigger's history keeps (default and most: the store's per-owner retention). */
  history_limit?: number;
  task?: unknown;
  event?: string;
  filter?: Record<string, string>;
  webhook_id?: string;
  endpoint_slug?: string;
  webhook_secret_ref?: string;
  include_own_events?: boolean;
  concurrency_policy?: 'allow' | 'forbid' | 'replace';
  starting_deadline?: string;
}

/** fireLimitOf reads a spec's fire_limit (defaulted by the codec) in ms. */
export function fireLimitOf(spec: OwnerSpec): FireLimit | undefined {
  const windowMs = parseDuration(spec.fire_limit?.window ?? '') ?? 0;
  return spec.fire_limit && spec.fire_limit.max > 0 && windowMs > 0 ? { max: spec.fire_limit.max, windowMs } : undefined;
}

/** webhookIdOf is a webhook trigger's id: its own `webhook_id`, else the derived `wbh_` + 16 hex of the record id (kinds.md §1.9). */
export function webhookIdOf(recordId: string, spec: OwnerSpec): string {
  return spec.webhook_id || `wbh_${createHash('sha256').update(recordId).digest('hex').slice(0, 16)}`;
}

/** NewRun is what a firing knows when it records its run. */
export interface NewRun {
  fireKey: string;
  kind: RunKind;
  jobId?: string;
  triggerId?: string;
  spec: OwnerSpec | undefined;
  workspaceId?: string;
  scheduledAt: number;
  eventId?: string;
}

/** newRun builds the queued run of a firing (its id derived from the firing's key). */
export function newRun(n: NewRun): AutomationRun {
  const now = new Date().toISOString();
  return {
    id: runIdOf(n.fireKey), fire_key: n.fireKey, kind: n.kind, job_id: n.jobId ?? '', trigger_id: n.triggerId ?? '',
    workspace_id: n.spec?.workspace_id || n.workspaceId || '', agent_name: n.spec?.agent_name ?? '',
    status: 'queued', reason: '', session_id: '', previous_session_ids: [], attempt: 1, max_attempts: maxAttemptsOf(n.spec?.retry),
    error: '', event_id: n.eventId ?? '', task_id: '', scheduled_at: new Date(n.scheduledAt).toISOString(), created_at: now, started_at: '', finished_at: '',
  };
}
