import { createHash } from 'node:crypto';
import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import type { RegistryCache, RegistryEntry } from '../../controllers/registry-controller.ts';
import { canonicalJson } from '../../store/canonical.ts';
import type { McpPool, McpServerSpec } from './mcp.ts';
import { ExtensionToolHost } from '../extensions/tool-host.ts';
import { NATIVE_PREFIX, NATIVE_TOOLS, type NativeTool } from './native.ts';
import type { RuntimeState } from './policy.ts';
import type { Descriptor, ToolPolicy } from './types.ts';

/** Backend is how a catalog entry runs. */
export type Backend =
  | { kind: 'native'; tool: NativeTool }
  | { kind: 'mcp'; server: RegistryEntry<McpServerSpec>; tool: string }
  | { kind: 'extension'; extension: string; handler: string }
  | { kind: 'none' };

/** CatalogEntry is one registered tool: descriptor, runtime state, backend, and secrets to redact from results. */
export interface CatalogEntry {
  descriptor: Descriptor;
  runtime: RuntimeState;
  backend: Backend;
  secrets: string[];
}

/** ToolsetDef is a toolset's direct members. */
export interface ToolsetDef {
  tools: string[];
  toolsets: string[];
}

/** Snapshot is the merged catalog of one workspace context. */
export interface Snapshot {
  entries: CatalogEntry[];
  byId: Map<string, CatalogEntry>;
  toolsets: Map<string, ToolsetDef>;
}

const EMPTY_INPUT = { type: 'object', additionalProperties: false };
const digest = (v: unknown) => `sha256:${createHash('sha256').update(canonicalJson(v ?? {})).digest('hex')}`;

/** sanitize turns a raw MCP server or tool name into a tool id segment (`[a-z][a-z0-9_]*`, no edge `_`). */
export function sanitize(raw: string): string {
  const s = raw.toLowerCase().replace(/[^a-z0-9_]+/g, '_').replace(/_+/g, '_').replace(/^[_0-9]+|_+$/g, '');
  return s || 'x';
}

/** mcpToolId is the id of an MCP server's tool: `mcp__<server>__<tool>`, cut to 64 characters with a hash. */
export function mcpToolId(server: string, tool: string): string {
  const id = `mcp__${sanitize(server)}__${sanitize(tool)}`;
  if (id.length <= 64) return id;
  const h = createHash('sha256').update(`${server}\u0000${tool}`).digest('hex').slice(0, 8);
  return `${id.slice(0, 55).replace(/_+$/, '')}_${h}`;
}

function base(d: Partial<Descriptor> & Pick<Descriptor, 'tool_id' | 'source' | 'backend'>): Descriptor {
  const input = d.input_schema ?? EMPTY_INPUT;
  const output = d.output_schema ?? { type: 'object' };
  return {
    concurrency_safe: false, description: '', destructive: false, display_title: d.tool_id, max_result_bytes: 0, open_world: false, read_only: false,
    requires_interaction: false, risk: 'mutating', search_hints: [], tags: [], toolsets: [], visibility: 'session', ...d,
    input_schema: input, output_schema: output, input_schema_digest: digest(input), output_schema_digest: digest(output),
  };
}

const NO_BACKEND = { extension_id: '', handler: '', kind: '', mcp_server: '', mcp_tool: '', native_name: '', requires_capabilities: [] as string[] };
const NO_SOURCE = { kind: '', owner: '', raw_server_name: '', raw_tool_name: '', resource_id: '', resource_version: '', scope: '', workspace_id: '' };

/**
 * nativeDescriptor is a built-in tool's descriptor. NOTE: `backend.kind` is `native_go`, the contract's name
 * for in-process tools, although this service is written in TypeScript.
 */
