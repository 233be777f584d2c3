import { createReadStream } from 'node:fs';
import { lstat, open, readdir, realpath, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { NotFoundError, ValidationError } from '../../store/errors.ts';
import type { Workspace } from '../../store/workspace-store.ts';
import type { HeartbeatWakes } from '../agents/heartbeat-wakes.ts';
import type { AutomationReader, AutomationView } from '../automation/types.ts';
import { within } from '../security/workspace-roots.ts';
import type { TaskService } from '../tasks/service.ts';
import type { ModelCatalog } from '../models/catalog.ts';
import { MEMORY_TOOLS, type MemoryTools } from '../memory/tools.ts';
import { LOOP_TOOLS, type LoopsAccess } from './native-loops.ts';
import { ToolError, type ContentBlock, type Descriptor } from './types.ts';

/** NativeContext is what a built-in tool may use: the effective workspace and session, and the service. */
export interface NativeContext {
  workspace?: Workspace;
  sessionId: string;
  recap(sessionId: string, limit: number): Promise<Record<string, unknown>>;
  search(query: string, limit: number): Promise<Descriptor[]>;
  describe(toolId: string): Promise<Descriptor | undefined>;
  skills(): Promise<{ name: string; description: string; enabled: boolean; source: string }[]>;
  skill(name: string): Promise<string>;
  /** The calling context's agent ('' when none): the heartbeat tools' default agent. */
  agentName?: string;
  /** Heartbeat wakes (status, manual wake); absent in a process without them. */
  heartbeat?: Pick<HeartbeatWakes, 'status' | 'wake'>;
  /** The automation family (jobs, triggers, runs); absent where the process does not serve it. */
  automation?: AutomationReader;
  /** The task family: the svc__tasks and svc__autonomy tools; absent where the process has none. */
  tasks?: TaskService;
  /** The model catalog: the svc__provider_models tools; absent where the process has none. */
  models?: Pick<ModelCatalog, 'list' | 'refresh' | 'statuses'>;
  /** The memory family: the svc__memory_* tools; absent where the process has none. */
  memory?: MemoryTools;
  /** The loop family: the svc__loops tools; absent where the process has none. */
  loops?: LoopsAccess;
}

/** NativeOutput is a built-in tool's result before the result limiter. */
export interface NativeOutput {
  content: ContentBlock[];
  structured?: unknown;
}

/** NativeTool is a built-in tool: its descriptor fields and its handler. */
export interface NativeTool {
  name: string;
  title: string;
  description: string;
  risk: Descriptor['risk'];
  toolsets: string[];
  /** `workspace`: the tool reads or writes inside the effective workspace's root, so it needs one. */
  needs: string[];
  input: Record<string, unknown>;
  output?: Record<string, unknown>;
  hints: string[];
  run(input: any, ctx: NativeContext): Promise<NativeOutput>;
}

/** NATIVE_PREFIX is the reserved namespace of built-in tool and toolset ids. */
export const NATIVE_PREFIX = 'svc__';
const MAX_READ_BYTES = 1024 * 1024;
const SKIP_DIRS = new Set(['.git', 'node_modules', '.svc']);

const json = (structured: unknown): NativeOutput => ({ content: [{ type: 'text', text: JSON.stringify(structured) }], structured });
const object = (properties: Record<string, unknown>, required: string[] = []) => ({ type: 'object', additionalProperties: false, properties, required });

/**
 * inRoot resolves a workspace-relative path and refuses anything that leaves the root, following symlinks
 * (a link inside the root to /etc is outside). A path that does not exist yet is checked through its parent.
 */
async function inRoot(ws: Workspace | undefined, rel: string): Promise<string> {
  if (!ws) throw new ToolError('tool_unavailable', 'this tool needs a workspace in its context', '', ['dependency_missing'], { context: 'workspace_id' });
  const root = await realpath(ws.root_dir);
  const target = path.resolve(root, rel || '.');
  const real = await realpath(target).catch(async () => path.join(await realpath(path.dirname(target)).catch(() => target), path.basename(target)));
  if (!within(real, root)) {
    throw new ToolError('tool_denied', 'path is outside the workspace root', '', ['scope_mismatch'], { path: rel });
  }
  return real;
}

const relTo = (ws: Workspace, p: string) => path.relative(ws.root_dir, p) || '.';

async function* walk(dir: string): AsyncGenerator<string> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    const p = path.join(dir, e.name);
    if (e.isDirectory() && !SKIP_DIRS.has(e.name)) yield* walk(p);
    else if (e.isFile()) yield p;
  }
}

