import { ID_PATTERN } from '../../codecs/shared.ts';
import type { EgressPolicy } from '../security/egress.ts';
import { fetchJson, SourceError } from './http.ts';
import type { McpEnv, McpPackage, MarketRow, SourceConfig } from './types.ts';

/** PAGE_LIMIT is the registry's largest page (`limit` ≤ 100). */
export const PAGE_LIMIT = 100;
/** MAX_PAGES stops a registry whose cursors never end (100,000 entries). */
const MAX_PAGES = 1000;
/** A page is a small JSON document; 8 MiB leaves room for long descriptions. */
const PAGE_BYTES = 8 * 1024 * 1024;
const OFFICIAL = 'io.modelcontextprotocol.registry/official';
/** The registry's server name grammar (server.schema.json: reverse-DNS namespace, "/", name). */
const SERVER_NAME = /^[a-zA-Z0-9.-]+\/[a-zA-Z0-9._-]+$/;

/** RegistryItem is one `servers[]` item: a server.json and the registry's metadata. */
interface RegistryItem { server?: Record<string, any>; _meta?: Record<string, any> }

/** RegistryPull is what one sync read: active rows to upsert, and the entry ids to drop (no longer active). */
export interface RegistryPull { rows: MarketRow[]; gone: string[]; pages: number }

const str = (v: unknown) => (typeof v === 'string' ? v.trim() : '');
const arr = (v: unknown): any[] => (Array.isArray(v) ? v : []);

/**
 * mcpEntryId is the URL-safe, record-id-safe entry id of a server name: the one "/" becomes "_" (the namespace
 * holds no "_", so the mapping is one to one). Undefined when the name is not the registry's grammar.
 */
export function mcpEntryId(name: string): string | undefined {
  if (!SERVER_NAME.test(name) || name.length > 200) return undefined;
  const id = name.replace('/', '_');
  return ID_PATTERN.test(id) ? id : undefined;
}

/** argsOf turns a package's `packageArguments` (or `runtimeArguments`) into argv words; a hint with no value is left out. */
function argsOf(list: unknown): string[] {
  const out: string[] = [];
  for (const a of arr(list)) {
    const value = str(a?.value) || str(a?.default);
    if (a?.type === 'named') {
      const name = str(a?.name);
      if (!name) continue;
      out.push(name);
      if (value) out.push(value);
    } else if (value) {
      out.push(value);
    }
  }
  return out;
}

function envOf(list: unknown): McpEnv[] {
  return arr(list).filter((e) => str(e?.name)).map((e) => ({
    name: str(e.name), default: str(e.default), prompt: str(e.description), required: e.isRequired === true, secret: e.isSecret === true,
  }));
}

/**
 * packageOf maps one server.json package to the command that runs it: npm → `npx -y <identifier>@<version>`,
 * pypi → `uvx <identifier>==<version>`, oci → `docker run -i --rm -e VAR… <image>` (the container sees only the
 * variables named). Other registry types (nuget, mcpb) are not runnable here and are left out.
 */
export function packageOf(p: Record<string, any>): McpPackage | undefined {
  const id = str(p.identifier);
  const version = str(p.version);
  const env = envOf(p.environmentVariables);
  const transport = str(p.transport?.type) || 'stdio';
  if (!id || transport !== 'stdio') return undefined;
  const runtime = argsOf(p.runtimeArguments);
  const pkgArgs = argsOf(p.packageArguments);
  const base = { transport: 'stdio', url: '', env, headers: [] };
  switch (str(p.registryType)) {
    case 'npm':
      return { ...base, type: 'npm', command: 'npx', args: ['-y', ...runtime, version ? `${id}@${version}` : id, ...pkgArgs] };
    case 'pypi':
      return { ...base, type: 'pypi', command: 'uvx', args: [...runtime, version ? `${id}==${version}` : id, ...pkgArgs] };
    case 'oci': {
      const image = version && !/[:@][^/]*$/.test(id) ? `${id}:${version}` : id;
      return { ...base, type: 'oci', command: 'docker', args: ['run', '-i', '--rm', ...env.flatMap((e) => ['-e', e.name]), ...runtime, image, ...pkgArgs] };
    }
    default:
      return undefined;
  }
}