function nativeDescriptor(t: NativeTool): Descriptor {
  return base({
    tool_id: NATIVE_PREFIX + t.name, display_title: t.title, description: t.description, risk: t.risk,
    read_only: t.risk === 'read', destructive: t.risk === 'destructive', open_world: t.risk === 'open_world', concurrency_safe: t.risk === 'read',
    backend: { ...NO_BACKEND, kind: 'native_go', native_name: t.name, requires_capabilities: t.needs },
    source: { ...NO_SOURCE, kind: 'builtin', owner: 'daemon', scope: 'global' },
    input_schema: t.input, output_schema: t.output, toolsets: t.toolsets, search_hints: t.hints, tags: ['builtin'],
  });
}

/**
 * needsTask says whether a server requires a tool to run as an MCP task (`execution.taskSupport: "required"`):
 * the pool makes plain calls only, so such a tool is listed but not executable (`backend_not_executable`).
 */
const needsTask = (t: McpTool) => (t as { execution?: { taskSupport?: string } }).execution?.taskSupport === 'required';

/** mcpDescriptor describes a listed MCP tool; missing annotations take MCP's cautious defaults. */
function mcpDescriptor(server: RegistryEntry<McpServerSpec>, t: McpTool): Descriptor {
  const a = t.annotations ?? {};
  const readOnly = a.readOnlyHint === true;
  const destructive = !readOnly && a.destructiveHint !== false;
  const openWorld = a.openWorldHint !== false;
  return base({
    tool_id: mcpToolId(server.spec.name, t.name), display_title: t.title ?? a.title ?? t.name, description: t.description ?? '',
    read_only: readOnly, destructive, open_world: openWorld, risk: destructive ? 'destructive' : openWorld ? 'open_world' : readOnly ? 'read' : 'mutating',
    concurrency_safe: readOnly, requires_interaction: false,
    backend: { ...NO_BACKEND, kind: 'mcp', mcp_server: server.spec.name, mcp_tool: t.name },
    source: {
      kind: 'mcp', owner: server.spec.name, raw_server_name: server.spec.name, raw_tool_name: t.name, resource_id: server.id,
      resource_version: String(server.version), scope: server.scope.kind, workspace_id: server.scope.id ?? '',
    },
    input_schema: t.inputSchema as Record<string, unknown>, output_schema: t.outputSchema as Record<string, unknown> | undefined,
    tags: ['mcp', sanitize(server.spec.name)],
  });
}

// NOTE: registry entries and listed MCP tools are reused objects until they change, so their descriptors
// (two schema digests each) are computed once, not on every request.
const described = new WeakMap<object, Descriptor>();
function memo(key: object, build: () => Descriptor): Descriptor {
  return described.get(key) ?? (described.set(key, build()), described.get(key)!);
}

function recordDescriptor(e: RegistryEntry): Descriptor {
  const s = e.spec;
  return memo(e, () => base({
    ...s, tool_id: s.id, display_title: s.display_title || s.id, output_schema: s.output_schema ?? undefined,
    source: { ...NO_SOURCE, ...s.source, resource_id: s.source.resource_id || e.id, resource_version: s.source.resource_version || String(e.version), scope: s.source.scope || e.scope.kind, workspace_id: s.source.workspace_id || (e.scope.id ?? '') },
  }));
}

const inScope = (e: RegistryEntry, workspaceId?: string) => e.scope.kind === 'global' || e.scope.id === workspaceId;

/**
 * Catalog merges the three tool sources for one workspace context: built-in native tools, `tool` records,
 * and the tools every in-scope `mcp_server` record lists. Ids must be unique: a record that takes a
 * built-in id or collides with another tool is marked conflicted (it cannot run) rather than silently lost.
 */
export class Catalog {
  private readonly native = new Map(NATIVE_TOOLS.map((t) => [t.name, { tool: t, descriptor: nativeDescriptor(t) }]));
  /** Built snapshots by everything they depend on; reused until a registry, an MCP server or the policy changes. */
  private readonly built = new Map<string, Snapshot>();

  /** `extensions` makes `extension_host` tools executable while their extension's daemon is healthy. */
  constructor(private readonly registries: RegistryCache, private readonly pool: McpPool, private readonly extensions?: ExtensionToolHost) {}

