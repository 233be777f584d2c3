import * as yup from 'yup';
import { at, check, isObject, Issues, sortedJson, str, strs, y } from './shared.ts';
import type { Codec } from './types.ts';

const SEGMENT = /^[a-z](?:[a-z0-9_]*[a-z0-9])?$/;

/** isToolId checks the ToolID / ToolsetID grammar: ≤ 64 chars, `__`-separated segments of [a-z0-9_]. */
export function isToolId(id: string): boolean {
  if (id.length === 0 || id.length > 64 || id.includes('___')) return false;
  return id.split('__').every((seg) => SEGMENT.test(seg));
}

const JSON_TYPES = ['string', 'number', 'integer', 'boolean', 'object', 'array', 'null'];

/** checkSchema is the light structural JSON-Schema check: type names, recursing through nested schemas. */
function checkSchema(s: unknown, path: string, issues: Issues): void {
  if (!isObject(s)) return issues.add(path, 'must be a JSON object');
  const types = Array.isArray(s.type) ? s.type : s.type === undefined ? [] : [s.type];
  for (const t of types) if (!JSON_TYPES.includes(t)) issues.add(at(path, 'type'), `unknown JSON Schema type "${t}"`);
  if (s.properties !== undefined) {
    if (!isObject(s.properties)) issues.add(at(path, 'properties'), 'must be an object');
    else for (const [k, v] of Object.entries(s.properties)) checkSchema(v, at(at(path, 'properties'), k), issues);
  }
  for (const key of ['allOf', 'anyOf', 'oneOf']) {
    if (s[key] === undefined) continue;
    if (!Array.isArray(s[key])) issues.add(at(path, key), 'must be an array');
    else s[key].forEach((v: unknown, i: number) => checkSchema(v, at(at(path, key), i), issues));
  }
  if (s.not !== undefined) checkSchema(s.not, at(path, 'not'), issues);
}

const shape = yup.object({
  id: y.string().required('is required'),
  backend: y.object().required('is required').shape({
    kind: y.oneOf(['native_go', 'extension_host', 'mcp', 'bridge']).required('is required'),
    extension_id: y.string(), handler: y.string(), mcp_server: y.string(), mcp_tool: y.string(), native_name: y.string(),
    requires_capabilities: y.stringList(),
  }),
  display_title: y.string(), description: y.string(),
  input_schema: y.object().required('is required'), output_schema: y.object().nullable(),
  source: y.object().required('is required').shape({
    kind: y.oneOf(['builtin', 'mcp', 'extension', 'dynamic']).required('is required'),
    owner: y.string(), raw_server_name: y.string(), raw_tool_name: y.string(), resource_id: y.string(), resource_version: y.string(),
    workspace_id: y.string(), scope: y.string(),
  }),
  visibility: y.oneOf(['internal', 'operator', 'session', 'model']).required('is required'),
  risk: y.oneOf(['read', 'mutating', 'open_world', 'destructive']).required('is required'),
  read_only: y.bool(), destructive: y.bool(), open_world: y.bool(), requires_interaction: y.bool(), concurrency_safe: y.bool(),
  max_result_bytes: yup.number().integer('must be an integer').min(0, 'must be >= 0'),
  toolsets: y.stringList(), tags: y.stringList(), search_hints: y.stringList(),
  input_schema_digest: y.string(), output_schema_digest: y.string(),
});

/** toolCodec validates a `tool` spec. */
export const toolCodec: Codec = {
  kind: 'tool',
  maxBytes: 256 * 1024,
  decode(input, ctx) {
    const issues = new Issues(ctx.unknownFields);
    if (!check(shape, input, issues)) return { ok: false, errors: issues.list };
    const s = input as Record<string, any>;
    const id = str(s.id);
    if (!isToolId(id)) issues.add('id', 'must be a tool id: ≤ 64 chars, `__`-separated segments of a-z0-9_ starting with a letter');
    const backend = {
      kind: str(s.backend.kind), extension_id: str(s.backend.extension_id), handler: str(s.backend.handler), mcp_server: str(s.backend.mcp_server),
      mcp_tool: str(s.backend.mcp_tool), native_name: str(s.backend.native_name), requires_capabilities: strs(s.backend.requires_capabilities),
    };
    if (backend.kind === 'bridge') issues.add('backend.kind', '"bridge" is reserved');
    if (backend.kind === 'native_go' && !backend.native_name) issues.add('backend.native_name', 'is required for native_go');
    if (backend.kind === 'extension_host') {
      if (!backend.extension_id) issues.add('backend.extension_id', 'is required for extension_host');
      if (!backend.handler) issues.add('backend.handler', 'is required for extension_host');
    }
    if (backend.kind === 'mcp') {
      if (!backend.mcp_server) issues.add('backend.mcp_server', 'is required for mcp');
      if (!backend.mcp_tool) issues.add('backend.mcp_tool', 'is required for mcp');
    }
    const source = Object.fromEntries(['kind', 'owner', 'raw_server_name', 'raw_tool_name', 'resource_id', 'resource_version', 'workspace_id', 'scope'].map((k) => [k, str(s.source[k])]));
    if (!source.owner) issues.add('source.owner', 'is required');
    if (source.kind === 'mcp') {
      if (!source.raw_server_name) issues.add('source.raw_server_name', 'is required for an mcp source');
      if (!source.raw_tool_name) issues.add('source.raw_tool_name', 'is required for an mcp source');
    }
    if (s.read_only && (s.destructive || s.open_world)) issues.add('read_only', 'a read_only tool cannot be destructive or open_world');
    checkSchema(s.input_schema, 'input_schema', issues);
    if (s.output_schema !== undefined && s.output_schema !== null) checkSchema(s.output_schema, 'output_schema', issues);
    const toolsets = strs(s.toolsets);
    toolsets.forEach((t, i) => { if (!isToolId(t)) issues.add(`toolsets[${i}]`, 'must be a toolset id'); });
    if (!issues.ok) return { ok: false, errors: issues.list };
    return {
      ok: true,
      spec: {
        id, backend, display_title: str(s.display_title), description: str(s.description),
        input_schema: sortedJson(s.input_schema), ...(isObject(s.output_schema) ? { output_schema: sortedJson(s.output_schema) } : {}),
        input_schema_digest: '', output_schema_digest: '', source, visibility: s.visibility, risk: s.risk,
        read_only: Boolean(s.read_only), destructive: Boolean(s.destructive), open_world: Boolean(s.open_world),
        requires_interaction: Boolean(s.requires_interaction), concurrency_safe: Boolean(s.concurrency_safe),
        max_result_bytes: s.max_result_bytes ?? 0, toolsets, tags: strs(s.tags), search_hints: strs(s.search_hints),
      },
    };
  },
};
