import type { AutomationRun, RunFilter, RunKind } from '../../store/automation-store.ts';

/** AUTOMATION_QUEUE is the BullMQ queue every firing goes through (schedulers, triggers, webhooks, fire now). */
export const AUTOMATION_QUEUE = 'automation';

/**
 * FireData is a firing's BullMQ job data: what fired (a job or a trigger) and, for trigger, webhook and manual
 * firings, the run's identity and the already rendered prompt. A scheduler tick carries only `{kind, job_id}`:
 * its BullMQ job id (`repeat:<job id>:<ms>`) names the tick.
 */
export interface FireData {
  kind: RunKind;
  job_id?: string;
  trigger_id?: string;
  /** The firing's name; the run id is derived from it (runIdOf). Defaults to the BullMQ job id. */
  fire_key?: string;
  /** The prompt to send; defaults to the record's `prompt`. */
  prompt?: string;
  /** The workspace to run in, where the record does not name one (a global trigger fired by a workspace event). */
  workspace_id?: string;
  event_id?: string;
  /** When the firing was due, ms since the epoch. */
  scheduled_at?: number;
  /** The agent session that fired it (a manual fire through svc__automation_jobs_trigger): its session is held to that session's tool policy. */
  started_by_session_id?: string;
}

/** AutomationView is a job or trigger as the automation routes show it: the record, its status and its runs. */
export interface AutomationView {
  id: string;
  kind: string;
  scope: { kind: string; id?: string };
  version: number;
  spec: Record<string, unknown>;
  enabled: boolean;
  /** Ready, Degraded, or Pending while the controller has not reconciled the record's version yet. */
  state: string;
  status?: unknown;
  /** The next scheduled firing (jobs), RFC 3339, or null. */
  next_fire_at: string | null;
  last_run: AutomationRun | null;
  /** Webhook triggers: the path senders POST to. */
  webhook_path?: string;
}

/** AutomationReader is what the automation tools and routes read and do (runtime/automation/automation-service.ts). */
export interface AutomationReader {
  listJobs(workspaceId?: string): Promise<AutomationView[]>;
  getJob(id: string): Promise<AutomationView>;
  fireJob(id: string, body?: { workspace_id?: string }, opts?: { startedBy?: string }): Promise<AutomationRun>;
  listTriggers(workspaceId?: string): Promise<AutomationView[]>;
  getTrigger(id: string): Promise<AutomationView>;
  fireTrigger(id: string, body?: { workspace_id?: string; payload?: unknown }): Promise<AutomationRun>;
  history(kind: 'job' | 'trigger', id: string, f: Omit<RunFilter, 'job_id' | 'trigger_id'>): Promise<AutomationRun[]>;
  listRuns(f: RunFilter): Promise<AutomationRun[]>;
  getRun(id: string): Promise<AutomationRun>;
}
