import { expect } from 'chai';
import {
  DEFAULT_DREAM_CONFIG as CFG, decay, dreamPrompt, evaluateGates, extractSynthesis, loadDreamConfig, promotionScore, publicStatus, selectCandidates, sortCandidates,
  type CandidateInput, type ScoredCandidate,
} from '../../runtime/memory/dream-policy.ts';

const NOW = Date.parse('2026-03-01T00:00:00.000Z');
const daysAgo = (d: number) => new Date(NOW - d * 86_400_000).toISOString();
const cand = (over: Partial<CandidateInput> = {}): CandidateInput => ({ id: 'w:ws/a.md', recall_count: 2, recall_score: 1, last_recalled_at: daysAgo(0), freshness_started_at: daysAgo(0), ...over });

describe('Dream policy: the promotion score (0.30 frequency + 0.35 relevance + 0.20 recency + 0.15 freshness, 14-day half-lives)', () => {
  const table = [
    { reason: 'every part at its maximum scores 1', given: cand(), want: { score: 1, frequency: 1, relevance: 1, recency: 1, freshness: 1 } },
    { reason: 'frequency is recall_count ÷ min_recall_count, clamped to 1', given: cand({ recall_count: 1 }), want: { frequency: 0.5, score: 0.85 } },
    { reason: 'frequency is clamped at 1 for many recalls', given: cand({ recall_count: 50 }), want: { frequency: 1, score: 1 } },
    { reason: 'relevance is the recall score, clamped to 0..1', given: cand({ recall_score: 0.4 }), want: { relevance: 0.4, score: 1 - 0.35 * 0.6 } },
    { reason: 'a recall score above 1 counts as 1', given: cand({ recall_score: 7 }), want: { relevance: 1 } },
    { reason: 'recency halves after 14 days since the last recall', given: cand({ last_recalled_at: daysAgo(14) }), want: { recency: 0.5, score: 0.9 } },
    { reason: 'recency quarters after 28 days', given: cand({ last_recalled_at: daysAgo(28) }), want: { recency: 0.25 } },
    { reason: 'freshness halves 14 days after the content last changed', given: cand({ freshness_started_at: daysAgo(14) }), want: { freshness: 0.5, score: 1 - 0.15 * 0.5 } },
    { reason: 'never recalled: recency 0', given: cand({ last_recalled_at: '' }), want: { recency: 0, score: 0.8 } },
    { reason: 'a time in the future counts as now', given: cand({ last_recalled_at: daysAgo(-3) }), want: { recency: 1 } },
  ];
  for (const { reason, given, want } of table) {
    it(reason, () => {
      const got = promotionScore(given, CFG, NOW);
      for (const [k, v] of Object.entries(want)) expect(got[k as keyof typeof got], k).to.be.closeTo(v, 1e-9);
    });
  }

  it('uses the configured weights and half-life', () => {
    const cfg = { ...CFG, scoring: { recency_half_life_days: 7, weights: { frequency: 1, relevance: 0, recency: 0, freshness: 0 } } };
    expect(promotionScore(cand({ recall_count: 1 }), cfg, NOW).score).to.be.closeTo(0.5, 1e-9);
    expect(decay(daysAgo(7), NOW, 7)).to.be.closeTo(0.5, 1e-9);
  });
});

describe('Dream policy: candidates and their order', () => {
  const scored = (id: string, score: number, last: string): ScoredCandidate => ({ memory: cand({ id, last_recalled_at: last }), score, parts: { frequency: 0, relevance: 0, recency: 0, freshness: 0 } });
  const table = [
    { reason: 'by score, highest first', given: [scored('a', 0.8, daysAgo(1)), scored('b', 0.9, daysAgo(1))], want: ['b', 'a'] },
    { reason: 'equal scores: the most recently recalled first', given: [scored('a', 0.8, daysAgo(2)), scored('b', 0.8, daysAgo(1))], want: ['b', 'a'] },
    { reason: 'equal score and recall time: by id ascending', given: [scored('b', 0.8, daysAgo(1)), scored('a', 0.8, daysAgo(1))], want: ['a', 'b'] },
  ];
  for (const { reason, given, want } of table) {
    it(`sorts ${reason}`, () => expect(sortCandidates(given).map((c) => c.memory.id)).to.deep.equal(want));
  }

  it('keeps only unpromoted memories with recall_count ≥ min_recall_count and score ≥ min_score, at most candidate_limit', () => {
    const ms = [
      cand({ id: 'ok1' }), cand({ id: 'once', recall_count: 1 }), cand({ id: 'promoted' }), cand({ id: 'weak', recall_score: 0, last_recalled_at: '', freshness_started_at: '' }),
      cand({ id: 'ok2', recall_score: 0.9 }),
    ];
    const got = selectCandidates(ms, (m) => m.id === 'promoted', CFG, NOW);
    expect(got.map((c) => c.memory.id)).to.deep.equal(['ok1', 'ok2']);
    expect(selectCandidates(ms, () => false, { ...CFG, candidate_limit: 1 }, NOW).map((c) => c.memory.id)).to.deep.equal(['ok1']);
  });
});

