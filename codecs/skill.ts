import * as yup from 'yup';
import { decodeHook } from './hook-binding.ts';
import { decodeMcpServer } from './mcp-server.ts';
import { at, check, isObject, Issues, str, y } from './shared.ts';
import type { Codec } from './types.ts';

const shape = yup.object({
  name: y.string().required('is required'), description: y.string().required('is required'),
  source: y.oneOf(['bundled', 'marketplace', 'user', 'additional', 'workspace', 'agent-local']).required('is required'),
  version: y.string(), dir: y.string(), file_path: y.string(), installed_from: y.string(), installed_from_bundle: y.string(), installed_from_extension: y.string(),
  metadata: y.object(), enabled: y.bool(), mcp_servers: yup.array(), hooks: yup.array(),
  provenance: y.object().shape({ hash: y.string(), registry: y.string(), slug: y.string(), version: y.string(), installed_at: y.string() }).default(undefined),
});
const OPTIONAL = ['version', 'dir', 'file_path', 'installed_from', 'installed_from_bundle', 'installed_from_extension'] as const;

/** skillCodec validates a `skill` spec; MCP servers are stdio only, secrets in `mcp`. */
export const skillCodec: Codec = {
  kind: 'skill',
  maxBytes: 256 * 1024,
  decode(input, ctx) {
    const issues = new Issues(ctx.unknownFields);
    if (!check(shape, input, issues)) return { ok: false, errors: issues.list };
    const s = input as Record<string, any>;
    const name = str(s.name);
    const description = str(s.description);
    if (!name) issues.add('name', 'is required');
    if (!description) issues.add('description', 'is required');
    const mcpServers = (s.mcp_servers ?? []).map((m: unknown, i: number) => decodeMcpServer(m, `mcp_servers[${i}]`, issues, true));
    (s.hooks ?? []).forEach((h: unknown, i: number) => decodeHook(h, `hooks[${i}]`, issues));
    let provenance: Record<string, string> | undefined;
    if (isObject(s.provenance)) {
      provenance = Object.fromEntries(['hash', 'registry', 'slug', 'version', 'installed_at'].map((f) => [f, str(s.provenance[f])]));
      for (const f of ['hash', 'registry', 'slug', 'version']) if (!provenance[f]) issues.add(at('provenance', f), 'is required when provenance is given');
    }
    if (!issues.ok) return { ok: false, errors: issues.list };
    return {
      ok: true,
      spec: {
        name, description, source: s.source, ...Object.fromEntries(OPTIONAL.map((f) => [f, str(s[f])])),
        metadata: isObject(s.metadata) ? s.metadata : {}, enabled: s.enabled ?? false, mcp_servers: mcpServers, hooks: s.hooks ?? [],
        ...(provenance ? { provenance } : {}),
      },
    };
  },
};
