import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { renderTemplate } from '../template.ts';
import { LOOP_LIMITS, type Criterion, type CriterionEvaluator, type GateVerdict, type NodeContext } from '../types.ts';
import type { AgentTurns } from './agent-turns.ts';

const APPROVE = new Set(['approved', 'approve', 'pass', 'passed', 'yes', 'ok', 'accept', 'accepted']);
const REJECT = new Set(['rejected', 'reject', 'fail', 'failed', 'no', 'request_changes', 'changes_requested', 'revise']);

/** JudgeAnswer is what a judge's answer says: a verdict word with its reason and findings, or nothing usable. */
export type JudgeAnswer = { ok: true; verdict: string; reason: string; findings?: unknown } | { ok: false };

/**
 * parseJudgeAnswer reads a judge's verdict from its answer: the last line holding a JSON object with a string
 * `verdict` (`{"verdict":"approved","reason":"…"}`), else the last `VERDICT: <word>` line. Anything else is malformed.
 */
export function parseJudgeAnswer(answer: string): JudgeAnswer {
  const lines = answer.split('\n').map((l) => l.trim()).filter(Boolean).reverse();
  for (const line of lines) {
    const start = line.indexOf('{');
    const end = line.lastIndexOf('}');
    if (start < 0 || end <= start) continue;
    try {
      const v = JSON.parse(line.slice(start, end + 1)) as Record<string, unknown>;
      if (v && typeof v === 'object' && typeof v.verdict === 'string' && v.verdict.trim()) {
        return { ok: true, verdict: v.verdict.trim(), reason: typeof v.reason === 'string' ? v.reason : '', findings: v.findings };
      }
    } catch { /* not JSON: look further up */ }
  }
  for (const line of lines) {
    const m = /^verdict\s*:\s*([A-Za-z_-]+)\s*(.*)$/i.exec(line);
    if (m) return { ok: true, verdict: m[1], reason: m[2] ?? '' };
  }
  return { ok: false };
}

/** AgentJudgeOptions are what a judge needs: agent turns, and the connection its broken-answer streak is kept on. */
export interface AgentJudgeOptions {
  turns: AgentTurns;
  redis: Redis;
  /** The store's key prefix; the streak sits under the run's hash tag. */
  prefix: string;
}

/** STREAK_TTL_S keeps a gate's broken-answer streak as long as a run may live (a week). */
const STREAK_TTL_S = 7 * 24 * 3600;

/**
 * AgentJudgeCriterion runs a gate's `agent-judge` criterion: one turn of a session of the criterion's agent, asked
 * to judge (its `rubric` and rendered `prompt`; with no prompt, the upstream outputs) and to answer a verdict line.
 * The verdict approves when it is an approving word (or equals `expect`, when given) and rejects otherwise, with its
 * reason and findings handed to the revised upstream. A malformed answer, or a judge whose turn fails, counts as
 * `rejected` (→ revise) and as broken; the third broken judge in a row (over the gate's revisions) fails
 * open: the gate approves, saying so, rather than revising forever on a judge that cannot answer.
 *
 * NOTE: at least once, like run-agent; the streak is one hash field per revision, so a repeated attempt rewrites its
 * own field and never counts twice.
 */
export class AgentJudgeCriterion implements CriterionEvaluator {
  readonly type = 'agent-judge';
  readonly sideEffects = 'at-least-once' as const;

  constructor(private readonly o: AgentJudgeOptions) {}

  async evaluate(ctx: NodeContext, c: Criterion): Promise<GateVerdict & { tokens?: number }> {
    // NOTE: a criterion without an id is named by its content, so two judges of one gate keep separate streaks.
    const id = c.id ?? `judge-${createHash('sha256').update(JSON.stringify(c)).digest('hex').slice(0, 12)}`;
    const r = await this.o.turns.run(ctx, { agent: typeof c.agent === 'string' ? c.agent : '', text: judgePrompt(ctx, c), role: 'judge', part: id });
    if (ctx.signal.aborted) return { outcome: 'timeout', criterion_id: c.id, reason: r.ok ? 'aborted' : r.error, tokens: r.tokens };
    const answer = r.ok ? parseJudgeAnswer(r.answer) : { ok: false as const };
    const broken = !answer.ok;
    const streak = await this.streak(ctx, id, broken);
    if (broken) {
      const why = r.ok ? 'the judge\'s answer holds no verdict line' : `the judge failed: ${r.error}`;
      if (streak >= LOOP_LIMITS.brokenJudgesFailOpen) {
        return { outcome: 'approved', criterion_id: c.id, reason: `failed open: ${streak} broken judge answers in a row (${why})`, findings: { failed_open: true }, tokens: r.tokens };
      }
      return { outcome: 'rejected', criterion_id: c.id, reason: `invalid_output: ${why}`, findings: { invalid_output: true, broken_in_a_row: streak }, tokens: r.tokens };
    }
    const a = answer as Extract<JudgeAnswer, { ok: true }>;
    const word = a.verdict.toLowerCase();
    const expect = typeof c.expect === 'string' && c.expect.trim() ? c.expect.trim().toLowerCase() : undefined;
    const approved = expect ? word === expect : APPROVE.has(word);
    const known = approved || REJECT.has(word) || expect !== undefined;
    return {
      outcome: approved ? 'approved' : 'rejected', criterion_id: c.id,
      reason: a.reason || (known ? `the judge answered ${a.verdict}` : `the judge answered an unknown verdict "${a.verdict}"`),
      findings: a.findings ?? (a.reason || undefined), tokens: r.tokens,
    };
  }

  /** streak records this revision's answer as broken or not and counts the broken ones in a row up to it. */
  private async streak(ctx: NodeContext, criterionId: string, broken: boolean): Promise<number> {
    const { key } = ctx;
    const k = `${this.o.prefix}{loop:${ctx.run.id}}:judge:${key.generation}:${key.nodeId}:${key.itemIndex}:${criterionId}`;
    const [, , all] = (await this.o.redis.multi().hset(k, String(ctx.revision), broken ? '1' : '0').expire(k, STREAK_TTL_S).hgetall(k).exec())!.map(([err, v]) => {
      if (err) throw err;
      return v;
    }) as [unknown, unknown, Record<string, string>];
    let n = 0;
    for (let rev = ctx.revision; rev >= 0 && all[String(rev)] === '1'; rev--) n++;
    return n;
  }
}

/** judgePrompt is what a judge is asked: how to answer first, then the rubric and the rendered prompt. */
export function judgePrompt(ctx: NodeContext, c: Criterion): string {
  const subject = typeof c.prompt === 'string' && c.prompt.trim()
    ? renderTemplate(c.prompt, ctx.scope)
    : JSON.stringify(Object.fromEntries(Object.entries(ctx.upstream).map(([id, u]) => [id, u.output ?? null])));
  return [
    `Judge the work of loop ${ctx.run.loop_name}, gate ${ctx.key.nodeId}. End your answer with one line of JSON: {"verdict": "approved" or "rejected", "reason": "why"}`,
    ...(typeof c.rubric === 'string' && c.rubric.trim() ? [`Rubric: ${renderTemplate(c.rubric, ctx.scope)}`] : []),
    subject,
  ].join('\n');
}
