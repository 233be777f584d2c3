import { createHash } from 'node:crypto';

/** LEDGER_VERSION is the `version` of the `ledger_meta` line. */
export const LEDGER_VERSION = 1;
/** UNBOUND_PARTITION names the workspace part of a ledger's path for a session without a workspace. */
export const UNBOUND_PARTITION = '_unbound';

/** LedgerEvent is one event of a session ledger as the API answers it. */
export interface LedgerEvent {
  sequence: number;
  event_type: string;
  emitted_at: string;
  payload: Record<string, unknown>;
}

/** LedgerMeta describes a session ledger: `checksum` is the hex SHA-256 of its bytes. */
export interface LedgerMeta {
  version: number;
  session_id: string;
  workspace_id: string;
  parent_session_id: string;
  root_session_id: string;
  spawn_depth: number;
  path: string;
  checksum: string;
  created_at: string;
  stopped_at: string;
}

/** LedgerSource is what a ledger is rendered from: the stopped session's identity and its stored events. */
export interface LedgerSource {
  session_id: string;
  workspace_id: string;
  parent_session_id: string;
  root_session_id: string;
  spawn_depth: number;
  started_at: string;
  ended_at: string;
  events: { sequence: number; type: string; content: unknown; timestamp: string }[];
}

/** Ledger is a rendered ledger: its JSON-Lines bytes, their checksum and how many events it holds. */
export interface Ledger {
  jsonl: string;
  checksum: string;
  events: number;
}

/** checksumOf is the ledger checksum: the lower-case hex SHA-256 of the whole JSON-Lines text. */
export const checksumOf = (jsonl: string) => createHash('sha256').update(jsonl, 'utf8').digest('hex');

/** ledgerPath is where a ledger's file goes in an export: `<workspace id|_unbound>/<session id>/ledger.jsonl`. */
export const ledgerPath = (workspaceId: string, sessionId: string) => `${workspaceId || UNBOUND_PARTITION}/${sessionId}/ledger.jsonl`;

/**
 * renderLedger writes a ledger: the `ledger_meta` line, then one `session_event` line per event
 * in sequence order. NOTE: the bytes depend only on the source, so rendering the same stopped session twice (its
 * runtime's stop hook and a repair, or two runtimes racing) gives the same bytes and the write-once rule holds.
 */
export function renderLedger(src: LedgerSource): Ledger {
  const meta: Record<string, unknown> = { type: 'ledger_meta', version: LEDGER_VERSION, session_id: src.session_id, workspace_id: src.workspace_id || UNBOUND_PARTITION };
  if (src.parent_session_id) meta.spawn_parent_id = src.parent_session_id;
  if (src.root_session_id) meta.root_session_id = src.root_session_id;
  if (src.spawn_depth) meta.spawn_depth = src.spawn_depth;
  meta.started_at = src.started_at;
  meta.ended_at = src.ended_at;
  const lines = [JSON.stringify(meta)];
  const events = [...src.events].sort((a, b) => a.sequence - b.sequence);
  for (const e of events) lines.push(JSON.stringify({ type: 'session_event', sequence: e.sequence, event_type: e.type, content: e.content ?? null, timestamp: e.timestamp }));
  const jsonl = `${lines.join('\n')}\n`;
  return { jsonl, checksum: checksumOf(jsonl), events: events.length };
}

/** LedgerParseResult is a parsed ledger, or why its bytes are not one. */
export type LedgerParseResult = { ok: true; meta: Omit<LedgerMeta, 'checksum' | 'path'>; events: LedgerEvent[] } | { ok: false; reason: string };

/**
 * parseLedger reads a ledger's JSON-Lines text. A payload that is not a JSON object is wrapped as `{value}`. It
 * does not check the checksum: the caller compares it with the one stored at write time.
 */
export function parseLedger(jsonl: string): LedgerParseResult {
  let meta: Omit<LedgerMeta, 'checksum' | 'path'> | undefined;
  const events: LedgerEvent[] = [];
  const lines = jsonl.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i].trim();
    if (!raw) continue;
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      return { ok: false, reason: `line ${i + 1} is not JSON` };
    }
    if (line === null || typeof line !== 'object') return { ok: false, reason: `line ${i + 1} is not a JSON object` };
    if (line.type === 'ledger_meta') {
      meta = {
        version: Number(line.version ?? 0), session_id: String(line.session_id ?? ''), workspace_id: String(line.workspace_id ?? ''),
        parent_session_id: String(line.spawn_parent_id ?? ''), root_session_id: String(line.root_session_id ?? ''), spawn_depth: Number(line.spawn_depth ?? 0),
        created_at: String(line.started_at ?? ''), stopped_at: String(line.ended_at ?? ''),
      };
    } else if (line.type === 'session_event') {
      events.push({ sequence: Number(line.sequence), event_type: String(line.event_type ?? ''), emitted_at: String(line.timestamp ?? ''), payload: payloadOf(line.content) });
    }
  }
  if (!meta?.session_id) return { ok: false, reason: 'no ledger_meta line with a session_id' };
  return { ok: true, meta, events };
}

function payloadOf(content: unknown): Record<string, unknown> {
  if (content !== null && typeof content === 'object' && !Array.isArray(content)) return content as Record<string, unknown>;
  return { value: content ?? null };
}

/** isToolEvent: a tool event for replay: type `tool_call`, `tool_result`, or any type containing `tool`. */
export const isToolEvent = (type: string) => type.trim().toLowerCase().includes('tool');

/** isMemoryEvent: a memory event for replay: any type containing `memory`. */
export const isMemoryEvent = (type: string) => type.trim().toLowerCase().includes('memory');

/** replayEvents leaves out tool and memory events unless the matching flag asks for them. */
export function replayEvents(events: LedgerEvent[], o: { include_tool_events?: boolean; include_memory?: boolean }): LedgerEvent[] {
  return events.filter((e) => (o.include_tool_events || !isToolEvent(e.event_type)) && (o.include_memory || !isMemoryEvent(e.event_type)));
}
