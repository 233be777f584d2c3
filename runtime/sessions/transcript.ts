import type { SessionEvent } from '../../store/session-store.ts';

/** UiPart is one part of a UI message (AI SDK UI message shape). */
export type UiPart = Record<string, unknown> & { type: string };
/** UiMessage is one canonical replay message of a transcript. */
export interface UiMessage { id: string; role: 'system' | 'user' | 'assistant'; metadata?: Record<string, unknown>; parts: UiPart[] }

const TERMINAL = new Set(['done', 'error']);

function payload(e: SessionEvent): Record<string, unknown> {
  const c = e.content as Record<string, unknown>;
  return { type: e.type, session_id: e.session_id, turn_id: e.turn_id, timestamp: e.timestamp, text: c.text, title: c.title, tool_call_id: c.tool_call_id, stop_reason: c.stop_reason, error: c.error, usage: c.usage, runtime: c.runtime, ...(e.failure ? { failure: e.failure } : {}) };
}

/**
 * transcript projects stored events into canonical replay messages: user messages, a system
 * message per transcript marker, and one assistant message per turn, completed by its `done` or `error`.
 */
export function transcript(events: SessionEvent[]): UiMessage[] {
  const out: UiMessage[] = [];
  let assistant: UiMessage | undefined;
  const tools = new Map<string, UiPart>();
  const finish = () => {
    for (const p of assistant?.parts ?? []) if (p.state === 'streaming') p.state = 'done';
    assistant = undefined;
    tools.clear();
  };
  for (const e of events) {
    const c = e.content as Record<string, any>;
    if (e.type === 'user_message') {
      finish();
      out.push({ id: `${e.id}-user`, role: 'user', parts: [{ type: 'text', text: c.text ?? '', state: 'done' }] });
      continue;
    }
    if (e.type.startsWith('transcript_marker.')) {
      out.push({ id: `${e.id}-runtime-marker`, role: 'system', parts: [{ type: 'text', text: c.summary ?? c.text ?? c.kind ?? '', state: 'done' }], metadata: { kind: c.kind } });
      continue;
    }
    if (!assistant || assistant.id !== e.turn_id) {
      finish();
      assistant = { id: e.turn_id || `${e.id}-assistant`, role: 'assistant', parts: [] };
      out.push(assistant);
    }
    const parts = assistant.parts;
    const last = parts.at(-1);
    switch (e.type) {
      case 'agent_message':
      case 'thought': {
        const type = e.type === 'thought' ? 'reasoning' : 'text';
        if (last?.type === type && last.state === 'streaming') last.text = `${last.text}${c.text ?? ''}`;
        else parts.push({ type, text: c.text ?? '', state: 'streaming' });
        break;
      }
      case 'tool_call':
      case 'tool_result': {
        const id = String(c.tool_call_id ?? '');
        const name = String(c.tool_name || c.title || '');
        let part = tools.get(id);
        if (!part) {
          part = { type: name ? `tool-${name}` : 'dynamic-tool', toolCallId: id, ...(name ? {} : { toolName: 'tool' }), state: 'input-available', input: c.tool_input ?? {} };
          tools.set(id, part);
          parts.push(part);
        }
        if (e.type === 'tool_result') {
          const r = c.tool_result ?? {};
          if (c.tool_error) Object.assign(part, { state: 'output-error', errorText: r.error || r.stderr || r.content || r.stdout || 'tool failed' });
          else Object.assign(part, { state: 'output-available', output: r });
        }
        break;
      }
      case 'permission':
        parts.push({ type: 'data-svc-permission', id: String(c.request_id ?? ''), data: payload(e) });
        break;
      default:
        if (!TERMINAL.has(e.type)) parts.push({ type: 'data-svc-event', data: payload(e) });
    }
    if (TERMINAL.has(e.type)) {
      if (e.type === 'error') parts.push({ type: 'data-svc-event', data: payload(e) });
      finish();
    }
  }
  finish();
  return out;
}

/** RepairReport is a SessionRepair before it is persisted. */
export interface RepairReport {
  issues: { code: string; detail: string; event_id: string; severity: string; turn_id: string }[];
  actions: { code: string; event_id: string; persisted: boolean; tool_call_id: string; tool_name: string; turn_id: string }[];
  blocked: boolean;
}

/**
 * planRepair inspects a stopped session's events: sequence problems, then the final turn's
 * tool calls with no result and a missing terminal event, which repair appends (append-only).
 */
export function planRepair(events: SessionEvent[], state: string, stopReason: string, force: boolean): RepairReport {
  const r: RepairReport = { issues: [], actions: [], blocked: false };
  const issue = (code: string, severity: string, detail: string, e?: SessionEvent) => {
    r.issues.push({ code, severity, detail, event_id: e?.id ?? '', turn_id: e?.turn_id ?? '' });
    if (severity === 'error') r.blocked = true;
  };
  let prev = 0;
  for (const e of events) {
    if (e.sequence === prev) issue('event_sequence_duplicate', 'error', `sequence ${e.sequence} repeats`, e);
    else if (e.sequence < prev) issue('event_sequence_regression', 'error', `sequence ${e.sequence} after ${prev}`, e);
    else if (e.sequence > prev + 1) issue('event_sequence_gap', 'warning', `sequences ${prev + 1}..${e.sequence - 1} are missing`, e);
    prev = Math.max(prev, e.sequence);
  }
  if (state !== 'stopped') issue('session_not_stopped', 'error', 'only stopped sessions are repaired');
  else if (!['agent_crashed', 'error'].includes(stopReason) && !force) issue('stop_reason_requires_force', 'error', `stop reason "${stopReason}" needs force=true`);
  const lastTurn = [...events].reverse().find((e) => e.turn_id)?.turn_id;
  if (!lastTurn) {
    issue('no_repairable_turn', 'info', 'the session has no turn');
    return r;
  }
  const turn = events.filter((e) => e.turn_id === lastTurn);
  const results = new Set(turn.filter((e) => e.type === 'tool_result').map((e) => String((e.content as { tool_call_id?: string }).tool_call_id)));
  const open = new Map<string, SessionEvent>();
  for (const e of turn.filter((x) => x.type === 'tool_call')) {
    const id = String((e.content as { tool_call_id?: string }).tool_call_id ?? '');
    if (!id) issue('dangling_tool_call_missing_id', 'warning', 'a tool call has no id', e);
    else if (!results.has(id)) open.set(id, e);
  }
  for (const [id, e] of open) r.actions.push({ code: 'append_interrupted_tool_result', event_id: e.id, persisted: false, tool_call_id: id, tool_name: String((e.content as { tool_name?: string }).tool_name ?? ''), turn_id: lastTurn });
  if (turn.some((e) => TERMINAL.has(e.type))) {
    if (!open.size) issue('terminal_event_already_exists', 'info', 'the last turn already ended');
  } else {
    r.actions.push({ code: 'append_terminal_error', event_id: turn.at(-1)!.id, persisted: false, tool_call_id: '', tool_name: '', turn_id: lastTurn });
  }
  if (!r.actions.length && !r.issues.some((i) => i.code === 'terminal_event_already_exists')) issue('no_repairable_turn', 'info', 'nothing to repair');
  return r;
}
