import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { checksumOf, ledgerPath, parseLedger, renderLedger, replayEvents, type LedgerEvent, type LedgerSource } from '../../runtime/memory/ledger.ts';

const source = (over: Partial<LedgerSource> = {}): LedgerSource => ({
  session_id: 'sess-1', workspace_id: 'ws-1', parent_session_id: '', root_session_id: 'sess-1', spawn_depth: 0,
  started_at: '2026-01-01T00:00:00.000Z', ended_at: '2026-01-01T00:05:00.000Z',
  events: [
    { sequence: 2, type: 'agent_message', content: { text: 'hi' }, timestamp: '2026-01-01T00:01:00.000Z' },
    { sequence: 1, type: 'user_message', content: { text: 'hello' }, timestamp: '2026-01-01T00:00:30.000Z' },
    { sequence: 3, type: 'session_stopped', content: 'stopped', timestamp: '2026-01-01T00:05:00.000Z' },
  ],
  ...over,
});

describe('Session ledgers: rendering, checksum, parsing', () => {
  it('renders the ledger_meta line then one session_event line per event, in sequence order, with the SHA-256 of the whole text', () => {
    const l = renderLedger(source());
    const lines = l.jsonl.trimEnd().split('\n').map((x) => JSON.parse(x));
    expect(lines[0]).to.deep.equal({ type: 'ledger_meta', version: 1, session_id: 'sess-1', workspace_id: 'ws-1', root_session_id: 'sess-1', started_at: '2026-01-01T00:00:00.000Z', ended_at: '2026-01-01T00:05:00.000Z' });
    expect(lines.slice(1).map((x) => [x.type, x.sequence, x.event_type])).to.deep.equal([['session_event', 1, 'user_message'], ['session_event', 2, 'agent_message'], ['session_event', 3, 'session_stopped']]);
    expect(l.checksum).to.equal(createHash('sha256').update(l.jsonl).digest('hex'));
    expect(l.events).to.equal(3);
  });

  it('renders the same bytes for the same source (so the write-once rule never refuses a repair of what the stop hook wrote)', () => {
    expect(renderLedger(source()).jsonl).to.equal(renderLedger(source()).jsonl);
    expect(renderLedger(source({ ended_at: '2026-01-01T00:06:00.000Z' })).checksum).to.not.equal(renderLedger(source()).checksum);
  });

  it('names the spawn lineage only when there is one, and partitions a session without a workspace as _unbound', () => {
    const child = JSON.parse(renderLedger(source({ parent_session_id: 'sess-0', root_session_id: 'sess-0', spawn_depth: 2 })).jsonl.split('\n')[0]);
    expect(child).to.include({ spawn_parent_id: 'sess-0', root_session_id: 'sess-0', spawn_depth: 2 });
    expect(JSON.parse(renderLedger(source()).jsonl.split('\n')[0])).to.not.have.any.keys('spawn_parent_id', 'spawn_depth');
    expect(JSON.parse(renderLedger(source({ workspace_id: '' })).jsonl.split('\n')[0]).workspace_id).to.equal('_unbound');
    expect(ledgerPath('', 's')).to.equal('_unbound/s/ledger.jsonl');
  });

  it('parses back the meta (created_at = started_at, stopped_at = ended_at) and the events; a payload that is not an object is wrapped in {value}', () => {
    const parsed = parseLedger(renderLedger(source({ parent_session_id: 'p', spawn_depth: 1 })).jsonl);
    expect(parsed.ok).to.equal(true);
    if (!parsed.ok) return;
    expect(parsed.meta).to.deep.equal({ version: 1, session_id: 'sess-1', workspace_id: 'ws-1', parent_session_id: 'p', root_session_id: 'sess-1', spawn_depth: 1, created_at: '2026-01-01T00:00:00.000Z', stopped_at: '2026-01-01T00:05:00.000Z' });
    expect(parsed.events).to.deep.equal([
      { sequence: 1, event_type: 'user_message', emitted_at: '2026-01-01T00:00:30.000Z', payload: { text: 'hello' } },
      { sequence: 2, event_type: 'agent_message', emitted_at: '2026-01-01T00:01:00.000Z', payload: { text: 'hi' } },
      { sequence: 3, event_type: 'session_stopped', emitted_at: '2026-01-01T00:05:00.000Z', payload: { value: 'stopped' } },
    ]);
  });

  const bad = [
    { reason: 'a line that is not JSON', jsonl: '{"type":"ledger_meta","session_id":"s"}\n{oops\n' },
    { reason: 'no meta line', jsonl: '{"type":"session_event","sequence":1}\n' },
    { reason: 'a meta line without a session id', jsonl: '{"type":"ledger_meta"}\n' },
    { reason: 'a line that is JSON but not an object', jsonl: '{"type":"ledger_meta","session_id":"s"}\n42\n' },
  ];
  for (const { reason, jsonl } of bad) {
    it(`refuses ${reason}`, () => expect(parseLedger(jsonl).ok).to.equal(false));
  }

  it('detects any change to the bytes through the checksum (one character is enough)', () => {
    const l = renderLedger(source());
    expect(checksumOf(l.jsonl.replace('"hi"', '"ho"'))).to.not.equal(l.checksum);
  });
});

describe('Session ledgers: replay filters', () => {
  const ev = (event_type: string): LedgerEvent => ({ sequence: 0, event_type, emitted_at: '', payload: {} });
  const all = ['user_message', 'agent_message', 'tool_call', 'tool_result', 'mcp_tool_progress', 'memory.write.committed', 'memory_recall', 'session_stopped'].map(ev);
  const table = [
    { reason: 'by default, tool events (tool_call, tool_result, any type containing "tool") and memory events are left out', given: {}, want: ['user_message', 'agent_message', 'session_stopped'] },
    { reason: 'include_tool_events keeps tool events, still without memory events', given: { include_tool_events: true }, want: ['user_message', 'agent_message', 'tool_call', 'tool_result', 'mcp_tool_progress', 'session_stopped'] },
    { reason: 'include_memory keeps memory events, still without tool events', given: { include_memory: true }, want: ['user_message', 'agent_message', 'memory.write.committed', 'memory_recall', 'session_stopped'] },
    { reason: 'both flags keep everything, in order', given: { include_tool_events: true, include_memory: true }, want: all.map((e) => e.event_type) },
  ];
  for (const { reason, given, want } of table) {
    it(reason, () => expect(replayEvents(all, given).map((e) => e.event_type)).to.deep.equal(want));
  }
});
