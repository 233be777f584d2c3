import { expect } from 'chai';
import { deriveStatus, type StatusInput } from '../../runtime/tasks/status.ts';
import type { RunStatus, TaskStatus } from '../../runtime/tasks/types.ts';

const run = (status: RunStatus, attempt = 1, queued_ms = attempt, id = `r${attempt}`) => ({ id, status, attempt, queued_ms });

// [name, current, runs, max_attempts, blocked, expected] — the status rules, first match wins.
const TABLE: [string, TaskStatus, StatusInput['runs'], number, boolean, TaskStatus][] = [
  ['draft is sticky even with a running run', 'draft', [run('running')], 3, false, 'draft'],
  ['canceled is sticky even with a queued run', 'canceled', [run('queued')], 3, false, 'canceled'],
  ['a running run → in_progress', 'ready', [run('failed', 1), run('running', 2)], 3, false, 'in_progress'],
  ['a starting run → in_progress, even if blocked', 'blocked', [run('starting')], 3, true, 'in_progress'],
  ['a queued run, not blocked → ready', 'pending', [run('queued')], 3, false, 'ready'],
  ['a claimed run, not blocked → ready', 'ready', [run('claimed')], 3, false, 'ready'],
  ['a queued run, blocked → blocked', 'ready', [run('queued')], 3, true, 'blocked'],
  ['latest terminal completed → completed', 'ready', [run('failed', 1), run('completed', 2)], 3, false, 'completed'],
  ['latest terminal canceled → canceled', 'ready', [run('completed', 1), run('canceled', 2)], 3, false, 'canceled'],
  ['failed with attempts left → ready', 'in_progress', [run('failed', 1)], 3, false, 'ready'],
  ['failed with attempts left and blocked → blocked', 'in_progress', [run('failed', 1)], 3, true, 'blocked'],
  ['failed with attempts exhausted → failed', 'in_progress', [run('failed', 1), run('failed', 2), run('failed', 3)], 3, false, 'failed'],
  ['latest by attempt, not by list order', 'ready', [run('completed', 2), run('failed', 1)], 3, false, 'completed'],
  ['same attempt: latest by queued_at', 'ready', [run('failed', 1, 5, 'a'), run('completed', 1, 9, 'b')], 1, false, 'completed'],
  ['same attempt and queued_at: latest by id', 'ready', [run('completed', 1, 5, 'a'), run('failed', 1, 5, 'b')], 1, false, 'failed'],
  ['no runs, terminal kept: completed', 'completed', [], 3, false, 'completed'],
  ['no runs, terminal kept: failed', 'failed', [], 3, true, 'failed'],
  ['no runs, pending → ready', 'pending', [], 3, false, 'ready'],
  ['no runs, blocked by a dependency → blocked', 'pending', [], 3, true, 'blocked'],
  ['no runs, blocked task unblocked → ready', 'blocked', [], 3, false, 'ready'],
  ['needs_attention alone is not terminal → ready/blocked', 'ready', [run('needs_attention')], 3, true, 'blocked'],
];

describe('Task status derivation (table-driven)', () => {
  for (const [name, current, runs, max_attempts, blocked, expected] of TABLE) {
    it(name, () => expect(deriveStatus({ current, runs, max_attempts, blocked })).to.equal(expected));
  }
});
