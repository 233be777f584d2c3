import type { LoopEngine } from '../loops/engine.ts';
import type { LoopRunViews } from '../loops/runs.ts';
import { APPROVAL_DECISIONS, LOOP_RUN_STATUSES } from '../loops/types.ts';
import { ToolError, type ContentBlock, type Descriptor } from './types.ts';

/** LoopsAccess is what the svc__loops tools use of the loop family (runtime/loops/index.ts Loops). */
export interface LoopsAccess {
  runs: Pick<LoopRunViews, 'list' | 'detail'>;
  engine: Pick<LoopEngine, 'startRun' | 'approve'>;
}

/**
 * LoopToolContext is the part of a built-in tool's context (native.ts NativeContext) these tools read. NOTE: declared
 * here, not imported, because native.ts lists these tools (an import back would be a circle).
 */
export interface LoopToolContext {
  workspace?: { id: string };
  sessionId: string;
  agentName?: string;
  loops?: LoopsAccess;
}

/** LoopTool has the shape of native.ts NativeTool over LoopToolContext. */
interface LoopTool {
  name: string; title: string; description: string; risk: Descriptor['risk']; toolsets: string[]; needs: string[];
  input: Record<string, unknown>; hints: string[];
  run(input: any, ctx: LoopToolContext): Promise<{ content: ContentBlock[]; structured?: unknown }>;
}

const json = (structured: unknown) => ({ content: [{ type: 'text', text: JSON.stringify(structured) }], structured });
const object = (properties: Record<string, unknown>, required: string[] = []) => ({ type: 'object', additionalProperties: false, properties, required });
const RUN_ID = { type: 'string', minLength: 1, maxLength: 128 };

function loopsOf(ctx: LoopToolContext): LoopsAccess {
  if (!ctx.loops) throw new ToolError('tool_unavailable', 'the loop family is not available in this process', '', ['dependency_missing']);
  return ctx.loops;
}

/**
 * LOOP_TOOLS are the `svc__loops` toolset: an agent lists, reads, starts and approves loop runs of its own session's
 * workspace (the context's workspace: over /api/agent/mcp that is the caller's session's, never one it names). A run
 * an agent starts records its session as who started it and its origin (`origin_session` filters on it).
 */
export const LOOP_TOOLS: LoopTool[] = [
  {
    name: 'loop_run_list', title: 'List loop runs', risk: 'read', toolsets: ['svc__loops'], needs: ['workspace'], hints: ['loops', 'workflow', 'runs'],
    description: 'Loop runs of the workspace, newest first, with aggregates; filter by loop name, status, live, or the runs this session started (mine).',
    input: object({
      loop: { type: 'string', maxLength: 128 }, status: { type: 'string', enum: [...LOOP_RUN_STATUSES] }, live: { type: 'boolean' }, mine: { type: 'boolean' },
      limit: { type: 'integer', minimum: 1, maximum: 500 },
    }),
    async run(input, ctx) {
      const mine = input.mine === true && ctx.sessionId ? { origin_session: ctx.sessionId } : {};
      return json(await loopsOf(ctx).runs.list(ctx.workspace!.id, { loop: input.loop, status: input.status, live: input.live, limit: input.limit ?? 50, ...mine }));
    },
  },
  {
    name: 'loop_run_get', title: 'Get a loop run', risk: 'read', toolsets: ['svc__loops'], needs: ['workspace'], hints: ['loop run', 'status', 'nodes'],
    description: 'One loop run of the workspace with each node execution (generation, status, output) and its executed definition.',
    input: object({ run_id: RUN_ID }, ['run_id']),
    async run(input, ctx) { return json(await loopsOf(ctx).runs.detail(ctx.workspace!.id, input.run_id)); },
  },
  {
    name: 'loop_run_start', title: 'Start a loop run', risk: 'mutating', toolsets: ['svc__loops'], needs: ['workspace'], hints: ['loop', 'start', 'workflow'],
    description: 'Start a run of one of the workspace\'s loop definitions with inputs; answers {run}.',
    input: object({ loop: { type: 'string', minLength: 1, maxLength: 128 }, inputs: { type: 'object' } }, ['loop']),
    async run(input, ctx) {
      const by = ctx.sessionId ? { started_by_kind: 'agent_session', started_by_ref: ctx.sessionId, started_origin_kind: 'session', started_origin_ref: ctx.sessionId }
        : { started_by_kind: 'tool', started_by_ref: 'svc__loop_run_start', started_origin_kind: 'catalog', started_origin_ref: input.loop };
      const run = await loopsOf(ctx).engine.startRun({ workspace_id: ctx.workspace!.id, loop_name: input.loop, inputs: input.inputs ?? {}, ...by, start_metadata: ctx.agentName ? { agent_name: ctx.agentName } : {} });
      return json({ run });
    },
  },
  {
    name: 'loop_run_approve', title: 'Decide a loop run\'s gate', risk: 'mutating', toolsets: ['svc__loops'], needs: ['workspace'], hints: ['loop', 'approve', 'gate', 'review'],
    description: 'Decide the gate a run of the workspace is parked on (its active_gate_id): approve, request_changes or reject. A tool call waiting for approval is approved only by an operator.',
    input: object({ run_id: RUN_ID, gate_id: { type: 'string', minLength: 1, maxLength: 128 }, decision: { type: 'string', enum: [...APPROVAL_DECISIONS] } }, ['run_id', 'gate_id', 'decision']),
    async run(input, ctx) {
      // NOTE: an agent session does not approve a tool call a run waits on: that call runs under an agent's policy
      // (the run acts for the session that started it), and the approval that policy asks for is an operator's.
      await loopsOf(ctx).engine.approve(input.run_id, input.gate_id, input.decision, ctx.workspace!.id, { operatorOnlyToolCalls: Boolean(ctx.sessionId) });
      return json({ ok: true });
    },
  },
];