  async snapshot(workspaceId: string | undefined, policy: ToolPolicy): Promise<Snapshot> {
    const { entries: reg, stamp } = await this.registries.read(['tool', 'mcp_server']);
    await this.pool.retain(new Set(reg.mcp_server.map((e) => e.id)));
    const servers = reg.mcp_server.filter((e) => inScope(e, workspaceId)) as RegistryEntry<McpServerSpec>[];
    // NOTE: a workspace server shadows a global one of the same name, as workspace agents do.
    const serverByName = new Map<string, RegistryEntry<McpServerSpec>>();
    for (const s of servers) if (!serverByName.has(s.spec.name) || s.scope.kind === 'workspace') serverByName.set(s.spec.name, s);
    // NOTE: the pool's version is taken before its states are read: a server that connects while this build awaits
    // (the daemons' statuses) moves the version, and a snapshot of the older states cached under the newer version
    // would be served until some other change, its tools unlisted (404) all that time.
    const version = this.pool.version;
    const states = new Map(await Promise.all([...serverByName.values()].map(async (s) => [s.spec.name, await this.pool.state(s)] as const)));
    const daemons = this.extensions ? await this.extensions.statuses() : undefined;
    const key = JSON.stringify([workspaceId ?? '', stamp, version, policy.max_result_bytes, policy.toolsets, daemons?.revision ?? 0]);
    const hit = this.built.get(key);
    if (hit) return hit;

    const entries: CatalogEntry[] = [];
    for (const { tool, descriptor } of this.native.values()) {
      // NOTE: workspace tools run inside a workspace root, so without one in the context they cannot run.
      const runnable = !tool.needs.includes('workspace') || Boolean(workspaceId);
      entries.push({ descriptor, runtime: { executable: runnable, conflicted: false, reason_codes: runnable ? [] : ['dependency_missing'] }, backend: { kind: 'native', tool }, secrets: [] });
    }
    const declared = new Set<string>();
    for (const e of reg.tool.filter((r) => inScope(r, workspaceId))) {
      const d = recordDescriptor(e);
      const entry: CatalogEntry = { descriptor: d, runtime: { executable: false, conflicted: false, reason_codes: [] }, backend: { kind: 'none' }, secrets: [] };
      if (d.tool_id.startsWith(NATIVE_PREFIX) && d.source.kind !== 'builtin') {
        entry.runtime = { executable: false, conflicted: true, reason_codes: ['reserved_namespace'] };
      } else if (d.backend.kind === 'native_go') {
        const native = this.native.get(d.backend.native_name.replace(NATIVE_PREFIX, ''));
        if (native) entry.backend = { kind: 'native', tool: native.tool };
        entry.runtime = native ? { executable: true, conflicted: false, reason_codes: [] } : { executable: false, conflicted: false, reason_codes: ['handler_missing'] };
      } else if (d.backend.kind === 'mcp') {
        declared.add(`${d.backend.mcp_server}\u0000${d.backend.mcp_tool}`);
        const server = serverByName.get(d.backend.mcp_server);
        const state = server && states.get(d.backend.mcp_server)!;
        if (!server || !state) entry.runtime.reason_codes = ['dependency_missing'];
        else if (!state.ready) entry.runtime.reason_codes = state.reason_codes;
        else if (!state.tools.some((t) => t.name === d.backend.mcp_tool && !needsTask(t))) entry.runtime.reason_codes = ['backend_not_executable'];
        else {
          entry.runtime.executable = true;
          entry.backend = { kind: 'mcp', server, tool: d.backend.mcp_tool };
          entry.secrets = state.secrets;
        }
      } else if (d.backend.kind === 'extension_host' && daemons) {
        const state = ExtensionToolHost.stateOf(daemons.states.get(d.backend.extension_id));
        entry.runtime = { executable: state.ready, conflicted: false, reason_codes: state.reason_codes };
        if (state.ready) entry.backend = { kind: 'extension', extension: d.backend.extension_id, handler: d.backend.handler };
        entry.secrets = daemons.secrets.get(d.backend.extension_id) ?? [];
      } else {
        entry.runtime.reason_codes = ['extension_not_installed'];
      }
      entries.push(entry);
    }
    for (const server of serverByName.values()) {
      const state = states.get(server.spec.name)!;
      for (const t of state.tools) {
        if (declared.has(`${server.spec.name}\u0000${t.name}`)) continue;
        const runnable = state.ready && !needsTask(t);
        entries.push({
          descriptor: memo(t, () => mcpDescriptor(server, t)),
          runtime: { executable: runnable, conflicted: false, reason_codes: runnable ? [] : state.ready ? ['backend_not_executable'] : state.reason_codes },
          backend: runnable ? { kind: 'mcp', server, tool: t.name } : { kind: 'none' }, secrets: state.secrets,
        });
      }
    }
    const byId = new Map<string, CatalogEntry>();
    for (const entry of entries) {
      const other = byId.get(entry.descriptor.tool_id);
      if (!other) {
        byId.set(entry.descriptor.tool_id, entry);
        continue;
      }
      // NOTE: MCP ids are sanitized names, so two raw names can meet; anything else is a duplicate id.
      const code = entry.descriptor.source.kind === 'mcp' && other.descriptor.source.kind === 'mcp' ? 'conflicted_sanitized_name' : 'conflicted_id';
      for (const e of [entry, other]) e.runtime = { executable: false, conflicted: true, reason_codes: [...new Set([...e.runtime.reason_codes, code])] };
    }
    // NOTE: a conflicted id lists once (the first registered), carrying the conflict.
    const list = [...byId.values()].sort((a, b) => a.descriptor.tool_id.localeCompare(b.descriptor.tool_id));
    for (const e of list) if (!e.descriptor.max_result_bytes) e.descriptor = { ...e.descriptor, max_result_bytes: policy.max_result_bytes };
    const snapshot = { entries: list, byId, toolsets: toolsets(list, policy) };
    // NOTE: a small bound: one snapshot per recently used workspace context is enough.
    if (this.built.size >= 64) this.built.delete(this.built.keys().next().value!);
    this.built.set(key, snapshot);
    return snapshot;
  }
}