/** automationOf is the context's automation family, or a tool_unavailable error. */
function automationOf(ctx: NativeContext): AutomationReader {
  if (!ctx.automation) throw new ToolError('tool_unavailable', 'the automation family is not available in this process', '', ['dependency_missing']);
  return ctx.automation;
}

/** visible: in a workspace context, a job or trigger is visible when it is global or of that workspace. */
const visible = (ctx: NativeContext, v: AutomationView) => !ctx.workspace || v.scope.kind === 'global' || v.scope.id === ctx.workspace.id;

/**
 * seen returns a job or trigger visible in the context (shown), else the very error of a missing one, so the id of
 * another workspace's record tells the caller nothing.
 */
function seen(ctx: NativeContext, v: AutomationView): AutomationView {
  if (!visible(ctx, v)) throw new NotFoundError(`${v.kind} "${v.id}" does not exist`, v.kind === 'automation.trigger' ? 'trigger_not_found' : 'job_not_found', { kind: v.kind, id: v.id });
  return shown(ctx, v);
}

/** ownRun: in a workspace context, only the runs in that workspace (a global record's runs elsewhere are not its). */
const ownRun = (ctx: NativeContext, r: { workspace_id: string }) => !ctx.workspace || r.workspace_id === ctx.workspace.id;

/** shown is a visible job or trigger without its last run when that run was in another workspace. */
const shown = (ctx: NativeContext, v: AutomationView): AutomationView => (v.last_run && !ownRun(ctx, v.last_run) ? { ...v, last_run: null } : v);

const RUN_STATUS = { type: 'string', enum: ['queued', 'running', 'succeeded', 'failed', 'skipped'] };
const LIMIT = { type: 'integer', minimum: 1, maximum: 1000 };

/**
 * AUTOMATION_TOOLS are the automation toolset's read tools and "fire now" (create, update,
 * enable, disable and delete are left to the resource routes, which own those records). In a workspace context
 * they see global records and that workspace's.
 */
