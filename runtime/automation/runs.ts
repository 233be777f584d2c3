import { createHash } from 'node:crypto';
import os from 'node:os';
import { parseDuration } from '../../codecs/duration.ts';
import { runIdOf, type AutomationRun, type FireLimit, type RunKind } from '../../store/automation-store.ts';
import type { BusEventInput, Outcome } from '../../store/event-bus.ts';
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

/** WORKER_NAME names this process in the runs' hook input and events (`worker`). */
export const WORKER_NAME = `${os.hostname()}-${process.pid}`;

/** runPayload is what a run's pre-fire hook input and its bus events carry: its refs and where it stands. */
export function runPayload(run: AutomationRun): Record<string, unknown> {
  return {
    run_id: run.id, job_id: run.job_id, trigger_id: run.trigger_id, kind: run.kind, workspace_id: run.workspace_id, agent_name: run.agent_name,
    session_id: run.session_id, attempt: run.attempt, status: run.status, reason: run.reason, scheduled_at: run.scheduled_at, worker: WORKER_NAME,
  };
}

/** runEvent is one bus event about a run (`automation.job.post_fire`, `automation.run.*`). */
export function runEvent(run: AutomationRun, type: string, outcome: Outcome, summary: string): BusEventInput {
  return { type, source: 'automation', workspace_id: run.workspace_id, session_id: run.session_id, agent_name: run.agent_name, outcome, summary, data: runPayload(run) };
}

/**
 * skippedEvent is `automation.run.skipped`, published whenever a run is recorded skipped (a refused fire: fire
 * limit, disabled, concurrency, deadline, hook denial, no workspace), so readers of the bus see every run.
 */
export function skippedEvent(run: AutomationRun): BusEventInput {
  return runEvent(run, 'automation.run.skipped', 'info', `${run.kind} run ${run.id} skipped: ${run.reason}`);
}

/** fireLimitOf reads a spec's fire_limit (defaulted by the codec) in ms. */
export function fireLimitOf(spec: OwnerSpec): FireLimit | undefined {
  const windowMs = parseDuration(spec.fire_limit?.window ?? '') ?? 0;
  return spec.fire_limit && spec.fire_limit.max > 0 && windowMs > 0 ? { max: spec.fire_limit.max, windowMs } : undefined;
}

/** webhookIdOf is a webhook trigger's id: its own `webhook_id`, else the derived `wbh_` + 16 hex of the record id. */
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
