import * as yup from 'yup';
import { decodeHook } from './hook-binding.ts';
import { decodeMcpServer } from './mcp-server.ts';
import { at, check, checkEnv, checkSecretRefs, isObject, Issues, str, strMap, strs, y } from './shared.ts';
import { isToolId } from './tool.ts';
import type { Codec } from './types.ts';

/** AgentSpec is the canonical spec of an `agent` record (an agent definition). */
export interface AgentSpec {
  name: string;
  prompt: string;
  provider: string;
  command: string;
  model: string;
  tools: string[];
  deny_tools: string[];
  toolsets: string[];
  permissions: string;
  skills: { disabled: string[] };
  category_path: string[];
  mcp_servers: Record<string, unknown>[];
  hooks: unknown[];
  capabilities: { capabilities: Record<string, unknown>[] };
  /** Plain variables the agent process starts with (omitted when empty). */
  env?: Record<string, string>;
  /** Variables the agent process gets from secret refs (`env:NAME`, `vault:providers/<path>`), resolved at start. */
  secret_env?: Record<string, string>;
  /**
   * The ACP auth method (an `id` the agent advertises in `initialize`'s `authMethods`) the runtime authenticates
   * with before opening a session (omitted when empty).
   */
  auth_method?: string;
  /**
   * The ACP client capabilities the runtime offers this agent: `fs` false declines the client file methods
   * (`fs/read_text_file`, `fs/write_text_file`), or `{read, write}` each (omitted when both are offered).
   */
  client_capabilities?: { fs: boolean | { read: boolean; write: boolean } };
}

/** isToolPattern: an exact tool id with `__`, or `prefix*` where the prefix ends in `_` and extends to such an id. */
export function isToolPattern(p: string): boolean {
  if (!p.endsWith('*')) return isToolId(p) && p.includes('__');
  const prefix = p.slice(0, -1);
  if (prefix.includes('*') || !prefix.endsWith('_')) return false;
  const probe = `${prefix}a`;
  return isToolId(probe) && probe.includes('__');
}

// NOTE: name and prompt are checked by hand below, so one bad field does not hide the other.
const shape = yup.object({
  name: y.string(), prompt: y.string(),
  provider: y.string(), command: y.string(), model: y.string(),
  tools: y.stringList(), deny_tools: y.stringList(), toolsets: y.stringList(),
  permissions: y.oneOf(['deny-all', 'approve-reads', 'approve-all', '']),
  skills: y.object().shape({ disabled: y.stringList() }).default(undefined),
  category_path: y.stringList(), mcp_servers: yup.array(), hooks: yup.array(),
  capabilities: y.object().shape({ capabilities: yup.array() }).default(undefined),
  env: y.stringMap(), secret_env: y.stringMap(), auth_method: y.string(), client_capabilities: yup.mixed(),
});

/** decodeClientCaps checks `client_capabilities`: `{fs: boolean}` or `{fs: {read?: boolean, write?: boolean}}`. */
function decodeClientCaps(v: unknown, p: string, issues: Issues): AgentSpec['client_capabilities'] {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) { issues.add(p, 'must be an object such as {"fs": false}'); return undefined; }
  for (const k of Object.keys(v)) if (k !== 'fs') issues.add(at(p, k), 'is not a known field (known: fs)');
  const fs = v.fs;
  if (fs === undefined) return undefined;
  if (typeof fs === 'boolean') return fs ? undefined : { fs: false };
  if (!isObject(fs)) { issues.add(at(p, 'fs'), 'must be a boolean or {"read": boolean, "write": boolean}'); return undefined; }
  for (const k of Object.keys(fs)) if (k !== 'read' && k !== 'write') issues.add(at(p, `fs.${k}`), 'is not a known field (known: read, write)');
  for (const k of ['read', 'write']) if (fs[k] !== undefined && typeof fs[k] !== 'boolean') issues.add(at(p, `fs.${k}`), 'must be a boolean');
  const read = fs.read !== false;
  const write = fs.write !== false;
  return read && write ? undefined : { fs: { read, write } };
}