const AUTOMATION_TOOLS: NativeTool[] = (['job', 'trigger'] as const).flatMap((k): NativeTool[] => {
  const plural = `${k}s`;
  const get = (ctx: NativeContext, id: string) => (k === 'job' ? automationOf(ctx).getJob(id) : automationOf(ctx).getTrigger(id));
  const tools: NativeTool[] = [
    {
      name: `automation_${plural}_list`, title: `List automation ${plural}`, risk: 'read', toolsets: ['svc__automation'], needs: [],
      description: `The automation ${plural}: each record with its reconcile state, ${k === 'job' ? 'next fire time, ' : ''}and last run.`,
      hints: ['automation', k === 'job' ? 'schedule' : 'trigger', 'cron'],
      input: object({}),
      async run(_input, ctx) {
        const all = k === 'job' ? await automationOf(ctx).listJobs() : await automationOf(ctx).listTriggers();
        return json({ [plural]: all.filter((v) => visible(ctx, v)).map((v) => shown(ctx, v)) });
      },
    },
    {
      name: `automation_${plural}_get`, title: `Get an automation ${k}`, risk: 'read', toolsets: ['svc__automation'], needs: [],
      description: `One automation ${k} by id, with its reconcile state and last run.`,
      hints: ['automation', k],
      input: object({ id: { type: 'string', minLength: 1 } }, ['id']),
      async run(input, ctx) {
        return json({ [k]: seen(ctx, await get(ctx, input.id)) });
      },
    },
    {
      name: `automation_${plural}_history`, title: `Automation ${k} history`, risk: 'read', toolsets: ['svc__automation'], needs: [],
      description: `The runs of one automation ${k}, newest first.`,
      hints: ['automation', 'runs', 'history'],
      input: object({ id: { type: 'string', minLength: 1 }, status: RUN_STATUS, limit: LIMIT }, ['id']),
      async run(input, ctx) {
        seen(ctx, await get(ctx, input.id));
        // NOTE: a global record's history holds every workspace's runs; the limit counts the runs shown.
        const runs = await automationOf(ctx).history(k, input.id, { status: input.status, limit: ctx.workspace ? 1000 : input.limit ?? 50 });
        return json({ runs: runs.filter((r) => ownRun(ctx, r)).slice(0, input.limit ?? 50) });
      },
    },
  ];
  if (k === 'job') {
    tools.push({
      name: 'automation_jobs_trigger', title: 'Fire an automation job now', risk: 'mutating', toolsets: ['svc__automation'], needs: [],
      description: 'Fire an automation job now: a manual run (fire_limit applies). A global job runs in the context\'s workspace (without one, in workspace_id).',
      hints: ['run now', 'fire', 'trigger'],
      input: object({ id: { type: 'string', minLength: 1 }, workspace_id: { type: 'string' } }, ['id']),
      async run(input, ctx) {
        const job = seen(ctx, await get(ctx, input.id));
        const named = input.workspace_id as string | undefined;
        // NOTE: in a workspace context a job runs there and nowhere else. Another workspace is answered as the
        // automation family answers one that does not exist, so the answer tells the caller nothing of it.
        if (ctx.workspace && named && ![ctx.workspace.id, ctx.workspace.name, ctx.workspace.root_dir].includes(named)) {
          throw new ValidationError(`workspace "${named}" does not exist`, 'invalid_body', { workspace_id: 'must name an existing workspace' });
        }
        const ws = ctx.workspace?.id || named || undefined;
        // NOTE: the run's session is held to the firing session's tool policy: firing a job never widens it.
        return json({ run: await automationOf(ctx).fireJob(input.id, { workspace_id: ws }, ctx.sessionId ? { startedBy: ctx.sessionId } : {}) });
      },
    });
  }
  return tools;
}).concat([
  {
    name: 'automation_runs_list', title: 'List automation runs', risk: 'read', toolsets: ['svc__automation'], needs: [],
    description: 'Automation runs, newest first, by job, trigger and status.',
    hints: ['automation', 'runs'],
    input: object({ job_id: { type: 'string' }, trigger_id: { type: 'string' }, status: RUN_STATUS, limit: LIMIT }),
    async run(input, ctx) {
      const runs = await automationOf(ctx).listRuns({ job_id: input.job_id, trigger_id: input.trigger_id, status: input.status, limit: input.limit ?? 50 });
      return json({ runs: runs.filter((r) => ownRun(ctx, r)) });
    },
  },
  {
    name: 'automation_runs_get', title: 'Get an automation run', risk: 'read', toolsets: ['svc__automation'], needs: [],
    description: 'One automation run by id: status, reason, session, attempt, error and timings.',
    hints: ['automation', 'run'],
    input: object({ id: { type: 'string', minLength: 1 } }, ['id']),
    async run(input, ctx) {
      const run = await automationOf(ctx).getRun(input.id);
      if (!ownRun(ctx, run)) throw new NotFoundError(`automation run "${input.id}" does not exist`, 'run_not_found', { run_id: input.id });
      return json({ run });
    },
  },
]);

