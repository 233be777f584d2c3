import { expect } from 'chai';
import { backoffDelay } from '../../runtime/notifications/notification-queue.ts';
import { busSequence, filterSubject, toDeliveredEvent } from '../../runtime/notifications/delivered-event.ts';
import { eventPatternProblem, matchesEventPattern } from '../../codecs/event-names.ts';
import { evaluateFilter, parseFilter, type FilterSubject } from '../../codecs/event-filter.ts';
import { probedResult } from '../../controllers/bridge-instance.ts';
import type { BusEvent } from '../../store/event-bus.ts';

const ev: FilterSubject = { severity: 'warning', workspace: 'ws_1', agent: 'coder', provider: 'openai', event: 'turn.end', task: 't-1', run: '' };

describe('notification filter grammar', () => {
  const matches: { reason: string; filter: string; subject?: FilterSubject; want: boolean }[] = [
    { reason: 'an empty filter matches everything', filter: '', want: true },
    { reason: 'a blank filter matches everything', filter: '   ', want: true },
    { reason: 'the spec example matches', filter: "severity>=warning AND (agent=coder OR workspace='ws_1')", want: true },
    { reason: 'AND binds tighter than OR: a OR (b AND c)', filter: 'agent=coder OR agent=x AND workspace=nope', want: true },
    { reason: 'AND binds tighter than OR: (a AND b) OR c is false when both sides are', filter: 'agent=x AND workspace=ws_1 OR agent=y', want: false },
    { reason: 'parentheses override precedence', filter: '(agent=coder OR agent=x) AND workspace=nope', want: false },
    { reason: 'AND/OR are case-insensitive', filter: 'agent=coder and workspace=ws_1 Or agent=x', want: true },
    { reason: '= compares case-insensitively', filter: 'agent=CODER', want: true },
    { reason: '!= compares case-insensitively', filter: 'agent!=Coder', want: false },
    { reason: 'double-quoted values keep spaces and operators', filter: 'agent="a b=c"', subject: { ...ev, agent: 'a b=c' }, want: true },
    { reason: 'single-quoted values', filter: "workspace='ws_1'", want: true },
    { reason: 'a quoted AND is a value, not a keyword', filter: 'agent="and"', subject: { ...ev, agent: 'AND' }, want: true },
    { reason: 'outcome is an alias of severity', filter: 'outcome=warning', want: true },
    { reason: 'workspace_id, agent_name, type, event_type, task_id, run_id are aliases', filter: 'workspace_id=ws_1 AND agent_name=coder AND type=turn.end AND event_type=turn.end AND task_id=t-1 AND run_id=""', want: true },
    { reason: 'severity compares by rank: warning >= success', filter: 'severity>=success', want: true },
    { reason: 'severity compares by rank: warning < failure', filter: 'severity<failure', want: true },
    { reason: 'warn is warning', filter: 'severity=warn', want: true },
    { reason: 'error and failed rank as failure', filter: 'severity>=error', subject: { ...ev, severity: 'failure' }, want: true },
    { reason: 'failed ranks 3', filter: 'severity=failed', subject: { ...ev, severity: 'failure' }, want: true },
    { reason: 'a bare integer is a rank', filter: 'severity>=2', want: true },
    { reason: 'a bare integer is a rank (above)', filter: 'severity>2', want: false },
    { reason: 'info < success by rank, though lexically greater', filter: 'severity<success', subject: { ...ev, severity: 'info' }, want: true },
    { reason: 'an unknown severity value never matches', filter: 'severity>=bogus', want: false },
    { reason: 'an unknown severity value never matches, not even with !=', filter: 'severity!=bogus', want: false },
    { reason: 'an unknown event severity never matches', filter: 'severity>=info', subject: { ...ev, severity: 'weird' }, want: false },
    { reason: 'other operators compare strings lexically', filter: 'agent>b AND agent<d', want: true },
    { reason: 'an absent field reads as empty', filter: 'run=x', want: false },
    { reason: 'an absent field differs from any value', filter: 'run!=x', want: true },
  ];
  for (const t of matches) {
    it(t.reason, () => {
      const p = parseFilter(t.filter);
      expect(p.ok, JSON.stringify(p)).to.equal(true);
      if (p.ok) expect(evaluateFilter(p.expr, t.subject ?? ev)).to.equal(t.want);
    });
  }

  const invalid: { reason: string; filter: string; mentions: string }[] = [
    { reason: 'an unknown field', filter: 'colour=red', mentions: 'unknown field "colour"' },
    { reason: 'a missing operator', filter: 'agent coder', mentions: 'expected an operator' },
    { reason: 'a missing value', filter: 'agent=', mentions: 'expected a value' },
    { reason: 'a lone !', filter: 'agent!coder', mentions: '"!"' },
    { reason: 'an unclosed parenthesis', filter: '(agent=coder', mentions: 'missing ")"' },
    { reason: 'a stray closing parenthesis', filter: 'agent=coder)', mentions: 'unexpected' },
    { reason: 'a dangling AND', filter: 'agent=coder AND', mentions: 'filter ended' },
    { reason: 'two comparisons without AND/OR', filter: 'agent=a agent=b', mentions: 'unexpected' },
    { reason: 'an unterminated quote', filter: "agent='coder", mentions: 'unterminated' },
    { reason: 'empty parentheses', filter: '()', mentions: 'expected a field name' },
    { reason: 'a prototype key is not a field', filter: 'constructor=x', mentions: 'unknown field' },
  ];
  for (const t of invalid) {
    it(`rejects ${t.reason}, naming the problem`, () => {
      const p = parseFilter(t.filter);
      expect(p.ok).to.equal(false);
      if (!p.ok) expect(p.error).to.contain(t.mentions);
    });
  }
});