describe('Dream policy: the gates, in order (min_hours, min_sessions, min_unpromoted)', () => {
  const pass = { lastRunMs: NOW - 25 * 3_600_000, sessionsSince: 3, candidates: 5, nowMs: NOW };
  const table = [
    { reason: 'all gates met: it runs', given: pass, want: 'pass' },
    { reason: 'never dreamed: min_hours does not apply', given: { ...pass, lastRunMs: undefined }, want: 'pass' },
    { reason: 'the last run started under min_hours (24) ago', given: { ...pass, lastRunMs: NOW - 23 * 3_600_000 }, want: 'min_hours' },
    { reason: 'fewer than min_sessions (3) sessions stopped since', given: { ...pass, sessionsSince: 2 }, want: 'min_sessions' },
    { reason: 'fewer than min_unpromoted (5) candidates', given: { ...pass, candidates: 4 }, want: 'min_unpromoted' },
    { reason: 'several gates fail: the first in order is named', given: { ...pass, lastRunMs: NOW - 3_600_000, sessionsSince: 0, candidates: 0 }, want: 'min_hours' },
  ];
  for (const { reason, given, want } of table) {
    it(reason, () => {
      const v = evaluateGates(given, CFG);
      expect(v.pass ? 'pass' : v.gate).to.equal(want);
      if (!v.pass) expect(v.reason).to.be.a('string').and.not.equal('');
    });
  }
});

describe('Dream policy: public status, prompt, synthesis, configuration', () => {
  const table = [
    { reason: 'no run is idle', given: undefined, want: 'idle' },
    { reason: 'running is running', given: { status: 'running' as const, promoted_count: 0 }, want: 'running' },
    { reason: 'failed is failed', given: { status: 'failed' as const, promoted_count: 0 }, want: 'failed' },
    { reason: 'completed with promotions is promoted', given: { status: 'completed' as const, promoted_count: 2 }, want: 'promoted' },
    { reason: 'completed without promotions is skipped', given: { status: 'completed' as const, promoted_count: 0 }, want: 'skipped' },
    { reason: 'canceled is skipped', given: { status: 'canceled' as const, promoted_count: 0 }, want: 'skipped' },
  ];
  for (const { reason, given, want } of table) it(`status: ${reason}`, () => expect(publicStatus(given)).to.equal(want));

  it('the prompt carries the candidates and a ```memory draft that extractSynthesis reads back from an answer that echoes it', () => {
    const prompt = dreamPrompt({ id: 'dream_1', scope: 'workspace', workspace_id: 'ws-1' }, [{ id: 'w:ws-1/a.md', name: 'Build', type: 'project', score: 0.91, recall_count: 3, content: 'We build with make.' }]);
    expect(prompt).to.include('dream.v1').and.include('w:ws-1/a.md');
    const echoed = prompt.split('\n').map((l) => l.trim()).filter(Boolean).join('\n');
    expect(extractSynthesis(echoed)).to.equal('Recurring memory themes promoted by dreaming.\nRun: dream_1\n- Build: We build with make.');
    expect(extractSynthesis('no block here')).to.equal(undefined);
    expect(extractSynthesis('```memory\n\n```')).to.equal(undefined);
    expect(extractSynthesis('```memory\nfirst\n```\n```memory\nsecond\n```')).to.equal('second');
  });

  it('reads MEMORY_DREAM_* over the defaults and names each bad value', () => {
    const problems: string[] = [];
    const c = loadDreamConfig({ MEMORY_DREAM_MIN_SESSIONS: '0', MEMORY_DREAM_MIN_SCORE: '0.5', MEMORY_DREAM_DEBOUNCE: '1s', MEMORY_DREAM_AGENT: 'curator' }, problems);
    expect(problems).to.deep.equal([]);
    expect(c).to.deep.include({ min_sessions: 0, debounce_ms: 1000, agent: 'curator', min_hours: 24 });
    expect(c.gates.min_score).to.equal(0.5);
    loadDreamConfig({ MEMORY_DREAM_MIN_SCORE: '2', MEMORY_DREAM_MIN_SESSIONS: '1.5', MEMORY_DREAM_CHECK_INTERVAL: 'soon', MEMORY_DREAM_ENABLED: 'maybe' }, problems);
    expect(problems.map((p) => p.split('=')[0])).to.deep.equal(['MEMORY_DREAM_ENABLED', 'MEMORY_DREAM_MIN_SESSIONS', 'MEMORY_DREAM_MIN_SCORE', 'MEMORY_DREAM_CHECK_INTERVAL']);
  });
});