/** NATIVE_TOOLS is the built-in tool set (ids `svc__<name>`), each with honest risk flags and JSON Schemas. */
export const NATIVE_TOOLS: NativeTool[] = [
  {
    name: 'workspace_list_files', title: 'List files', risk: 'read', toolsets: ['svc__workspace'], needs: ['workspace'],
    description: 'List the entries of a directory inside the workspace root (name, type, size).',
    hints: ['ls', 'directory', 'browse'],
    input: object({ path: { type: 'string', description: 'Directory relative to the workspace root; default the root.' }, max_entries: { type: 'integer', minimum: 1, maximum: 10000 } }),
    async run(input, ctx) {
      const dir = await inRoot(ctx.workspace, input.path ?? '.');
      const entries = await readdir(dir, { withFileTypes: true }).catch((err) => { throw new ToolError('tool_invalid_input', `cannot list ${input.path ?? '.'}: ${(err as NodeJS.ErrnoException).code}`, '', ['schema_invalid']); });
      const max = input.max_entries ?? 1000;
      const out = [];
      for (const e of entries.sort((a, b) => a.name.localeCompare(b.name)).slice(0, max)) {
        const st = await lstat(path.join(dir, e.name)).catch(() => undefined);
        out.push({ name: e.name, type: e.isDirectory() ? 'dir' : e.isSymbolicLink() ? 'symlink' : 'file', size: st?.size ?? 0 });
      }
      return json({ path: relTo(ctx.workspace!, dir), entries: out, truncated: entries.length > max });
    },
  },
  {
    name: 'workspace_read_file', title: 'Read a file', risk: 'read', toolsets: ['svc__workspace'], needs: ['workspace'],
    description: 'Read a text file inside the workspace root, from a byte offset, up to max_bytes (default 64 KiB).',
    hints: ['cat', 'open', 'view', 'contents'],
    input: object({ path: { type: 'string', minLength: 1 }, offset: { type: 'integer', minimum: 0 }, max_bytes: { type: 'integer', minimum: 1, maximum: MAX_READ_BYTES } }, ['path']),
    async run(input, ctx) {
      const file = await inRoot(ctx.workspace, input.path);
      const st = await stat(file).catch(() => undefined);
      if (!st?.isFile()) throw new ToolError('tool_invalid_input', `${input.path} is not a file in the workspace`, '', ['schema_invalid'], { path: input.path });
      const offset = input.offset ?? 0;
      const buf = Buffer.alloc(Math.max(0, Math.min(input.max_bytes ?? 64 * 1024, st.size - offset)));
      const fh = await open(file, 'r');
      try { await fh.read(buf, 0, buf.length, offset); } finally { await fh.close(); }
      return { content: [{ type: 'text', text: buf.toString('utf8'), mime_type: 'text/plain' }], structured: { path: input.path, size: st.size, offset, bytes: buf.length, eof: offset + buf.length >= st.size } };
    },
  },
  {
    name: 'workspace_search_text', title: 'Search text', risk: 'read', toolsets: ['svc__workspace'], needs: ['workspace'],
    description: 'Search the text files under a workspace directory for a literal string; returns path, line number and line.',
    hints: ['grep', 'find', 'search'],
    input: object({ query: { type: 'string', minLength: 1 }, path: { type: 'string' }, case_sensitive: { type: 'boolean' }, max_results: { type: 'integer', minimum: 1, maximum: 1000 } }, ['query']),
    async run(input, ctx) {
      const dir = await inRoot(ctx.workspace, input.path ?? '.');
      const needle = input.case_sensitive ? input.query : input.query.toLowerCase();
      const max = input.max_results ?? 100;
      const matches: { path: string; line: number; text: string }[] = [];
      for await (const file of walk(dir)) {
        if ((await stat(file)).size > MAX_READ_BYTES) continue;
        const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
        let n = 0;
        for await (const line of lines) {
          n++;
          if (line.includes('\u0000')) break; // binary file
          if ((input.case_sensitive ? line : line.toLowerCase()).includes(needle)) matches.push({ path: relTo(ctx.workspace!, file), line: n, text: line.slice(0, 500) });
          if (matches.length >= max) break;
        }
        if (matches.length >= max) break;
      }
      return json({ query: input.query, matches, truncated: matches.length >= max });
    },
  },
  {
    name: 'workspace_write_file', title: 'Create a file', risk: 'mutating', toolsets: ['svc__workspace'], needs: ['workspace'],
    description: 'Create a new text file inside the workspace root. Never overwrites: an existing path is refused.',
    hints: ['create', 'new file', 'save'],
    input: object({ path: { type: 'string', minLength: 1 }, content: { type: 'string' } }, ['path', 'content']),
    async run(input, ctx) {
      const file = await inRoot(ctx.workspace, input.path);
      try {
        await writeFile(file, input.content, { flag: 'wx' });
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        throw new ToolError(code === 'EEXIST' ? 'tool_conflict' : 'tool_invalid_input', `cannot create ${input.path}: ${code}`, '', [], { path: input.path });
      }
      return json({ path: input.path, bytes: Buffer.byteLength(input.content) });
    },
  },
  {
    name: 'session_recap', title: 'Session recap', risk: 'read', toolsets: ['svc__sessions'], needs: [],
    description: 'A bounded, redacted recap of a session: state, recent markers and the last messages. Defaults to the calling session.',
    hints: ['summary', 'history', 'catch up'],
    input: object({ session_id: { type: 'string' }, limit: { type: 'integer', minimum: 1, maximum: 100 } }),
    async run(input, ctx) {
      const id = input.session_id || ctx.sessionId;
      if (!id) throw new ToolError('tool_invalid_input', 'session_id is required outside a session', '', ['schema_invalid'], { path: '/session_id' });
      return json(await ctx.recap(id, input.limit ?? 20));
    },
  },
  {
    name: 'tool_search', title: 'Search tools', risk: 'read', toolsets: ['svc__catalog', 'svc__bootstrap'], needs: [],
    description: 'Search the tool catalog by id, title, description, tags and hints; returns ids, titles and risk.',
    hints: ['discover', 'find tool'],
    input: object({ query: { type: 'string' }, limit: { type: 'integer', minimum: 1, maximum: 200 } }),
    async run(input, ctx) {
      const found = await ctx.search(input.query ?? '', input.limit ?? 20);
      return json({ tools: found.map((d) => ({ tool_id: d.tool_id, display_title: d.display_title, description: d.description, risk: d.risk })) });
    },
  },
  {
    name: 'tool_info', title: 'Describe a tool', risk: 'read', toolsets: ['svc__catalog', 'svc__bootstrap'], needs: [],
    description: 'The full descriptor of one tool, including its input schema.',
    hints: ['schema', 'describe'],
    input: object({ tool_id: { type: 'string', minLength: 1 } }, ['tool_id']),
    async run(input, ctx) {
      const d = await ctx.describe(input.tool_id);
      if (!d) throw new ToolError('tool_not_found', 'tool not found', input.tool_id, ['tool_unknown']);
      return json({ tool: d });
    },
  },
  {
    name: 'skill_list', title: 'List skills', risk: 'read', toolsets: ['svc__authored_context', 'svc__bootstrap'], needs: [],
    description: 'The skills available in this context (workspace and agent): name, description, source, enabled.',
    hints: ['skills', 'playbooks', 'how to'],
    input: object({}),
    async run(_input, ctx) {
      return json({ skills: (await ctx.skills()).map(({ name, description, enabled, source }) => ({ name, description, enabled, source })) });
    },
  },
  {
    name: 'skill_view', title: 'Read a skill', risk: 'read', toolsets: ['svc__authored_context'], needs: [],
    description: 'The SKILL.md content of one skill, as resolved in this context.',
    hints: ['skill', 'instructions'],
    input: object({ name: { type: 'string', minLength: 1 } }, ['name']),
    async run(input, ctx) {
      return { content: [{ type: 'text', text: await ctx.skill(input.name), mime_type: 'text/markdown' }], structured: { name: input.name } };
    },
  },
  // Heartbeat tools (heartbeat group).
  {
    name: 'agent_heartbeat_status', title: 'Heartbeat status', risk: 'read', toolsets: ['svc__authored_context'], needs: ['workspace'],
    description: 'An agent\'s heartbeat in the workspace: whether it is active, its wake interval, each live session\'s wake eligibility and cooldown, and the recent wakes. Defaults to the calling agent.',
    hints: ['heartbeat status', 'wake audit', 'agent heartbeat policy'],
    input: object({ agent_name: { type: 'string' }, limit: { type: 'integer', minimum: 1, maximum: 100, description: 'Recent wakes to include (default 10).' } }),
    async run(input, ctx) {
      return json(await heartbeatOf(ctx).status(heartbeatAgent(input, ctx), ctx.workspace!, input.limit ?? 10));
    },
  },
  {
    name: 'agent_heartbeat_wake', title: 'Heartbeat wake', risk: 'mutating', toolsets: ['svc__authored_context'], needs: ['workspace'],
    description: 'Request one advisory heartbeat wake of an agent\'s session in the workspace (the given one, else its most recently active eligible one); answers the recorded decision (sent, skipped, rate_limited…). dry_run evaluates without sending.',
    hints: ['heartbeat wake', 'manual wake', 'advisory wake'],
    input: object({ agent_name: { type: 'string' }, session_id: { type: 'string' }, dry_run: { type: 'boolean' } }),
    async run(input, ctx) {
      const [decision] = await heartbeatOf(ctx).wake({ agentName: heartbeatAgent(input, ctx), workspace: ctx.workspace!, source: 'manual', sessionId: input.session_id || undefined, dryRun: Boolean(input.dry_run) });
      return json({ decision });
    },
  },
  ...AUTOMATION_TOOLS,
  ...TASK_TOOLS(),
  ...PROVIDER_MODEL_TOOLS(),
  ...MEMORY_TOOLS(),
  ...LOOP_TOOLS,
];

