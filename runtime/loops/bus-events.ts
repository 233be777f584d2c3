import type { BusEventInput, Outcome } from '../../store/event-bus.ts';
import { isTerminal, LOOP_BUS_EVENT_NAMES } from './types.ts';

export { LOOP_BUS_EVENT_NAMES };


const outcomeOf = (to: string): Outcome => (to === 'done' || to === 'no-op' ? 'success' : isTerminal(to) ? 'failure' : to === 'needs-approval' ? 'warning' : 'info');

/**
 * loopBusEvents are the bus events of one status change: `loop.run.status_changed` always, `loop.run.started` for a
 * new run, `loop.run.needs_approval` when it parks on a gate, `loop.run.completed` (done, no-op) or `loop.run.failed`
 * (every other terminal status) when it ends. `data` names the run, never its inputs or outputs.
 */
export function loopBusEvents(run: { id: string; workspace_id: string; loop_name: string }, from: string, to: string, cause: string, reason: string, started = false): BusEventInput[] {
  const data = { loop_run_id: run.id, run_id: run.id, loop_name: run.loop_name, status: to, from, cause, reason: reason.slice(0, 1000) };
  const base = { source: 'loops', workspace_id: run.workspace_id, outcome: outcomeOf(to), data };
  const out: BusEventInput[] = [];
  if (started) out.push({ ...base, type: 'loop.run.started', outcome: 'info', summary: `loop run ${run.id} of ${run.loop_name} started` });
  out.push({ ...base, type: 'loop.run.status_changed', summary: `loop run ${run.id} of ${run.loop_name}: ${from || 'new'} → ${to} (${cause})` });
  if (to === 'needs-approval') out.push({ ...base, type: 'loop.run.needs_approval', summary: `loop run ${run.id} of ${run.loop_name} waits for approval: ${reason}` });
  if (isTerminal(to)) out.push({ ...base, type: to === 'done' || to === 'no-op' ? 'loop.run.completed' : 'loop.run.failed', summary: `loop run ${run.id} of ${run.loop_name} ended ${to} (${cause})` });
  return out;
}
