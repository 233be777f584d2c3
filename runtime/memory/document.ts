import { parseDocument, stringify } from 'yaml';
import type { MemoryFrontmatter, StoredMemory } from './types.ts';

/** frontmatterOf is a memory's YAML header (`MemoryFrontmatter`). */
export function frontmatterOf(m: Omit<StoredMemory, 'document' | 'content_hash'>): MemoryFrontmatter {
  return {
    name: m.name, description: m.description, type: m.type, scope: m.scope, agent_name: m.agent_name, agent_tier: m.agent_tier,
    filename: m.filename, mod_time: m.updated_at, provenance: m.provenance,
  };
}

/**
 * renderDocument is a memory as a markdown file: YAML frontmatter (the `yaml` package, as skills' SKILL.md) and
 * the body. Fields that are empty are left out, so the file reads as a person would write it; the extra keys
 * `entity`, `attribute` and `injection` carry what the controller and session injection read.
 */
export function renderDocument(m: Omit<StoredMemory, 'document' | 'content_hash'>): string {
  const fm: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(frontmatterOf(m))) {
    if (v === '' || v === undefined) continue;
    fm[k] = k === 'provenance' ? Object.fromEntries(Object.entries(v as object).filter(([, x]) => x !== '' && !(Array.isArray(x) && !x.length))) : v;
  }
  if (m.entity) fm.entity = m.entity;
  if (m.attribute) fm.attribute = m.attribute;
  if (m.injection) fm.injection = true;
  return `---\n${stringify(fm, { lineWidth: 0 })}---\n\n${m.content.trim()}\n`;
}

/** parseDocument splits a memory document into its frontmatter and body (the export view reads files back). */
export function parseMemoryDocument(text: string): { frontmatter: Record<string, unknown>; body: string } {
  const m = /^---\n([^]*?)\n?---\n\n?([^]*)$/.exec(text);
  if (!m) return { frontmatter: {}, body: text };
  return { frontmatter: (parseDocument(m[1]).toJS() ?? {}) as Record<string, unknown>, body: m[2].trimEnd() };
}