describe('notification event patterns', () => {
  const table: { reason: string; pattern: string; ok: boolean }[] = [
    { reason: 'an exact public name', pattern: 'session.unhealthy', ok: true },
    { reason: 'a name the bus publishes today', pattern: 'turn.end', ok: true },
    { reason: 'a prefix with a dot and a trailing *', pattern: 'task.run_*', ok: true },
    { reason: 'a family pattern', pattern: 'resource.*', ok: true },
    { reason: 'the task_run.* family is rejected', pattern: 'task_run.*', ok: false },
    { reason: 'a prefix without a dot', pattern: 'session*', ok: false },
    { reason: 'a lone *', pattern: '*', ok: false },
    { reason: 'a * that is not trailing', pattern: 'session.*.x', ok: false },
    { reason: 'two stars', pattern: 'session.**', ok: false },
    { reason: 'an unknown exact name', pattern: 'session.exploded', ok: false },
  ];
  for (const t of table) it(`${t.ok ? 'accepts' : 'rejects'} ${t.reason}`, () => expect(eventPatternProblem(t.pattern) === undefined).to.equal(t.ok));

  it('matches a type exactly or by prefix', () => {
    expect(matchesEventPattern('task.run_*', 'task.run_failed')).to.equal(true);
    expect(matchesEventPattern('task.run_*', 'task.created')).to.equal(false);
    expect(matchesEventPattern('turn.end', 'turn.end')).to.equal(true);
    expect(matchesEventPattern('turn.end', 'turn.ended')).to.equal(false);
  });
});

describe('delivered event shape, backoff and bridge health plan', () => {
  const bus: BusEvent = {
    id: '1700000000123-4', type: 'turn.end', timestamp: '2024-01-01T00:00:00.000Z', source: 'sessions', scope: 'workspace', workspace_id: 'ws_1',
    session_id: 's1', agent_name: 'coder', outcome: 'failure', summary: 'turn failed', data: { turn_id: 't', provider: 'openai', task_id: 'k1' },
  };

  it('maps a bus event to {id, type, workspace_id, agent, provider, task_id, summary, outcome, sequence, payload, timestamp}', () => {
    const d = toDeliveredEvent(bus);
    expect(d).to.deep.equal({
      id: bus.id, type: 'turn.end', workspace_id: 'ws_1', agent: 'coder', provider: 'openai', task_id: 'k1', summary: 'turn failed',
      outcome: 'failure', sequence: 1700000000123004, timestamp: bus.timestamp, payload: { turn_id: 't', provider: 'openai', task_id: 'k1', session_id: 's1' },
    });
    expect(d).not.to.have.property('run_id');
    expect(filterSubject(d)).to.include({ severity: 'failure', workspace: 'ws_1', agent: 'coder', event: 'turn.end', task: 'k1', run: '' });
    expect(busSequence('1700000000123-5')).to.be.greaterThan(busSequence(bus.id));
  });

  it('backs off exponentially from the base up to the cap', () => {
    const s = { backoffMs: 500, maxBackoffMs: 10_000 };
    expect([1, 2, 3, 4, 5, 6, 30].map((n) => backoffDelay(n, s, () => 0.5))).to.deep.equal([500, 1000, 2000, 4000, 8000, 10000, 10000]);
  });

  it('a reachable receiver is Connected and looked at again each interval; an unreachable one backs off as long as it has been down', () => {
    const now = new Date('2024-01-01T00:01:00Z');
    const up = probedResult({ up: true, detail: 'answered 200' }, undefined, now, 30_000);
    expect(up).to.include({ outcome: 'ready', requeueAfterMs: 30_000 });
    expect(up.conditions).to.deep.equal([{ type: 'Connected', status: 'True', reason: 'Connected', message: '' }]);
    const first = probedResult({ up: false, detail: 'unreachable: ECONNREFUSED' }, undefined, now);
    expect(first).to.include({ outcome: 'degraded', reason: 'BridgeUnreachable', requeueAfterMs: 1000 });
    const prev = { observed_version: 1, last_reconciled_at: '', last_error: '', conditions: [{ type: 'Connected', status: 'False', reason: 'BridgeUnreachable', message: '', last_transition_time: '2024-01-01T00:00:50Z' }] } as any;
    expect(probedResult({ up: false, detail: 'x' }, prev, now).requeueAfterMs).to.equal(10_000);
  });
});
