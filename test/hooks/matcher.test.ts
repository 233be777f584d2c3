import { expect } from 'chai';
import { EMITTED, eventCondition, GATED, HOOK_EVENTS, isSyncEligible, NOT_EMITTED } from '../../runtime/hooks/catalog.ts';
import { BindingIndex, inputOfBusEvent, matches, type Binding } from '../../runtime/hooks/matcher.ts';

const binding = (id: string, spec: Partial<Binding['spec']>, scope: Binding['scope'] = { kind: 'global', id: '' }): Binding => ({
  kind: 'hook.binding', id, scope, owner: { kind: '', id: '' }, source: { kind: '', id: '' }, version: 1,
  spec: { name: id, event: 'turn.end', source: 'native', mode: 'async', required: false, priority: 1000, matcher: {}, executor_kind: 'native', enabled: true, ...spec },
} as Binding);

describe('hook matcher and catalog (no Redis)', () => {
  it('matches strings exactly or as globs, booleans exactly, autonomy key by key; a missing key never matches', () => {
    const ev = { event: 'tool.pre_call', agent_name: 'reviewer', tool_id: 'svc__workspace_read_file', tool_read_only: true, task_id: 't-1' };
    expect(matches({}, ev)).to.equal(true);
    expect(matches({ agent_name: 'reviewer' }, ev)).to.equal(true);
    expect(matches({ agent_name: 'rev*' }, ev)).to.equal(true);
    expect(matches({ agent_name: 'writer' }, ev)).to.equal(false);
    expect(matches({ tool_id: 'svc__workspace_*', tool_read_only: true }, ev)).to.equal(true);
    expect(matches({ tool_read_only: false }, ev)).to.equal(false);
    expect(matches({ turn_id: 'turn-*' }, ev)).to.equal(false);
    expect(matches({ autonomy: { task_id: 't-*' } }, ev)).to.equal(true);
    expect(matches({ autonomy: { task_id: 't-2' } }, { ...ev, autonomy: { task_id: 't-1' } })).to.equal(false);
  });

  it('selects enabled bindings of the event and mode, in scope, highest priority first', () => {
    const index = new BindingIndex().update([
      binding('low', { priority: 1 }), binding('high', { priority: 900 }), binding('off', { enabled: false }),
      binding('sync', { mode: 'sync' }), binding('other-event', { event: 'turn.start' }),
      binding('ws-a', { priority: 500 }, { kind: 'workspace', id: 'ws-a' }), binding('picky', { matcher: { agent_name: 'x' } }),
    ]);
    const input = inputOfBusEvent({ id: '1-0', type: 'turn.end', timestamp: '', source: 'sessions', scope: 'workspace', workspace_id: 'ws-b', session_id: 's', agent_name: 'scripted', outcome: 'success', summary: '', data: { turn_id: 'turn-1' } });
    expect(input).to.include({ event: 'turn.end', event_id: '1-0', turn_id: 'turn-1', workspace_id: 'ws-b' });
    expect(index.select('async', input).map((b) => b.id)).to.deep.equal(['high', 'low']);
    expect(index.select('sync', input).map((b) => b.id)).to.deep.equal(['sync']);
    expect(index.select('async', { ...input, workspace_id: 'ws-a' }).map((b) => b.id)).to.deep.equal(['high', 'ws-a', 'low']);
    expect(index.has('turn.start')).to.equal(true);
    expect(index.has('session.post_stop')).to.equal(false);
  });

  it('the catalog splits the 72 events, the 6 provider, 5 loop, 5 extension and 3 skill install events into emitted and not emitted; gated points are sync-eligible', () => {
    expect(HOOK_EVENTS).to.have.length(91);
    expect([...EMITTED, ...NOT_EMITTED].sort()).to.deep.equal([...HOOK_EVENTS].sort());
    for (const e of GATED) expect(isSyncEligible(e), e).to.equal(true);
    expect(eventCondition('network.peer.joined', 'async')).to.include({ status: 'False', reason: 'EventNotEmitted' });
    expect(eventCondition('permission.request', 'sync')).to.include({ status: 'False', reason: 'SyncPointNotGated' });
    expect(eventCondition('permission.request', 'async')).to.include({ status: 'True' });
  });
});
