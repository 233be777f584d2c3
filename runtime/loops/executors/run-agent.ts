import { renderTemplate } from '../template.ts';
import { LOOP_LIMITS, type NodeContext, type NodeExecutor, type NodeOutcome } from '../types.ts';
import type { AgentTurns } from './agent-turns.ts';

/**
 * promptOf renders a run-agent node's prompt template (`{{ .inputs.x }}`, `{{ .nodes.<id>.output }}`, `{{ .item }}`)
 * over the node's scope; a revision (a gate sent the node back) appends the gate's findings, so the agent sees what
 * to change.
 */
export function promptOf(ctx: NodeContext): string {
  const text = renderTemplate(String(ctx.node.prompt ?? ''), ctx.scope);
  if (ctx.revision <= 0 || ctx.feedback === undefined || ctx.feedback === '') return text;
  const feedback = typeof ctx.feedback === 'string' ? ctx.feedback : JSON.stringify(ctx.feedback);
  return `${text}\nRevision ${ctx.revision}, feedback: ${feedback}`;
}

/**
 * RunAgentExecutor runs a `run-agent` node: one turn of a session of the node's agent (else the workspace's default
 * agent, then the session role's), with the node's `session` provider and model when given, prompted with the
 * rendered template. The
 * output is the agent's answer (its messages of the turn, joined); the tokens its usage rows report count against
 * the run's budget. A turn that fails, a session that does not start, or a session stopped under the turn fails the
 * attempt (retried per the node's retry policy).
 *
 * NOTE: at least once (agent-turns.ts): a worker that dies mid-turn is resumed on the same session when the session
 * was recorded, else the turn runs again in a new one.
 */
export class RunAgentExecutor implements NodeExecutor {
  readonly kind = 'run-agent';
  readonly sideEffects = 'at-least-once' as const;

  constructor(private readonly turns: AgentTurns) {}

  async run(ctx: NodeContext): Promise<NodeOutcome> {
    const agent = typeof ctx.node.agent === 'string' ? ctx.node.agent : '';
    const text = promptOf(ctx);
    if (!text.trim()) return { outcome: 'failed', error: 'the prompt rendered empty' };
    const r = await this.turns.run(ctx, { agent, text, role: 'worker', session: ctx.node.session });
    if (!r.ok) return { outcome: 'failed', error: `agent turn failed: ${r.error}`, tokens: r.tokens };
    return { outcome: 'succeeded', output: clip(r.answer), tokens: r.tokens };
  }
}

/** clip keeps an answer within the run's output limit (LOOP_LIMITS.outputBytes), cutting its end. */
export function clip(text: string, max = LOOP_LIMITS.outputBytes - 256): string {
  if (Buffer.byteLength(text) <= max) return text;
  const cut = Buffer.from(text).subarray(0, max).toString('utf8').replace(/\uFFFD$/, '');
  return `${cut}\n[truncated]`;
}
