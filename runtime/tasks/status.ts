import type { RunStatus, TaskStatus } from './types.ts';

/** StatusInput is what the status of a task depends on. */
export interface StatusInput {
  current: TaskStatus;
  runs: { id: string; status: RunStatus; attempt: number; queued_ms: number }[];
  max_attempts: number;
  /** runnable-blocked: an unresolved dependency, or manual approval not yet `approved`. */
  blocked: boolean;
}

/**
 * deriveStatus is the task status, first match wins: `draft` and `canceled` are sticky; a run
 * starting/running → in_progress; a run queued/claimed → blocked/ready; else the latest terminal run (by attempt,
 * then queued_at, then id) decides; with no runs a terminal status is kept, else blocked/ready.
 */
export function deriveStatus(i: StatusInput): TaskStatus {
  if (i.current === 'draft' || i.current === 'canceled') return i.current;
  const open = i.blocked ? 'blocked' : 'ready';
  if (i.runs.some((r) => r.status === 'starting' || r.status === 'running')) return 'in_progress';
  if (i.runs.some((r) => r.status === 'queued' || r.status === 'claimed')) return open;
  const terminal = i.runs.filter((r) => r.status === 'completed' || r.status === 'failed' || r.status === 'canceled')
    .sort((a, b) => a.attempt - b.attempt || a.queued_ms - b.queued_ms || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const latest = terminal.at(-1);
  if (latest) {
    if (latest.status === 'completed') return 'completed';
    if (latest.status === 'canceled') return 'canceled';
    return latest.attempt >= i.max_attempts ? 'failed' : open;
  }
  if (i.current === 'completed' || i.current === 'failed') return i.current;
  return open;
}