/** decodeAgent validates and canonicalizes an agent definition at `base`. */
export function decodeAgent(v: unknown, base: string, issues: Issues): AgentSpec | undefined {
  if (!isObject(v)) { issues.add(base || 'spec', 'must be a JSON object'); return undefined; }
  if (!check(shape, v, issues, base)) return undefined;
  const s = v as Record<string, any>;
  const name = str(s.name);
  if (!name) issues.add(at(base, 'name'), 'is required');
  else if (name === '.' || name === '..' || /[/\\]/.test(name)) issues.add(at(base, 'name'), 'must not be "." or ".." or contain / or \\');
  const prompt = str(s.prompt);
  if (!prompt) issues.add(at(base, 'prompt'), 'must not be empty');
  const tools = strs(s.tools, true);
  const denyTools = strs(s.deny_tools, true);
  tools.forEach((t, i) => { if (!isToolPattern(t)) issues.add(at(base, `tools[${i}]`), 'must be a tool id with __ or a prefix wildcard such as svc__fs_*'); });
  denyTools.forEach((t, i) => { if (!isToolPattern(t)) issues.add(at(base, `deny_tools[${i}]`), 'must be a tool id with __ or a prefix wildcard such as svc__fs_*'); });
  const toolsets = strs(s.toolsets, true);
  toolsets.forEach((t, i) => { if (!isToolId(t) || !t.includes('__')) issues.add(at(base, `toolsets[${i}]`), 'must be a toolset id containing __'); });
  const categoryPath = Array.isArray(s.category_path) ? s.category_path.map(str) : [];
  categoryPath.forEach((seg: string, i: number) => { if (!seg || seg === '.' || seg === '..' || /[/\\]/.test(seg)) issues.add(at(base, `category_path[${i}]`), 'must be a non-blank segment without / or \\'); });
  const mcpServers = (s.mcp_servers ?? []).map((m: unknown, i: number) => decodeMcpServer(m, at(base, `mcp_servers[${i}]`), issues));
  (s.hooks ?? []).forEach((h: unknown, i: number) => decodeHook(h, at(base, `hooks[${i}]`), issues));
  const caps: Record<string, unknown>[] = [];
  const seen = new Set<string>();
  (s.capabilities?.capabilities ?? []).forEach((c: unknown, i: number) => {
    const p = at(base, `capabilities.capabilities[${i}]`);
    if (!isObject(c)) return issues.add(p, 'must be an object');
    for (const f of ['id', 'summary', 'outcome']) if (!str(c[f])) issues.add(at(p, f), 'is required');
    const id = str(c.id);
    if (id && seen.has(id)) issues.add(at(p, 'id'), `duplicate capability id "${id}"`);
    seen.add(id);
    caps.push({ ...c, id, summary: str(c.summary), outcome: str(c.outcome) });
  });
  const env = strMap(s.env);
  const secretEnv = strMap(s.secret_env);
  checkEnv(env, at(base, 'env'), issues);
  // NOTE: an agent's secrets are its model provider's credentials: the vault's `providers` namespace.
  checkSecretRefs(secretEnv, 'providers', at(base, 'secret_env'), issues);
  const authMethod = str(s.auth_method);
  const clientCaps = decodeClientCaps(s.client_capabilities, at(base, 'client_capabilities'), issues);
  if (!issues.ok) return undefined;
  return {
    name, prompt, provider: str(s.provider), command: str(s.command), model: str(s.model), tools, deny_tools: denyTools, toolsets,
    permissions: str(s.permissions), skills: { disabled: strs(s.skills?.disabled, true) }, category_path: categoryPath,
    mcp_servers: mcpServers, hooks: s.hooks ?? [], capabilities: { capabilities: caps },
    ...(env ? { env } : {}), ...(secretEnv ? { secret_env: secretEnv } : {}), ...(authMethod ? { auth_method: authMethod } : {}),
    ...(clientCaps ? { client_capabilities: clientCaps } : {}),
  };
}

/** agentCodec validates an `agent` spec. */
export const agentCodec: Codec<AgentSpec> = {
  kind: 'agent',
  maxBytes: 256 * 1024,
  decode(input, ctx) {
    const issues = new Issues(ctx.unknownFields);
    const spec = decodeAgent(input, '', issues);
    return spec && issues.ok ? { ok: true, spec } : { ok: false, errors: issues.list };
  },
};