function remoteOf(r: Record<string, any>): McpPackage | undefined {
  const url = str(r.url);
  const type = str(r.type);
  if (!url || (type !== 'streamable-http' && type !== 'sse')) return undefined;
  return {
    type: 'remote', command: '', args: [], transport: type === 'sse' ? 'sse' : 'http', url, env: [],
    headers: arr(r.headers).filter((h) => str(h?.name)).map((h) => ({ name: str(h.name), required: h.isRequired === true, secret: h.isSecret === true })),
  };
}

/** rowOf maps one registry item to a marketplace row, or says it is hidden (not active) or unusable. */
export function rowOf(item: RegistryItem, source: SourceConfig): { row: MarketRow } | { gone: string } | undefined {
  const s = item.server;
  if (!s || typeof s !== 'object') return undefined;
  const name = str(s.name);
  const entryId = mcpEntryId(name);
  if (!entryId) return undefined;
  const meta = item._meta?.[OFFICIAL] ?? {};
  // NOTE: a registry without the official metadata block publishes only active entries.
  const status = str(meta.status) || 'active';
  if (status !== 'active') return { gone: entryId };
  const packages = [...arr(s.packages).map(packageOf), ...arr(s.remotes).map(remoteOf)].filter((p): p is McpPackage => Boolean(p));
  const first = packages[0];
  const author = name.split('/')[0];
  const row: MarketRow = {
    kind: 'mcp', entry_id: entryId, identity: name, source: source.id, priority: source.priority,
    name: str(s.title) || name, author, description: str(s.description), downloads: null, install_slug: name,
    published_at: str(meta.publishedAt) || null, updated_at: str(meta.updatedAt) || str(meta.publishedAt) || null,
    tier: 'registry', transport: first?.transport ?? '', version: str(s.version), tags: [],
    packages,
    detail: {
      bundle: null, extension: null, skill: null,
      mcp: {
        args: first?.args ?? [], command: first?.command ?? '', default_scope: 'global', env: first?.env ?? [],
        oauth: null, transport: first?.transport ?? '', url: first?.url ?? '',
      },
    },
  };
  return { row };
}

/**
 * pullRegistry reads a registry's `GET /v0.1/servers` (`version=latest`, pages of 100, following
 * `metadata.nextCursor`); with `updatedSince` only what changed since (the registry then includes deleted and
 * deprecated entries, which come back as `gone`).
 */
export async function pullRegistry(source: SourceConfig, o: { updatedSince?: string; timeoutMs: number; egress: EgressPolicy }): Promise<RegistryPull> {
  const rows: MarketRow[] = [];
  const gone: string[] = [];
  const seen = new Set<string>();
  let cursor = '';
  let pages = 0;
  for (;;) {
    const q = new URLSearchParams({ limit: String(PAGE_LIMIT), version: 'latest' });
    if (cursor) q.set('cursor', cursor);
    if (o.updatedSince) q.set('updated_since', o.updatedSince);
    const { json } = await fetchJson(`${source.url}/v0.1/servers?${q}`, { timeoutMs: o.timeoutMs, maxBytes: PAGE_BYTES, egress: o.egress });
    const doc = json as { servers?: unknown; metadata?: { nextCursor?: unknown; next_cursor?: unknown } } | undefined;
    if (!doc || typeof doc !== 'object' || !Array.isArray(doc.servers)) throw new SourceError('invalid_response', 'the registry answered no servers list');
    pages += 1;
    for (const item of doc.servers as RegistryItem[]) {
      const r = rowOf(item, source);
      if (!r) continue;
      if ('gone' in r) gone.push(r.gone);
      else rows.push(r.row);
    }
    const next = str(doc.metadata?.nextCursor ?? doc.metadata?.next_cursor);
    if (!next) break;
    if (seen.has(next) || pages >= MAX_PAGES) throw new SourceError('invalid_response', `the registry's cursors do not end (${pages} pages)`);
    seen.add(next);
    cursor = next;
  }
  return { rows, gone, pages };
}