/** toolsets collects toolset membership from descriptors and configuration. */
function toolsets(entries: CatalogEntry[], policy: ToolPolicy): Map<string, ToolsetDef> {
  const sets = new Map<string, ToolsetDef>();
  const get = (id: string) => sets.get(id) ?? sets.set(id, { tools: [], toolsets: [] }).get(id)!;
  for (const e of entries) for (const ts of e.descriptor.toolsets) get(ts).tools.push(e.descriptor.tool_id);
  for (const [id, def] of Object.entries(policy.toolsets)) {
    const t = get(id);
    t.tools.push(...def.tools.filter((x) => !t.tools.includes(x)));
    t.toolsets.push(...def.toolsets.filter((x) => !t.toolsets.includes(x)));
  }
  return sets;
}

/** expandToolset resolves a toolset to tool ids through nested toolsets, reporting unknown ids and cycles. */
export function expandToolset(id: string, sets: Map<string, ToolsetDef>, known: (toolId: string) => boolean): { tools: string[]; reason_codes: string[] } {
  const tools = new Set<string>();
  const reasons = new Set<string>();
  const visit = (ts: string, path: string[]) => {
    const def = sets.get(ts);
    if (!def) return void reasons.add('toolset_unknown');
    for (const t of def.tools) if (known(t)) tools.add(t); else reasons.add('tool_unknown');
    for (const nested of def.toolsets) {
      if (path.includes(nested)) reasons.add('toolset_cycle');
      else visit(nested, [...path, nested]);
    }
  };
  visit(id, [id]);
  return { tools: [...tools].sort(), reason_codes: [...reasons] };
}