/** modelsOf is the context's model catalog, or a tool_unavailable error. */
function modelsOf(ctx: NativeContext): NonNullable<NativeContext['models']> {
  if (!ctx.models) throw new ToolError('tool_unavailable', 'the model catalog is not available in this process', '', ['dependency_missing']);
  return ctx.models;
}

/** PROVIDER_MODEL_TOOLS are the provider models group over the model catalog (runtime/models/). */
function PROVIDER_MODEL_TOOLS(): NativeTool[] {
  const PROVIDER_ID = { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]*$', maxLength: 253 };
  return [
    {
      name: 'provider_models_list', title: 'Provider models', risk: 'read', toolsets: ['svc__provider_models'], needs: [],
      description: 'The model catalog: models with their limits, costs, reasoning efforts and availability (curated view by default; view=all for every known model).',
      hints: ['models', 'model catalog', 'which models', 'context window', 'cost'],
      input: object({ provider_id: PROVIDER_ID, view: { type: 'string', enum: ['curated', 'all'] }, include_stale: { type: 'boolean' } }),
      async run(input, ctx) {
        return json({ models: await modelsOf(ctx).list({ view: input.view ?? 'curated', provider_id: input.provider_id, include_stale: Boolean(input.include_stale) }) });
      },
    },
    {
      name: 'provider_models_status', title: 'Provider model sources', risk: 'read', toolsets: ['svc__provider_models'], needs: [],
      description: 'The model catalog sources\' status (all, or one provider\'s): last refresh, last success, redacted last error, row count.',
      hints: ['model catalog status', 'provider status', 'refresh state'],
      input: object({ provider_id: PROVIDER_ID }),
      async run(input, ctx) {
        return json({ sources: await modelsOf(ctx).statuses(input.provider_id) });
      },
    },
    {
      name: 'provider_models_refresh', title: 'Refresh provider models', risk: 'mutating', toolsets: ['svc__provider_models'], needs: [],
      description: 'Refresh the model catalog now (all sources, or one provider\'s); answers the source statuses and any error.',
      hints: ['refresh models', 'model catalog refresh'],
      input: object({ provider_id: PROVIDER_ID, force: { type: 'boolean' } }),
      async run(input, ctx) {
        const r = await modelsOf(ctx).refresh({ provider: input.provider_id, force: Boolean(input.force) });
        return json({ sources: r.sources, ...(r.error ? { error: r.error } : {}) });
      },
    },
  ];
}

