import { ID_PATTERN } from '../../codecs/shared.ts';
import type { EgressPolicy } from '../security/egress.ts';
import { fetchJson, SourceError } from './http.ts';
import type { MarketKind, MarketRow, SkillVersion, SourceConfig } from './types.ts';

/** INDEX_BYTES bounds an index document (5,000 entries with readmes fit easily). */
const INDEX_BYTES = 32 * 1024 * 1024;
/** SKILL_SLUG is a marketplace skill's slug, `@author/name`, with a skill name (SKILL.md's grammar). */
export const SKILL_SLUG = /^@([A-Za-z0-9][A-Za-z0-9.-]{0,63})\/([a-z0-9][a-z0-9._-]{0,63})$/;
const SECTIONS: Record<Exclude<MarketKind, 'mcp'>, string> = { skill: 'skills', extension: 'extensions', bundle: 'bundles' };

const str = (v: unknown) => (typeof v === 'string' ? v.trim() : '');
const strs = (v: unknown) => (Array.isArray(v) ? v.map(str).filter(Boolean) : []);
const int = (v: unknown) => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : null);
const time = (v: unknown) => (typeof v === 'string' && !Number.isNaN(Date.parse(v)) ? new Date(v).toISOString() : null);

/** compareVersions orders dotted versions numerically where both parts are numbers (1.10 after 1.9), else as text. */
export function compareVersions(a: string, b: string): number {
  const pa = a.replace(/^v/, '').split(/[.+-]/);
  const pb = b.replace(/^v/, '').split(/[.+-]/);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i] ?? '';
    const y = pb[i] ?? '';
    if (x === y) continue;
    if (/^\d+$/.test(x) && /^\d+$/.test(y)) return Number(x) - Number(y);
    return x < y ? -1 : 1;
  }
  return 0;
}

/** IndexPull is one fetch of an index: 304 (nothing changed), or per kind its rows or why that kind failed. */
export type IndexPull =
  | { notModified: true }
  | { notModified: false; etag: string; kinds: Partial<Record<MarketKind, { ok: true; rows: MarketRow[]; skipped: string[] } | { ok: false; error: string }>> };

function base(kind: MarketKind, source: SourceConfig, e: Record<string, any>, identity: string, entryId: string): MarketRow {
  return {
    kind, entry_id: entryId, identity, source: source.id, priority: source.priority,
    name: str(e.display_name) || str(e.name), author: str(e.author), description: str(e.description), downloads: int(e.downloads),
    install_slug: identity, published_at: time(e.published_at), updated_at: time(e.updated_at) ?? time(e.published_at),
    tier: str(e.tier) || 'community', transport: '', version: str(e.version), tags: strs(e.tags),
    detail: { bundle: null, extension: null, mcp: null, skill: null },
  };
}

/** skillRow decodes one `skills[]` entry (README "Marketplace index"); a string is why it is skipped. */
function skillRow(e: Record<string, any>, source: SourceConfig): MarketRow | string {
  const slug = str(e.slug);
  const m = SKILL_SLUG.exec(slug);
  if (!m) return `slug "${slug}" must be @author/name`;
  const versions: SkillVersion[] = [];
  for (const v of Array.isArray(e.versions) ? e.versions : []) {
    const version = str(v?.version);
    const sha256 = str(v?.sha256).toLowerCase();
    let url = '';
    try { url = new URL(str(v?.url), source.url).toString(); } catch { /* below */ }
    if (!version || !/^[0-9a-f]{64}$/.test(sha256) || !/^https?:/.test(url)) return `${slug}: each version needs version, an http(s) url and a sha256 (64 hex)`;
    versions.push({ version, url, sha256, published_at: time(v?.published_at) ?? '' });
  }
  if (!versions.length) return `${slug}: versions is empty`;
  versions.sort((a, b) => compareVersions(b.version, a.version));
  const row = base('skill', source, { ...e, name: e.display_name || m[2], author: e.author || m[1], version: versions[0].version }, slug, `${m[1]}_${m[2]}`);
  row.version = versions[0].version;
  row.versions = versions;
  row.mcp_servers = strs(e.mcp_servers);
  row.detail.skill = {
    display_name: str(e.display_name) || m[2], install_slug: slug, license: str(e.license), readme: str(e.readme).slice(0, 64 * 1024),
    repository: str(e.repository), tags: row.tags, versions: versions.map((v) => v.version),
  };
  return row;
}

