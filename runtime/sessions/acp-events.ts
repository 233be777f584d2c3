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
 * toolNameOf is the name an agent gives its tool on a tool call, an update or a permission request: the first
 * `_meta.<any>.toolName` (Claude Code's ACP adapter sends `_meta.claudeCode.toolName`), else a `tool_name` field,
 * else '' (the caller falls back to the name its call was given, then the title).
 * NOTE: the ACP title is a display string (a whole command line, "Terminal"), so hooks and triggers that match a
 * tool by its name never match it; the name is what they compare.
 */
export function toolNameOf(call: unknown): string {
  const c = (call ?? {}) as { _meta?: unknown; tool_name?: unknown };
  if (c._meta && typeof c._meta === 'object') {
    for (const v of Object.values(c._meta as Record<string, unknown>)) {
      const name = v && typeof v === 'object' ? (v as { toolName?: unknown }).toolName : undefined;
      if (typeof name === 'string' && name.trim()) return name.trim();
    }
  }
  return typeof c.tool_name === 'string' ? c.tool_name.trim() : '';
}

/**
 * eventFromUpdate maps one ACP `session/update` to the session event it is recorded as (the persisted
 * session events table), or undefined for updates that are not recorded (the agent's
 * echo of the user's own message, which the runtime records itself before the prompt).
 */
export function eventFromUpdate(u: SessionUpdate, names: Map<string, string> = new Map()): EventDraft | undefined {
  const raw = u as unknown as Record<string, unknown>;
  switch (u.sessionUpdate) {
    case 'user_message_chunk':
      return undefined;
    case 'agent_message_chunk':
      return { type: 'agent_message', content: { text: text(u.content) } };
    case 'agent_thought_chunk':
      return { type: 'thought', content: { text: text(u.content) } };
    case 'tool_call': {
      const name = toolNameOf(u) || u.title;
      names.set(u.toolCallId, name);
      return { type: 'tool_call', content: { title: u.title, tool_name: name, kind: u.kind ?? 'other', tool_call_id: u.toolCallId, tool_input: u.rawInput, raw } };
    }
    case 'tool_call_update': {
      const done = u.status === 'completed' || u.status === 'failed';
      const content = (u.content ?? []).map((c) => (c.type === 'content' ? text(c.content) : '')).filter(Boolean).join('\n');
      // NOTE: a result carries the name of its call: agents send updates with no name and often no title.
      const name = toolNameOf(u) || names.get(u.toolCallId) || u.title || undefined;
      if (name && !names.has(u.toolCallId)) names.set(u.toolCallId, name);
      const kind = u.kind ?? undefined;
      if (done) names.delete(u.toolCallId);
      if (!done) return { type: 'tool_call', content: { title: u.title ?? undefined, tool_name: name, kind, tool_call_id: u.toolCallId, tool_input: u.rawInput, raw } };
      return {
        type: 'tool_result',
        content: {
          tool_call_id: u.toolCallId, tool_name: name, kind, tool_error: u.status === 'failed',
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
