import type { SessionEvent } from '../store/session-store.ts';

/** UiChunk is one chunk of the AI SDK UI message stream (protocol v1). */
export type UiChunk = Record<string, unknown> & { type: string };

/** eventPayload is the event payload: the event's content fields a UI needs. */
function eventPayload(e: SessionEvent): Record<string, unknown> {
  const c = e.content as Record<string, unknown>;
  return {
    type: e.type, session_id: e.session_id, turn_id: e.turn_id, request_id: c.request_id, timestamp: e.timestamp,
    text: c.text, title: c.title, tool_call_id: c.tool_call_id, stop_reason: c.stop_reason, action: c.action,
    resource: c.resource, decision: c.decision, error: c.error, usage: c.usage, runtime: c.runtime, raw: c.raw,
  };
}

const FINISH: Record<string, string> = { '': 'stop', end_turn: 'stop', max_tokens: 'length' };

/**
 * UiMessageStreamEncoder turns one turn's session events into AI SDK UI message stream chunks:
 * text and reasoning blocks never overlap, tool calls become tool-input and tool-output chunks, permissions
 * and other events become data chunks, and the stream ends with `finish`.
 */
export class UiMessageStreamEncoder {
  private open?: { kind: 'text' | 'reasoning'; id: string };
  private counters = { text: 0, reasoning: 0 };
  private toolsStarted = new Set<string>();
  private inputsSent = new Set<string>();
  finished = false;

  constructor(readonly messageId: string) {}

  start(): UiChunk[] {
    return [{ type: 'start', messageId: this.messageId }];
  }

  private close(): UiChunk[] {
    if (!this.open) return [];
    const end = { type: `${this.open.kind}-end`, id: this.open.id };
    this.open = undefined;
    return [end];
  }

  private block(kind: 'text' | 'reasoning', delta: string): UiChunk[] {
    const out: UiChunk[] = [];
    if (this.open?.kind !== kind) {
      out.push(...this.close());
      this.counters[kind] += 1;
      this.open = { kind, id: `${this.messageId}-${kind}-${this.counters[kind]}` };
      out.push({ type: `${kind}-start`, id: this.open.id });
    }
    out.push({ type: `${kind}-delta`, id: this.open!.id, delta });
    return out;
  }

  /** push encodes one event; after a terminal event (`done`, `error`, `session_stopped`) it returns the finish. */
  push(e: SessionEvent): UiChunk[] {
    if (this.finished) return [];
    const c = e.content as Record<string, any>;
    // NOTE: a queued prompt that a cancel or an interrupting prompt drops gets this marker in its own turn.
    if (c.kind === 'transcript_marker.prompt_dropped') return this.fail('the queued prompt was dropped before its turn ran (cancelled or interrupted)');
    switch (e.type) {
      case 'agent_message':
        return this.block('text', String(c.text ?? ''));
      case 'thought':
        return this.block('reasoning', String(c.text ?? ''));
      case 'tool_call':
      case 'tool_result': {
        const out = this.close();
        const id = String(c.tool_call_id || `${this.messageId}-tool`);
        const name = String(c.tool_name || c.title || 'tool');
        if (!this.toolsStarted.has(id)) {
          this.toolsStarted.add(id);
          out.push({ type: 'tool-input-start', toolCallId: id, toolName: name });
        }
        const input = c.tool_input ?? c.raw?.rawInput;
        const hasInput = input !== undefined && input !== null && !(typeof input === 'object' && Object.keys(input).length === 0);
        if (!this.inputsSent.has(id) && (hasInput || e.type === 'tool_result')) {
          this.inputsSent.add(id);
          out.push({ type: 'tool-input-available', toolCallId: id, toolName: name, input: hasInput ? input : {} });
        }
        out.push(e.type === 'tool_call'
          ? { type: 'data-svc-event', data: eventPayload(e) }
          : { type: 'tool-output-available', toolCallId: id, output: eventPayload(e) });
        return out;
      }
      case 'permission':
        return [...this.close(), { type: 'data-svc-permission', id: String(c.request_id || c.tool_call_id || ''), data: eventPayload(e) }];
      case 'done':
        return this.finish(FINISH[String(c.stop_reason ?? '')] ?? 'other');
      case 'error':
        return [...this.close(), { type: 'error', errorText: String(c.error || c.text || 'error') }, ...this.finish('stop')];
      case 'session_stopped':
        return [...this.close(), { type: 'data-svc-event', data: eventPayload(e) }, ...this.finish('other')];
      default:
        return [...this.close(), { type: 'data-svc-event', data: eventPayload(e) }];
    }
  }

  /** fail ends the message with an error the UI shows (e.g. a queued prompt dropped before its turn ran). */
  private fail(errorText: string): UiChunk[] {
    if (this.finished) return [];
    return [...this.close(), { type: 'error', errorText }, ...this.finish('stop')];
  }

  finish(reason = 'stop'): UiChunk[] {
    if (this.finished) return [];
    this.finished = true;
    return [...this.close(), { type: 'finish', finishReason: reason }];
  }
}
