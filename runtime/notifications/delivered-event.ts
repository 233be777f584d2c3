import type { BusEvent } from '../../store/event-bus.ts';
import type { FilterSubject } from '../../codecs/event-filter.ts';
import type { DeliveredEvent } from './types.ts';

const text = (v: unknown): string | undefined => (typeof v === 'string' && v ? v : undefined);

/**
 * busSequence turns a bus entry id (`<ms>-<n>`) into one int that orders every bus event: ms × 1000 + n.
 * NOTE: the same event always gets the same sequence, so a redelivery carries what the first delivery did.
 */
export function busSequence(id: string): number {
  const [ms, n] = id.split('-');
  return Number(ms) * 1000 + Math.min(Number(n) || 0, 999);
}

/** toDeliveredEvent maps a bus event to the delivered event shape; the bus data is already redacted. */
export function toDeliveredEvent(ev: BusEvent): DeliveredEvent {
  const d = ev.data ?? {};
  const payload: Record<string, unknown> = { ...d, ...(ev.session_id ? { session_id: ev.session_id } : {}) };
  const out: DeliveredEvent = { id: ev.id, type: ev.type, outcome: ev.outcome, sequence: busSequence(ev.id), timestamp: ev.timestamp };
  const optional: [keyof DeliveredEvent, string | undefined][] = [
    ['workspace_id', text(ev.workspace_id)], ['agent', text(ev.agent_name)], ['provider', text(d.provider)],
    ['task_id', text(d.task_id)], ['run_id', text(d.run_id)], ['summary', text(ev.summary)],
  ];
  for (const [k, v] of optional) if (v) (out as unknown as Record<string, unknown>)[k] = v;
  if (Object.keys(payload).length) out.payload = payload;
  return out;
}

/** filterSubject is what a preset filter reads from a delivered event. */
export function filterSubject(ev: DeliveredEvent): FilterSubject {
  return {
    severity: ev.outcome, workspace: ev.workspace_id ?? '', agent: ev.agent ?? '', provider: ev.provider ?? '',
    event: ev.type, task: ev.task_id ?? '', run: ev.run_id ?? '',
  };
}
