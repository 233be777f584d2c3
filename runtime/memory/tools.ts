import { ToolError, type ContentBlock, type Descriptor } from '../tools/types.ts';
import { ServiceError } from '../../store/errors.ts';
import type { WriteResult } from './memory-service.ts';
import { MEMORY_TYPES } from './types.ts';

/** MemoryTools is what the memory tools need of the family (runtime/memory/index.ts Memory). */
export interface MemoryTools {
  search(body: Record<string, unknown>): Promise<unknown>;
  write(input: Record<string, unknown>, opts: { origin: 'tool'; dryRun?: boolean }): Promise<WriteResult>;
}

/**
 * MemoryToolContext is the part of a built-in tool's context (native.ts NativeContext) these tools read. NOTE: declared
 * here, not imported, because native.ts lists these tools (an import back would be a circle).
 */
interface MemoryToolContext {
  workspace?: { id: string };
  sessionId: string;
  agentName?: string;
  memory?: MemoryTools;
}

type NativeOutput = { content: ContentBlock[]; structured?: unknown };

/** MemoryTool has the shape of native.ts NativeTool over MemoryToolContext. */
interface MemoryTool {
  name: string; title: string; description: string; risk: Descriptor['risk']; toolsets: string[]; needs: string[];
  input: Record<string, unknown>; output?: Record<string, unknown>; hints: string[];
  run(input: any, ctx: MemoryToolContext): Promise<NativeOutput>;
}

const json = (structured: unknown): NativeOutput => ({ content: [{ type: 'text', text: JSON.stringify(structured) }], structured });
const object = (properties: Record<string, unknown>, required: string[] = []) => ({ type: 'object', additionalProperties: false, properties, required });

function memoryOf(ctx: MemoryToolContext): MemoryTools {
  if (!ctx.memory) throw new ToolError('tool_unavailable', 'the memory family is not available in this process', '', ['dependency_missing']);
  return ctx.memory;
}

/** guarded answers a memory error (validation, size, rate) as the tools family's error. */
async function guarded<T>(toolId: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ServiceError) {
      const code = err.status === 429 || err.status >= 500 ? 'tool_unavailable' : err.status === 409 ? 'tool_conflict' : 'tool_invalid_input';
      throw new ToolError(code, err.message, toolId, [err.status === 429 ? 'rate_limited' : 'schema_invalid'], err.evidence);
    }
    throw err;
  }
}

/**
 * confined is the caller's own scope: its workspace (from the session or the tool context) and its agent. NOTE:
 * the tools take neither workspace_id nor agent_name (their schemas refuse them), so an agent reads and writes
 * only the memories of its own workspace and its own agent, never another's.
 */
function confined(ctx: MemoryToolContext, scope: string, toolId: string): { workspace_id?: string; agent_name?: string; agent_tier?: string } {
  const ws = ctx.workspace?.id ?? '';
  const agent = ctx.agentName ?? '';
  if (scope === 'workspace') {
    if (!ws) throw new ToolError('tool_invalid_input', 'scope workspace needs a workspace in the tool context (an agent session has one)', toolId, ['dependency_missing'], { path: '/scope' });
    return { workspace_id: ws };
  }
  if (!agent) throw new ToolError('tool_invalid_input', 'scope agent needs an agent session', toolId, ['dependency_missing'], { path: '/scope' });
  return ws ? { workspace_id: ws, agent_name: agent, agent_tier: 'workspace' } : { agent_name: agent, agent_tier: 'global' };
}

/**
 * MEMORY_TOOLS: `svc__memory_search` and `svc__memory_write`, an agent's recall and memory writes over
 * /api/agent/mcp. Both are confined to the calling session's workspace and agent; writes go through the decision
 * controller with origin `tool` (a reject is answered as a decision, not an error, so the agent sees why).
 */
export function MEMORY_TOOLS(): MemoryTool[] {
  return [
    {
      name: 'memory_search', title: 'Recall memories', risk: 'read', toolsets: ['svc__memory'], needs: [], hints: ['memory', 'recall', 'remember'],
      description: 'Recall memories relevant to a query: the global ones, this workspace\'s and this agent\'s, ranked by BM25 with recency and recall signal.',
      input: object({
        query_text: { type: 'string', minLength: 1, maxLength: 4096 }, top_k: { type: 'integer', minimum: 1, maximum: 20 },
        scope: { type: 'string', enum: ['global', 'workspace', 'agent'] }, type: { type: 'string', enum: [...MEMORY_TYPES] }, explain: { type: 'boolean' },
      }, ['query_text']),
      async run(input, ctx) {
        const body: Record<string, unknown> = { ...input, workspace_id: ctx.workspace?.id ?? '', agent_name: ctx.agentName ?? '' };
        return json(await guarded('svc__memory_search', () => memoryOf(ctx).search(body)));
      },
    },
    {
      name: 'memory_write', title: 'Write a memory', risk: 'mutating', toolsets: ['svc__memory'], needs: [], hints: ['memory', 'remember', 'note'],
      description: 'Remember a fact for later sessions, at this workspace (scope workspace) or this agent (scope agent). The decision controller adds, updates, leaves unchanged or rejects it and says why.',
      input: object({
        scope: { type: 'string', enum: ['workspace', 'agent'] }, type: { type: 'string', enum: [...MEMORY_TYPES] },
        name: { type: 'string', minLength: 1, maxLength: 253 }, content: { type: 'string', minLength: 1 }, description: { type: 'string', maxLength: 1024 },
        entity: { type: 'string', maxLength: 253 }, attribute: { type: 'string', maxLength: 253 }, injection: { type: 'boolean' },
        metadata: { type: 'object', additionalProperties: { type: 'string' } }, dry_run: { type: 'boolean' },
      }, ['scope', 'type', 'name', 'content']),
      async run(input, ctx) {
        const { dry_run: dryRun, ...rest } = input;
        const where = confined(ctx, input.scope, 'svc__memory_write');
        const res = await guarded('svc__memory_write', () => memoryOf(ctx).write({ ...rest, ...where, ...(ctx.sessionId ? { source_session_ids: [ctx.sessionId] } : {}) }, { origin: 'tool', dryRun: Boolean(dryRun) }));
        return json({ applied: res.applied, decision: res.decision, dry_run: Boolean(dryRun) });
      },
    },
  ];
}
