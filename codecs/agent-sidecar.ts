import * as yup from 'yup';
import { parse as parseYaml } from 'yaml';
import { at, check, isObject, Issues, str, y } from './shared.ts';
import { DEFAULT_HEARTBEAT_CONFIG, parseHeartbeat } from './heartbeat.ts';
import type { Codec } from './types.ts';

/** SoulSpec is the canonical spec of `agent.soul` and `agent.heartbeat` records. */
export interface SoulSpec {
  agent_name: string;
  agent_resource_id: string;
  source_path: string;
  body: string;
}

/** Default limits of the document bodies (the defaults a sidecar is checked against). */
const MAX_BODY_BYTES = 64 * 1024;

/** frontmatter splits a markdown document into its YAML frontmatter (parsed with `yaml`) and body. */
export function frontmatter(doc: string): { data: unknown; body: string; error?: string } {
  if (!doc.startsWith('---')) return { data: {}, body: doc };
  const end = doc.indexOf('\n---', 3);
  if (end < 0) return { data: {}, body: doc, error: 'frontmatter is not closed with ---' };
  try {
    return { data: parseYaml(doc.slice(3, end)) ?? {}, body: doc.slice(end + 4).replace(/^\r?\n/, '') };
  } catch (err) {
    return { data: {}, body: '', error: `frontmatter is not valid YAML: ${(err as Error).message.split('\n')[0]}` };
  }
}

/** checkDocument applies the "body must parse as a valid SOUL.md / HEARTBEAT.md under the default config" rule. */
function checkDocument(kind: 'soul' | 'heartbeat', body: string, issues: Issues): void {
  if (Buffer.byteLength(body) > MAX_BODY_BYTES) return issues.add('body', `must be at most ${MAX_BODY_BYTES} bytes`);
  if (kind === 'heartbeat') {
    for (const d of parseHeartbeat(body, DEFAULT_HEARTBEAT_CONFIG, '', 'agent.heartbeat').diagnostics) {
      if (d.severity === 'error') issues.add(d.section === 'frontmatter' && d.field ? `body.frontmatter.${d.field}` : 'body', `line ${d.line}, column ${d.column}: ${d.message}`);
    }
    return;
  }
  const fm = frontmatter(body);
  if (fm.error) return issues.add('body', fm.error);
  if (!isObject(fm.data)) return issues.add('body', 'frontmatter must be a YAML mapping');
  if (!fm.body.trim()) issues.add('body', 'must have markdown content after the frontmatter');
}

const shape = yup.object({
  agent_name: y.string().required('is required'), agent_resource_id: y.string().required('is required'),
  source_path: y.string().required('is required'), body: y.string().required('is required'),
});

function sidecarCodec(kind: 'agent.soul' | 'agent.heartbeat'): Codec<SoulSpec> {
  return {
    kind,
    maxBytes: 256 * 1024,
    decode(input, ctx) {
      const issues = new Issues(ctx.unknownFields);
      if (!check(shape, input, issues)) return { ok: false, errors: issues.list };
      const s = input as Record<string, string>;
      const spec = { agent_name: str(s.agent_name), agent_resource_id: str(s.agent_resource_id), source_path: str(s.source_path), body: s.body };
      for (const f of ['agent_name', 'agent_resource_id', 'source_path'] as const) if (!spec[f]) issues.add(at('', f), 'is required');
      if (!spec.body.trim()) issues.add('body', 'must not be blank');
      else checkDocument(kind === 'agent.soul' ? 'soul' : 'heartbeat', spec.body, issues);
      return issues.ok ? { ok: true, spec } : { ok: false, errors: issues.list };
    },
  };
}

/** agentSoulCodec validates `agent.soul`. */
export const agentSoulCodec = sidecarCodec('agent.soul');
/** agentHeartbeatCodec validates `agent.heartbeat`. */
export const agentHeartbeatCodec = sidecarCodec('agent.heartbeat');
