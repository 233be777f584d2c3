/** Sets and limits of the task family. */
export const TASK_STATUSES = ['draft', 'pending', 'blocked', 'ready', 'in_progress', 'completed', 'failed', 'canceled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];
export const RUN_STATUSES = ['queued', 'claimed', 'starting', 'running', 'completed', 'failed', 'canceled', 'needs_attention'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const PRIORITY_RANK = { low: 10, medium: 20, high: 30, urgent: 40 } as const;
export type Priority = keyof typeof PRIORITY_RANK;
export const LEASED: readonly RunStatus[] = ['claimed', 'starting', 'running'];
/** LIVE are the statuses of a run that is not over; a task has at most one live run (README "Tasks"). */
export const LIVE: readonly RunStatus[] = ['queued', ...LEASED];
export const TERMINAL_RUN: readonly RunStatus[] = ['completed', 'failed', 'canceled'];
export const IDENTITY_KINDS = ['human', 'agent_session', 'automation', 'extension', 'network_peer', 'daemon', 'pool'] as const;

export const LIMITS = {
  maxAttemptsDefault: 3, maxAttempts: 10, metadataBytes: 16 * 1024, resultBytes: 64 * 1024, depth: 8, dependencies: 32,
  children: 64, bulk: 50, retryChain: 10, forcePerMinute: 10, leaseDefaultS: 300, leaseMaxS: 86_400,
} as const;

export interface Identity { kind: string; ref: string }

/** Task is the stored and returned task (plus its create fields). */
export interface Task {
  id: string;
  identifier: string;
  title: string;
  description: string;
  scope: 'global' | 'workspace';
  workspace_id: string;
  parent_task_id: string;
  priority: Priority;
  status: TaskStatus;
  max_attempts: number;
  auto_enqueue_on_ready: boolean;
  approval_policy: 'none' | 'manual';
  approval_state: 'not_required' | 'pending' | 'approved' | 'rejected';
  paused: boolean;
  paused_reason: string;
  network_channel: string;
  owner: Identity | null;
  created_by: Identity;
  origin: Identity;
  metadata: Record<string, unknown>;
  required_capabilities: string[];
  preferred_capabilities: string[];
  depends_on: string[];
  depth: number;
  latest_event_seq: number;
  created_at: string;
  updated_at: string;
}

/** TaskRun is one attempt at a task; while leased it carries the lease (never the raw claim token). */
export interface TaskRun {
  id: string;
  task_id: string;
  status: RunStatus;
  attempt: number;
  queued_at: string;
  queued_ms: number;
  claimed_at: string;
  started_at: string;
  ended_at: string;
  heartbeat_at: string;
  lease_until_ms: number;
  lease_ms: number;
  session_id: string;
  /** The claiming session's agent ('' until an agent session claims it), so the run's events name their agent. */
  agent_name?: string;
  claimed_by: Identity | null;
  claim_token_hash: string;
  idempotency_key: string;
  network_channel: string;
  origin: Identity;
  previous_run_id: string;
  error: string;
  failure_kind: string;
  metadata: Record<string, unknown>;
  result: unknown;
}