function extensionRow(e: Record<string, any>, source: SourceConfig): MarketRow | string {
  const name = str(e.name);
  if (!ID_PATTERN.test(name) || name.length > 64) return `extension name "${name}" is not valid`;
  let url = '';
  try { url = e.artifact_url ? new URL(str(e.artifact_url), source.url).toString() : ''; } catch { /* below */ }
  const digest = str(e.sha256 ?? e.digest_sha256).toLowerCase();
  if (digest && !/^[0-9a-f]{64}$/.test(digest)) return `${name}: sha256 must be 64 hex`;
  const row = base('extension', source, e, name, name);
  row.transport = str(e.type);
  row.detail.extension = { artifact_url: url, digest_sha256: digest, install_slug: name, repository: str(e.repository) };
  return row;
}

function bundleRow(e: Record<string, any>, source: SourceConfig): MarketRow | string {
  const name = str(e.name);
  const ext = str(e.extension_name);
  const entryId = `${ext}_${name}`;
  if (!name || !ext || !ID_PATTERN.test(entryId) || /_/.test(ext)) return `bundle "${ext}/${name}" needs a name and an extension_name (no "_")`;
  const n = (v: unknown) => int(v) ?? 0;
  const row = base('bundle', source, e, `${ext}/${name}`, entryId);
  row.detail.bundle = {
    extension_name: ext,
    profiles: (Array.isArray(e.profiles) ? e.profiles : []).map((p: Record<string, any>) => ({
      agents: n(p?.agents), bridges: n(p?.bridges), channels: n(p?.channels), description: str(p?.description), jobs: n(p?.jobs), name: str(p?.name), triggers: n(p?.triggers),
    })),
  };
  return row;
}

const ROWS = { skill: skillRow, extension: extensionRow, bundle: bundleRow };

/**
 * pullIndex fetches a static index (with `If-None-Match` when an ETag is known) and decodes each kind the source
 * serves on its own: a section that is not a list fails that kind only; an entry that does not decode is skipped
 * (and named), so one bad entry does not hide the rest.
 */
export async function pullIndex(source: SourceConfig, o: { etag?: string; timeoutMs: number; egress: EgressPolicy }): Promise<IndexPull> {
  const { status, headers, json } = await fetchJson(source.url, { timeoutMs: o.timeoutMs, maxBytes: INDEX_BYTES, headers: o.etag ? { 'if-none-match': o.etag } : {}, egress: o.egress });
  if (status === 304) return { notModified: true };
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new SourceError('invalid_response', 'the index is not a JSON object');
  const doc = json as Record<string, unknown>;
  const kinds: Extract<IndexPull, { notModified: false }>['kinds'] = {};
  for (const kind of source.kinds) {
    if (kind === 'mcp') continue;
    const section = doc[SECTIONS[kind]];
    if (section === undefined) { kinds[kind] = { ok: true, rows: [], skipped: [] }; continue; }
    if (!Array.isArray(section)) { kinds[kind] = { ok: false, error: `"${SECTIONS[kind]}" must be a list` }; continue; }
    const rows: MarketRow[] = [];
    const skipped: string[] = [];
    const ids = new Set<string>();
    for (const e of section) {
      const r = e && typeof e === 'object' && !Array.isArray(e) ? ROWS[kind](e as Record<string, any>, source) : 'an entry must be an object';
      if (typeof r === 'string') skipped.push(r);
      else if (ids.has(r.entry_id)) skipped.push(`${r.identity} is listed twice`);
      else { ids.add(r.entry_id); rows.push(r); }
    }
    kinds[kind] = { ok: true, rows, skipped };
  }
  return { notModified: false, etag: headers.get('etag') ?? '', kinds };
}
