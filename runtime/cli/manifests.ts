import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { codecs, decodeSpec } from '../../codecs/index.ts';
import { ID_PATTERN } from '../../codecs/shared.ts';
import type { ResourceScope } from '../../codecs/types.ts';
import { canonicalJson } from '../../store/canonical.ts';
import { unknownKeys } from '../validation/field-validation.ts';
import { UsageError } from './errors.ts';

/** Manifest is one record to apply: `{kind, id, scope, spec}`, its spec canonicalized by the kind's codec. */
export interface Manifest {
  kind: string;
  id: string;
  scope: ResourceScope;
  /** The spec as written in the file (what is sent). */
  spec: unknown;
  /** The codec's canonical form (what the server will store): diffs and digests use it. */
  canonical: unknown;
  /** Where it came from, for messages: `file#document`. */
  origin: string;
  /** Fields the manifest has that its kind does not define (`spec.enabeld`): `--validate` decides what they do. */
  unknown: string[];
}

const EXTENSIONS = /\.(ya?ml|json)$/i;

/** listFiles returns the manifest files of a path: the file itself, or a directory's (recursively with -R). */
export function listFiles(p: string, recursive: boolean): string[] {
  let st;
  try {
    st = statSync(p);
  } catch {
    throw new UsageError(`${p}: no such file or directory`);
  }
  if (!st.isDirectory()) return [p];
  const out: string[] = [];
  for (const e of readdirSync(p, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const full = path.join(p, e.name);
    if (e.isDirectory()) { if (recursive) out.push(...listFiles(full, true)); } else if (EXTENSIONS.test(e.name)) out.push(full);
  }
  return out;
}

/** digestOf is the last-applied digest: SHA-256 (first 32 hex) of a record's canonical scope and spec. */
export function digestOf(scope: ResourceScope, canonical: unknown): string {
  const s = scope.kind === 'workspace' ? { kind: 'workspace', id: scope.id } : { kind: 'global' };
  return createHash('sha256').update(canonicalJson({ scope: s, spec: canonical })).digest('hex').slice(0, 32);
}

function scopeOf(raw: unknown, where: string): ResourceScope {
  if (raw === undefined) return { kind: 'global' };
  const s = raw as { kind?: unknown; id?: unknown };
  if (s && s.kind === 'global' && !s.id) return { kind: 'global' };
  if (s && s.kind === 'workspace' && typeof s.id === 'string' && s.id) return { kind: 'workspace', id: s.id };
  throw new UsageError(`${where}: scope must be {kind: global} or {kind: workspace, id}`);
}

/** MANIFEST_FIELDS are the fields of a manifest document; any other is an unknown field. */
const MANIFEST_FIELDS = ['kind', 'id', 'scope', 'spec'];

/** parseDocument checks one document (or each of a list / `{items}`) and canonicalizes its spec. */
function parseDocument(doc: unknown, where: string): Manifest[] {
  if (doc === null || doc === undefined) return [];
  if (Array.isArray(doc)) return doc.flatMap((d, i) => parseDocument(d, `${where}[${i}]`));
  const m = doc as Record<string, unknown>;
  if (typeof m !== 'object') throw new UsageError(`${where}: a manifest is an object {kind, id, scope, spec}`);
  if (Array.isArray(m.items) && m.kind === undefined) return parseDocument(m.items, `${where}.items`);
  const { kind, id } = m;
  if (typeof kind !== 'string' || !codecs.has(kind)) throw new UsageError(`${where}: unknown kind ${JSON.stringify(kind)}; known kinds: ${[...codecs.keys()].sort().join(', ')}`);
  if (typeof id !== 'string' || !ID_PATTERN.test(id)) throw new UsageError(`${where}: id must match ${ID_PATTERN.source}`);
  if (m.spec === undefined) throw new UsageError(`${where}: ${kind}/${id} has no spec`);
  const scope = scopeOf(m.scope, where);
  const unknownSpec: string[] = [];
  const decoded = decodeSpec(kind, m.spec, { scope, unknownFields: unknownSpec });
  if (!decoded.ok) throw new UsageError(`${where}: ${kind}/${id}: invalid spec: ${decoded.errors.map((e) => `spec.${e.path}: ${e.message}`).join('; ')}`);
  const unknown = [...unknownKeys(m, MANIFEST_FIELDS), ...unknownSpec.map((p) => `spec.${p}`)];
  return [{ kind, id, scope, spec: m.spec, canonical: decoded.spec, origin: where, unknown }];
}

/** readManifests reads every manifest of the given paths; a record named twice is a usage error. */
export function readManifests(paths: string[], recursive: boolean): Manifest[] {
  const out: Manifest[] = [];
  for (const p of paths) {
    for (const file of listFiles(p, recursive)) {
      const text = readFileSync(file, 'utf8');
      const docs = YAML.parseAllDocuments(text);
      docs.forEach((d, i) => {
        if (d.errors.length) throw new UsageError(`${file}#${i + 1}: ${d.errors[0].message}`);
        out.push(...parseDocument(d.toJS(), `${file}#${i + 1}`));
      });
    }
  }
  const seen = new Map<string, string>();
  for (const m of out) {
    const key = `${m.kind}/${m.id}`;
    if (seen.has(key)) throw new UsageError(`${key} is named twice: ${seen.get(key)} and ${m.origin}`);
    seen.set(key, m.origin);
  }
  return out;
}
