import path from 'node:path';
import { decodeSpec } from '../../codecs/index.ts';
import { childId } from '../../controllers/bundle-activation.ts';
import type { Ref } from '../../store/types.ts';
import { sanitize } from '../tools/catalog.ts';
import type { ExtensionRecord } from './types.ts';

/** ExtensionChild is one record an extension projects. */
export interface ExtensionChild {
  kind: string;
  id: string;
  spec: unknown;
}

/** ownerOf is the owner (and source) of every record an extension projects. */
export const ownerOf = (name: string): Ref => ({ kind: 'extension', id: name });

/** extensionToolId is the tool id of a daemon's tool: `ext__<extension>__<tool>` (one id segment each). */
export const extensionToolId = (extension: string, tool: string) => `ext__${sanitize(extension)}__${tool}`;

/**
 * planChildren is the pure part of an extension's projection: the records its manifest ships, each decoded by its
 * kind's codec at global scope. Ids are stable (bundle ids as the bundle syncer's, `bun_` + 16 hex of (extension,
 * bundle name); the others `ex<k>_` + 16 hex of (extension, name)), so an update changes records in place. Skills
 * point at the extension's unpacked tree in `dir` (each process unpacks it: ExtensionCache).
 */
export function planChildren(r: ExtensionRecord, root: string): { ok: true; children: ExtensionChild[] } | { ok: false; message: string } {
  const m = r.manifest;
  const raw: ExtensionChild[] = [];
  for (const b of m.resources.bundles) raw.push({ kind: 'bundle', id: childId('bun_', m.name, String(b.name)), spec: { extension_name: m.name, bundle: b } });
  for (const a of m.resources.agents) raw.push({ kind: 'agent', id: childId('exa_', m.name, String(a.name)), spec: a });
  for (const h of m.resources.hooks) raw.push({ kind: 'hook.binding', id: childId('exh_', m.name, String(h.name)), spec: h });
  for (const s of m.resources.mcp_servers) raw.push({ kind: 'mcp_server', id: childId('exm_', m.name, String(s.name)), spec: s });
  for (const rel of m.resources.skills) {
    const sk = r.skills[rel];
    if (!sk) return { ok: false, message: `skill ${rel} was not read at install` };
    raw.push({
      kind: 'skill', id: childId('exs_', m.name, sk.name), spec: {
        name: sk.name, description: sk.description, source: 'additional', dir: path.join(root, rel), installed_from_extension: m.name, version: m.version, enabled: true,
      },
    });
  }
  for (const t of m.daemon?.tools ?? []) {
    const id = extensionToolId(m.name, t.name);
    raw.push({
      kind: 'tool', id, spec: {
        id, display_title: `${m.name}: ${t.name}`, description: t.description, input_schema: t.input_schema,
        backend: { kind: 'extension_host', extension_id: m.name, handler: t.name },
        source: { kind: 'extension', owner: m.name },
        visibility: 'session', risk: t.read_only ? 'read' : 'mutating', read_only: t.read_only, concurrency_safe: t.read_only,
        tags: ['extension', sanitize(m.name)],
      },
    });
  }
  const children: ExtensionChild[] = [];
  for (const c of raw) {
    const d = decodeSpec(c.kind, c.spec, { scope: { kind: 'global' } });
    if (!d.ok) return { ok: false, message: `${c.kind} "${c.id}": ${d.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}` };
    children.push({ ...c, spec: d.spec });
  }
  return { ok: true, children };
}
