import type { BusEventInput, Outcome } from '../../store/event-bus.ts';
import type { SessionEvent } from '../../store/session-store.ts';

const TEXT_CAP = 4096;

/**
 * busEventsOf maps one recorded session event to the catalog events it stands for on the event bus (the
 * session's own log keeps every row; the bus carries lifecycle, turn, tool and permission points, not each
 * streamed chunk). The row is already redacted, so the bus event is too. NOTE: this is the one place session
 * rows become bus events; a catalog event the service does not emit is listed in hooks' NOT_EMITTED.
 */
export function busEventsOf(row: SessionEvent, origin = ''): BusEventInput[] {
  const c = row.content as Record<string, unknown>;
  const base = { source: 'sessions', session_id: row.session_id, workspace_id: row.workspace_id, agent_name: row.agent_name };
  // NOTE: `origin` names what started the session (`automation.trigger/<id>`, …), so a trigger can tell its own
  // sessions' events from others' (triggers.ts) and filters can match it.
  const ev = (type: string, outcome: Outcome, summary: string, data: Record<string, unknown>): BusEventInput[] =>
    [{ ...base, type, outcome, summary, data: { turn_id: row.turn_id, sequence: row.sequence, ...(origin ? { origin } : {}), ...data } }];
  switch (row.type) {
    case 'user_message':
      return ev('turn.start', 'info', 'turn started', { text: String(c.text ?? '').slice(0, TEXT_CAP) });
    case 'done':
      return ev('turn.end', 'success', 'turn completed', { stop_reason: c.stop_reason ?? '' });
    case 'error':
      return ev('turn.end', 'failure', 'turn failed', { error: String(c.error ?? '').slice(0, TEXT_CAP) });
    case 'tool_result': {
      const failed = Boolean(c.tool_error);
      return ev(failed ? 'tool.post_error' : 'tool.post_call', failed ? 'failure' : 'success', `tool ${String(c.tool_name ?? '')} ${failed ? 'failed' : 'completed'}`,
        { tool_name: c.tool_name ?? '', tool_call_id: c.tool_call_id ?? '', kind: c.kind ?? '' });
    }
    case 'permission': {
      const data = {
        request_id: c.request_id, tool_call_id: c.tool_call_id ?? '', tool_name: c.tool_name ?? '', kind: c.kind ?? '', title: c.title ?? '',
        decision: c.decision ?? '', decided_by: c.decided_by ?? '',
      };
      if (c.action === 'request') return ev('permission.request', 'warning', `permission requested: ${String(c.title ?? '')}`, data);
      const denied = !String(c.decision ?? '').startsWith('allow');
      return ev(denied ? 'permission.denied' : 'permission.resolved', 'info', `permission ${String(c.decision ?? '')}`, data);
    }
    case 'session_stopped': {
      const reason = String(c.stop_reason ?? row.stop_reason ?? '');
      const failure = (c.failure ?? row.failure) as { kind?: string; summary?: string } | undefined;
      const data = { stop_reason: reason, detail: String(c.text ?? row.stop_detail ?? ''), failure: failure ?? null };
      const out = ev('session.post_stop', failure ? 'failure' : 'success', `session stopped: ${reason}`, data);
      if (reason === 'agent_crashed') out.push(...ev('agent.crashed', 'failure', `agent ${row.agent_name} crashed`, data));
      return out;
    }
    default:
      return [];
  }
}
