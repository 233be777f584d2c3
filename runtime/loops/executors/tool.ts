import { inputDigest } from '../../tools/approvals.ts';
import type { ContextQuery, InvokeRequest } from '../../tools/runtime.ts';
import { ToolError, type ToolResult } from '../../tools/types.ts';
import { renderValue } from '../template.ts';
import type { NodeContext, NodeExecutor, NodeOutcome } from '../types.ts';
import { abortReason } from './agent-turns.ts';
import { clip } from './run-agent.ts';

/** ToolInvoker is what a tool node needs of the tool runtime (runtime/tools/runtime.ts ToolRuntime). */
export interface ToolInvoker {
  invoke(id: string, req: InvokeRequest): Promise<{ status: string; result: ToolResult }>;
  /** Issues an approval token for a call an operator approved through the loop (ToolRuntime.grant). */
  grant(id: string, q: ContextQuery, input: unknown): Promise<{ approval_token: string }>;
}

/**
 * toolOutput is what a tool node's downstream sees: `{text, structured}`, the text of the result's content blocks and
 * its structured part (null when none), so a template reads `{{ .nodes.<id>.output.text }}` whatever the tool.
 */
export function toolOutput(r: ToolResult): { text: string; structured: unknown; truncated: boolean } {
  return { text: clip(r.content.map((b) => b.text ?? '').filter(Boolean).join('\n')), structured: r.structured ?? null, truncated: r.truncated };
}

/** RERUN_ON_APPROVE flags a wait for approval (in `wait.detail`) whose approve runs the node again with NodeContext.approval. */
export const RERUN_ON_APPROVE = 'rerun';

/**
 * ToolExecutor runs an action node whose kind is a tool id (the registry's fallback): the tool runtime's whole
 * dispatch (decision pipeline, schema check, tool.pre_call hooks, approval, backend, result limiter and redaction),
 * as the operator in the run's workspace (in the context of the agent session the run acts for, when one started it or
 * a run-loop ancestor), with `params` (rendered over the node's scope) as the input. The output is
 * `{text, structured, truncated}` (toolOutput).
 *
 * A call that needs approval does not hang: the node waits for approval (kind `approval`, naming the tool and the
 * input digest), which parks the run in `needs-approval` with the node as the active gate. An operator's approve
 * (the run's approve route) runs the node again with `ctx.approval`, and the call goes through with a token bound to
 * that tool, context and input; reject blocks the run. A denied, unknown, unavailable or failing tool fails the
 * attempt with the tools family's error code and reasons.
 *
 * NOTE: at least once. A worker that dies during the call (or a stop that aborts the attempt while the backend is
 * still working) may leave the tool's effect done without the outcome recorded; the retried job calls it again.
 */
export class ToolExecutor implements NodeExecutor {
  readonly sideEffects = 'at-least-once' as const;

  /** `kind` is `*`: the registry holds it as the fallback of every action kind that is a tool id. */
  constructor(private readonly tools: ToolInvoker, readonly kind = '*') {}

  async run(ctx: NodeContext): Promise<NodeOutcome> {
    const toolId = ctx.node.kind;
    const input = renderValue(ctx.node.params ?? {}, ctx.scope);
    // NOTE: a run that acts for an agent session (it or a run-loop ancestor was started by one) calls tools in that
    // session's context (its agent's tool policy and toolsets, and what started it), so starting a loop, directly or
    // through another loop, never lets an agent do more than it could itself.
    const bySession = ctx.run.agent_session_id ? { session_id: ctx.run.agent_session_id } : {};
    const q: ContextQuery = { workspace_id: ctx.run.workspace_id, ...bySession };
    const req: InvokeRequest = {
      ...q, input, correlation_id: `loop:${ctx.run.id}:${ctx.key.generation}:${ctx.key.nodeId}:${ctx.key.itemIndex}:${ctx.attempt}`,
    };
    try {
      // NOTE: the approval holds for the input that was approved; a revised node with another input asks again.
      const approved = ctx.approval?.decision === 'approve' && (ctx.approval.input_digest === undefined || ctx.approval.input_digest === inputDigest(input));
      if (approved) req.approval_token = (await this.tools.grant(toolId, q, input)).approval_token;
      const res = await Promise.race([this.tools.invoke(toolId, req), aborted(ctx.signal)]);
      return { outcome: 'succeeded', output: toolOutput(res.result) };
    } catch (err) {
      if (ctx.signal.aborted) return { outcome: 'failed', error: abortReason(ctx.signal) };
      if (!(err instanceof ToolError)) throw err;
      if (err.code === 'tool_approval_required' && err.status === 202) {
        const gate = ctx.key.itemIndex >= 0 ? `${ctx.key.nodeId}[${ctx.key.itemIndex}]` : ctx.key.nodeId;
        return {
          outcome: 'waiting',
          wait: { kind: 'approval', ref: gate, detail: { [RERUN_ON_APPROVE]: true, tool_id: toolId, input_digest: inputDigest(input), reason_codes: err.reasonCodes } },
          verdict: { outcome: 'awaiting_approval', reason: `tool ${toolId} needs approval (${err.reasonCodes.join(', ')})` },
        };
      }
      return { outcome: 'failed', error: `${err.code}: ${err.message}${err.reasonCodes.length ? ` (${err.reasonCodes.join(', ')})` : ''}` };
    }
  }
}

function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) return reject(new Error(abortReason(signal)));
    signal.addEventListener('abort', () => reject(new Error(abortReason(signal))), { once: true });
  });
}