function heartbeatOf(ctx: NativeContext): NonNullable<NativeContext['heartbeat']> {
  if (!ctx.heartbeat) throw new ToolError('tool_unavailable', 'heartbeat wakes are not available in this process', '', ['dependency_missing']);
  return ctx.heartbeat;
}

function heartbeatAgent(input: { agent_name?: string }, ctx: NativeContext): string {
  const name = input.agent_name || ctx.agentName;
  if (!name) throw new ToolError('tool_invalid_input', 'agent_name is required outside an agent session', '', ['schema_invalid'], { path: '/agent_name' });
  return name;
}

// ── Task tools (tasks and autonomy groups) ───────────────────────────────────────────────────

function tasksOf(ctx: NativeContext): TaskService {
  if (!ctx.tasks) throw new ToolError('tool_unavailable', 'the task family is not available in this process', '', ['dependency_missing']);
  return ctx.tasks;
}

/** agentCaller is the calling agent session as a lease holder: the autonomy tools act only for a session. */
function agentCaller(ctx: NativeContext) {
  if (!ctx.sessionId || !ctx.workspace) throw new ToolError('tool_invalid_input', 'the autonomy tools run only in an agent session (with its workspace)', '', ['dependency_missing'], { context: 'session_id' });
  return { session_id: ctx.sessionId, workspace_id: ctx.workspace.id, agent_name: ctx.agentName ?? '' };
}

