import type { SessionUpdate } from '@agentclientprotocol/sdk';

/** EventDraft is a session event before the store gives it a sequence: its type and content fields. */
export interface EventDraft {
  type: string;
  content: Record<string, unknown>;
}

function text(block: unknown): string {
  const b = block as { type?: string; text?: string; uri?: string };
  if (b?.type === 'text') return b.text ?? '';
  if (b?.type === 'resource_link') return b.uri ?? '';
  return '';
}

/**
 * eventFromUpdate maps one ACP `session/update` to the session event it is recorded as (the "Persisted
 * session events" table of spec/concepts.md), or undefined for updates that are not recorded (the agent's
 * echo of the user's own message, which the runtime records itself before the prompt).
 */
export function eventFromUpdate(u: SessionUpdate): EventDraft | undefined {
  const raw = u as unknown as Record<string, unknown>;
  switch (u.sessionUpdate) {
    case 'user_message_chunk':
      return undefined;
    case 'agent_message_chunk':
      return { type: 'agent_message', content: { text: text(u.content) } };
    case 'agent_thought_chunk':
      return { type: 'thought', content: { text: text(u.content) } };
    case 'tool_call':
      return { type: 'tool_call', content: { title: u.title, tool_name: u.title, tool_call_id: u.toolCallId, tool_input: u.rawInput, raw } };
    case 'tool_call_update': {
      const done = u.status === 'completed' || u.status === 'failed';
      const content = (u.content ?? []).map((c) => (c.type === 'content' ? text(c.content) : '')).filter(Boolean).join('\n');
      if (!done) return { type: 'tool_call', content: { title: u.title ?? undefined, tool_name: u.title ?? undefined, tool_call_id: u.toolCallId, tool_input: u.rawInput, raw } };
      return {
        type: 'tool_result',
        content: {
          tool_call_id: u.toolCallId, tool_name: u.title ?? undefined, tool_error: u.status === 'failed',
          tool_result: { content, raw_output: u.rawOutput, error: u.status === 'failed' ? content : undefined }, raw,
        },
      };
    }
    case 'plan':
      return { type: 'plan', content: { raw } };
    case 'usage_update':
      return { type: 'usage', content: { usage: { context_used: u.used, context_size: u.size, cost_amount: u.cost?.amount, cost_currency: u.cost?.currency }, raw } };
    default:
      return { type: 'system', content: { title: u.sessionUpdate, raw } };
  }
}