/**
 * ownTask is a task the context may see: in a workspace context, a task of that workspace or a global one. NOTE: a
 * task of another workspace is answered with the very error of a task that does not exist, so its id tells the
 * caller nothing; `writable` also refuses a global task, whose effect reaches every workspace.
 */
async function ownTask(ctx: NativeContext, id: string, writable = false) {
  const task = await tasksOf(ctx).view(id);
  if (!ctx.workspace || task.workspace_id === ctx.workspace.id) return task;
  if (task.scope === 'global' && !writable) return task;
  if (task.scope === 'global') throw new ToolError('tool_denied', `task "${id}" is global: only an operator changes it`, '', ['scope_mismatch'], { task_id: id });
  throw new NotFoundError(`task "${id}" not found`, 'task_not_found', { task_id: id });
}

/**
 * TASK_TOOLS: `svc__tasks` (list, read, create, cancel, run list) and `svc__autonomy` (claim the next run,
 * heartbeat, complete, fail, release the caller's lease), the agent's way to the task family over /api/agent/mcp.
 */
function TASK_TOOLS(): NativeTool[] {
  const TASK_OP = object({ run_id: { type: 'string', minLength: 1 } }, ['run_id']);
  return [
    {
      name: 'task_list', title: 'List tasks', risk: 'read', toolsets: ['svc__tasks'], needs: [], hints: ['tasks', 'backlog'],
      description: 'Tasks, optionally filtered by status; workspace tasks of the context\'s workspace by default.',
      input: object({ status: { type: 'string' }, limit: { type: 'integer', minimum: 1, maximum: 200 } }),
      async run(input, ctx) { return json(await tasksOf(ctx).list({ status: input.status, workspace: ctx.workspace?.id, limit: input.limit ?? 50 })); },
    },
    {
      name: 'task_read', title: 'Read a task', risk: 'read', toolsets: ['svc__tasks'], needs: [], hints: ['task'],
      description: 'One task by id (of the context\'s workspace, or global), with its status and pause state.',
      input: object({ id: { type: 'string', minLength: 1 } }, ['id']),
      async run(input, ctx) { return json({ task: await ownTask(ctx, input.id) }); },
    },
    {
      name: 'task_create', title: 'Create a task', risk: 'mutating', toolsets: ['svc__tasks'], needs: ['workspace'], hints: ['task', 'create', 'enqueue'],
      description: 'Create a workspace task in the context\'s workspace (start:true also enqueues a run).',
      input: object({ title: { type: 'string', minLength: 1 }, description: { type: 'string' }, priority: { type: 'string', enum: ['low', 'medium', 'high', 'urgent'] }, start: { type: 'boolean' } }, ['title']),
      async run(input, ctx) {
        const { start, ...rest } = input;
        const task = await tasksOf(ctx).create({ ...rest, scope: 'workspace', workspace: ctx.workspace!.id, auto_enqueue_on_ready: Boolean(start) }, { name: ctx.agentName || 'agent' }, undefined, { kind: 'agent_session', ref: ctx.sessionId });
        return json({ task });
      },
    },
    {
      name: 'task_cancel', title: 'Cancel a task', risk: 'destructive', toolsets: ['svc__tasks'], needs: [], hints: ['task', 'cancel'],
      description: 'Cancel a task of the context\'s workspace and its open runs.',
      input: object({ id: { type: 'string', minLength: 1 }, reason: { type: 'string' } }, ['id']),
      async run(input, ctx) {
        await ownTask(ctx, input.id, true);
        return json({ task: await tasksOf(ctx).cancel(input.id, { reason: input.reason }) });
      },
    },
    {
      name: 'task_run_list', title: 'List a task\'s runs', risk: 'read', toolsets: ['svc__tasks'], needs: [], hints: ['task', 'runs'],
      description: 'The runs of one task (of the context\'s workspace, or global), oldest first.',
      input: object({ id: { type: 'string', minLength: 1 } }, ['id']),
      async run(input, ctx) {
        await ownTask(ctx, input.id);
        return json({ runs: await tasksOf(ctx).runs(input.id) });
      },
    },
    {
      name: 'task_run_claim_next', title: 'Claim the next task run', risk: 'mutating', toolsets: ['svc__autonomy'], needs: ['workspace'], hints: ['claim', 'lease', 'work queue'],
      description: 'Claim the next eligible run for this session (one lease per session); answers {claim} or {claim:null} when nothing is claimable.',
      input: object({ required_capabilities: { type: 'array', items: { type: 'string' } }, priority_min: { type: 'integer' }, lease_seconds: { type: 'integer', minimum: 0, maximum: 86400 } }),
      async run(input, ctx) { return json((await tasksOf(ctx).claimNext(agentCaller(ctx), input)) ?? { claim: null }); },
    },
    ...(['heartbeat', 'complete', 'fail', 'release'] as const).map((op): NativeTool => ({
      name: `task_run_${op}`, title: `${op[0].toUpperCase()}${op.slice(1)} the leased run`, risk: 'mutating', toolsets: ['svc__autonomy'], needs: ['workspace'], hints: ['lease', op],
      description: { heartbeat: 'Extend the lease of the run this session holds.', complete: 'Complete the run this session holds, with an optional result (≤ 64 KiB).', fail: 'Fail the run this session holds (retried while attempts remain).', release: 'Give the run back to the queue.' }[op],
      input: op === 'fail' ? object({ run_id: { type: 'string', minLength: 1 }, error: { type: 'string', minLength: 1 } }, ['run_id', 'error'])
        : op === 'complete' ? object({ run_id: { type: 'string', minLength: 1 }, result: {} }, ['run_id'])
        : op === 'heartbeat' ? object({ run_id: { type: 'string', minLength: 1 }, lease_seconds: { type: 'integer', minimum: 0, maximum: 86400 } }, ['run_id'])
        : TASK_OP,
      async run(input, ctx) {
        const { run_id: runId, ...body } = input;
        return json(await tasksOf(ctx)[op](agentCaller(ctx), runId, body));
      },
    })),
  ];
}
