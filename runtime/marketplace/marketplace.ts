import { InputError, NotFoundError, UnavailableError, ValidationError } from '../../store/errors.ts';
import type { MarketplaceStore } from '../../store/marketplace-store.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { Settings } from '../process/settings.ts';
import type { SkillInstalls } from '../skills/installs.ts';
import { entryTrust, MarketCatalog, searchView, type KindView } from './catalog.ts';
import { compareVersions } from './index-source.ts';
import { decodeMarketSettings, DEFAULT_LIMITS } from './settings.ts';
import type { MarketplaceSync } from './sync.ts';
import {
  MARKET_KINDS, SEARCH_KINDS, type InstalledScope, type MarketDetail, type MarketEntry, type MarketKind, type MarketKindPage,
  type MarketLimits, type MarketRefreshKind, type MarketRow, type MarketSettings,
} from './types.ts';

/** DEFAULT_LIMIT is a page's size when the query names none. */
export const DEFAULT_LIMIT = 20;
/** MAX_QUERY is the longest search query (longer ones are refused, not cut). */
export const MAX_QUERY = 256;

/** Installed is one install of an entry, as projected onto it. */
interface Installed { name: string; version: string }

/** MarketplaceOptions wire the marketplace service. */
export interface MarketplaceOptions {
  store: MarketplaceStore;
  resources: ResourceStore;
  settings: Settings;
  /** The sync engine (refresh). */
  sync: MarketplaceSync;
  /** Installed skills (installed-state of the skill kind); set once the installer exists. */
  installs?: SkillInstalls;
  /** Installed extensions, name → version (installed-state of the extension kind); set once they exist. */
  extensionInstalls?: () => Promise<Map<string, string>>;
}

/** PageQuery is a decoded list or search query. */
export interface PageQuery { q: string; limit: number; cursor?: string; scope: InstalledScope }

// NOTE: the kind is in the cursor: the offset means nothing on another kind's list, so such a cursor is refused.
const encodeCursor = (kind: MarketKind, offset: number, q: string) => Buffer.from(JSON.stringify({ k: kind, o: offset, q })).toString('base64url');

/**
 * Marketplace is the marketplace family: pages, search and details
 * over the rows the sources synced, with installed-state projected per scope at read time (MCP installs are
 * `mcp_server` records whose source is the entry; skill installs are global), and refresh through the sync queue.
 */
export class Marketplace {
  readonly catalog: MarketCatalog;

  constructor(private readonly o: MarketplaceOptions) {
    this.catalog = new MarketCatalog(o.store);
  }

  set installs(installs: SkillInstalls) { this.o.installs = installs; }

  set extensionInstalls(read: () => Promise<Map<string, string>>) { this.o.extensionInstalls = read; }

  /** store is where the sources' rows and the installs live (the MCP installer records its installs there). */
  get store(): MarketplaceStore { return this.o.store; }

  /** settings decodes the settings file's `marketplace` section; a broken one is a 503 naming each problem. */
  async settings(): Promise<MarketSettings> {
    const file = await this.o.settings.global();
    const r = decodeMarketSettings(file.data.marketplace);
    if (!r.ok) throw new UnavailableError(`the marketplace section of ${file.path} is not valid: ${Object.entries(r.problems).map(([k, v]) => `${k} ${v}`).join('; ')}`, 'marketplace_config_invalid', r.problems);
    return r.settings;
  }

  /** limits are the install limits of the settings file (SkillSource). */
  async limits(): Promise<MarketLimits> {
    return (await this.settings()).limits;
  }

  /**
   * installedLimits are the limits to unpack what is installed already: the section's, or, while the section is
   * broken, the defaults with the problem (`problem`) to report beside what they serve. NOTE: an installed archive
   * passed inspection at install under limits no looser than the defaults, and its digest is verified on every
   * read, so a broken section stops new installs (503 marketplace_config_invalid) but not what is installed.
   */
  async installedLimits(): Promise<{ limits: MarketLimits; problem?: string }> {
    try {
      return { limits: await this.limits() };
    } catch (err) {
      if (!(err instanceof UnavailableError)) throw err;
      return { limits: { ...DEFAULT_LIMITS }, problem: err.message };
    }
  }

  /** configured answers the settings, or 503 `marketplace_not_configured` when no source serves `kind`. */
  async configured(kind?: MarketKind): Promise<MarketSettings> {
    const s = await this.settings();
    if (!s.sources.some((src) => !kind || src.kinds.includes(kind))) {
      throw new UnavailableError(`no marketplace source${kind ? ` serves ${kind} entries` : ' is configured'}: add one under marketplace.sources in the settings file`, 'marketplace_not_configured', { kind: kind ?? '' });
    }
    return s;
  }

  /** skill returns the merged row of a skill slug (SkillSource). */
  async skill(slug: string): Promise<MarketRow | undefined> {
    const s = await this.configured('skill');
    return (await this.catalog.views(s.sources)).get('skill')?.rows.find((r) => r.identity === slug);
  }

  /** skillView is the skill kind's merged view, for the skills marketplace search and info. */
  async skillView(): Promise<KindView | undefined> {
    return (await this.catalog.views((await this.configured('skill')).sources)).get('skill');
  }

  /** refresh syncs the sources of one kind (or all) and answers each kind's outcome. */
  async refresh(kind: string | undefined): Promise<MarketRefreshKind[]> {
    if (kind !== undefined && !(SEARCH_KINDS as readonly string[]).includes(kind)) {
      throw new InputError(`kind must be one of ${SEARCH_KINDS.join(', ')}`, 'invalid_query', { kind: `must be one of ${SEARCH_KINDS.join(', ')}` });
    }
    const s = await this.settings();
    const synced = await this.o.sync.refresh(kind as MarketKind | undefined);
    // NOTE: a kind no source serves is answered as such (not a 503): there is nothing to refresh, and nothing is down.
    const missing = (kind ? [kind] : SEARCH_KINDS).filter((k) => !s.sources.some((src) => src.kinds.includes(k as MarketKind)));
    return [...synced, ...missing.map((k) => ({ kind: k, entry_count: 0, error_class: 'not_configured', outcome: 'failed' as const, stale: false }))];
  }

  /** page answers one kind's page: ranked matches (or the curated slice), from an opaque cursor. */
  async page(kind: MarketKind, query: PageQuery): Promise<MarketKindPage> {
    const s = await this.settings();
    const base: MarketKindPage = { kind, items: [], next_cursor: '', total: 0, stale: false, error_class: '', error: '' };
    if (!s.sources.some((src) => src.kinds.includes(kind))) return { ...base, total: null, error_class: 'not_configured', error: `no marketplace source serves ${kind} entries` };
    const [views, status, installed] = await Promise.all([this.catalog.views(s.sources), this.catalog.status(s.sources, kind), this.installed(kind, query.scope)]);
    let offset = 0;
    if (query.cursor) {
      let c: { k?: unknown; o?: unknown; q?: unknown } = {};
      try { c = JSON.parse(Buffer.from(query.cursor, 'base64url').toString('utf8')); } catch { /* below */ }
      if (typeof c.o !== 'number' || !Number.isSafeInteger(c.o) || c.o < 0 || c.q !== query.q || c.k !== kind) {
        throw new InputError('cursor is not a next_cursor of this query', 'invalid_cursor', { cursor: 'must be the next_cursor of the previous page of the same kind and query' });
      }
      offset = c.o;
    }
    const matches = searchView(views.get(kind), query.q);
    const items = matches.slice(offset, offset + query.limit).map((r) => this.entry(r, installed.get(r.entry_id)));
    const next = offset + query.limit < matches.length ? encodeCursor(kind, offset + query.limit, query.q) : '';
    return { ...base, items, next_cursor: next, total: matches.length, stale: status.stale, error_class: status.error_class, error: status.error };
  }

  /** search answers the search kinds, each resolved on its own (a kind that fails does not fail the others). */
  async search(query: PageQuery): Promise<{ kinds: MarketKindPage[]; query: string }> {
    const kinds = await Promise.all(SEARCH_KINDS.map((k) => this.page(k, { ...query, cursor: undefined }).catch((err: Error & { code?: string }) => ({
      kind: k, items: [], next_cursor: '', total: null, stale: true, error_class: err.code ?? 'internal', error: err.message,
    }) as MarketKindPage)));
    return { kinds, query: query.q };
  }

  /** detail answers one entry with its kind's detail; `installedName` picks one install of several (not for bundles). */
  async detail(kind: MarketKind, entryId: string, scope: InstalledScope, installedName?: string): Promise<MarketDetail> {
    if (installedName !== undefined && kind === 'bundle') {
      throw new InputError('installed_name does not apply to bundles', 'invalid_query', { installed_name: 'is not accepted for bundles' });
    }
    const row = await this.row(kind, entryId);
    const all = await this.installedAll(kind, scope);
    const mine = all.filter((i) => i.entry_id === entryId);
    let pick = mine[0];
    if (installedName !== undefined) {
      pick = mine.find((i) => i.name === installedName)!;
      if (!pick) throw new NotFoundError(`no install named "${installedName}" of ${kind} entry ${entryId} in this scope`, 'install_not_found', { installed_name: installedName });
    }
    const { detail } = row;
    return { entry: this.entry(row, pick), bundle: detail.bundle, extension: detail.extension, mcp: detail.mcp, skill: detail.skill };
  }

  /** row reads one merged entry; 404 when no source lists it. */
  async row(kind: MarketKind, entryId: string): Promise<MarketRow> {
    const s = await this.settings();
    const row = (await this.catalog.views(s.sources)).get(kind)?.byId.get(entryId);
    if (!row) throw new NotFoundError(`no marketplace source lists ${kind} entry "${entryId}"`, 'market_entry_not_found', { kind, entry_id: entryId });
    return row;
  }

  private entry(r: MarketRow, inst: Installed | undefined): MarketEntry {
    const manage = !inst ? '' : r.kind === 'mcp' ? `/api/resources/mcp_server/${inst.name}` : r.kind === 'skill' ? `/api/skills/${inst.name}` : r.kind === 'extension' ? `/api/extensions/${inst.name}` : '';
    return {
      author: r.author, description: r.description, downloads: r.downloads, entry_id: r.entry_id, install_slug: r.install_slug,
      installed: Boolean(inst), installed_name: inst?.name ?? '', installed_version: inst?.version ?? '', kind: r.kind, manage_path: manage,
      name: r.name, published_at: r.published_at, source: r.source, tier: r.tier, transport: r.transport,
      trust: entryTrust(r),
      update_available: Boolean(inst?.version) && compareVersions(r.version, inst!.version) > 0, updated_at: r.updated_at, version: r.version,
    };
  }

  /** installed maps entry ids to their first install in the scope. */
  private async installed(kind: MarketKind, scope: InstalledScope): Promise<Map<string, Installed>> {
    const out = new Map<string, Installed>();
    for (const i of await this.installedAll(kind, scope)) if (!out.has(i.entry_id)) out.set(i.entry_id, i);
    return out;
  }

  /**
   * installedAll lists the installs of a kind in a scope: MCP installs are `mcp_server` records with source
   * `{kind: marketplace, id: <entry>}` in exactly that scope; skill installs are global, so every scope sees them.
   * Extensions are installed by name (the entry id), globally (runtime/extensions/); bundles are not installed here.
   */
  private async installedAll(kind: MarketKind, scope: InstalledScope): Promise<(Installed & { entry_id: string })[]> {
    if (kind === 'mcp') {
      const [records, versions] = await Promise.all([this.o.resources.list({ kind: 'mcp_server' }), this.o.store.mcpInstalled()]);
      return records
        .filter((r) => r.source.kind === 'marketplace' && r.scope.kind === scope.kind && (scope.kind === 'global' || r.scope.id === scope.workspaceId))
        .map((r) => ({ entry_id: r.source.id, name: r.id, version: versions.get(mcpInstallKey(r.scope, r.id))?.version ?? '' }));
    }
    if (kind === 'skill' && this.o.installs) {
      const { byName } = await this.o.installs.records();
      return [...byName.values()].map((r) => ({ entry_id: r.slug.slice(1).replace('/', '_'), name: r.name, version: r.version }));
    }
    if (kind === 'extension' && this.o.extensionInstalls) {
      return [...(await this.o.extensionInstalls())].map(([name, version]) => ({ entry_id: name, name, version }));
    }
    return [];
  }
}

/** mcpInstallKey names an MCP install by the record's scope and id. */
export const mcpInstallKey = (scope: { kind: string; id?: string }, id: string) => `${scope.kind}:${scope.id ?? ''}/${id}`;

/** parseKind reads a path kind; an unknown one is 404 (no such collection). */
export function parseKind(kind: string): MarketKind {
  if (!(MARKET_KINDS as readonly string[]).includes(kind)) throw new NotFoundError(`marketplace kind "${kind}" does not exist; kinds: ${MARKET_KINDS.join(', ')}`, 'market_kind_not_found', { kind });
  return kind as MarketKind;
}

/** parseScope reads `scope` and `workspace_id`: workspace installed-state needs the workspace id (400 otherwise). */
export function parseScope(scope: string | undefined, workspaceId: string | undefined): InstalledScope {
  if (scope !== undefined && scope !== 'global' && scope !== 'workspace') throw new InputError('scope must be global or workspace', 'invalid_query', { scope: 'must be global or workspace' });
  if (scope === 'workspace' && !workspaceId) throw new InputError('scope=workspace needs workspace_id', 'invalid_query', { workspace_id: 'is required with scope=workspace' });
  if (scope !== 'workspace' && workspaceId) throw new InputError('workspace_id goes with scope=workspace', 'invalid_query', { scope: 'must be workspace when workspace_id is given' });
  return scope === 'workspace' ? { kind: 'workspace', workspaceId } : { kind: 'global' };
}

/** parseLimit reads `limit` (1 to 100; default 20): anything else is a 400, as the spec's range says. */
export function parseLimit(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_LIMIT;
  const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1 && n <= 100)) throw new InputError('limit must be an integer from 1 to 100', 'invalid_query', { limit: 'must be an integer from 1 to 100' });
  return n;
}

/** parseQuery reads `q` (at most MAX_QUERY characters). */
export function parseQuery(raw: string | undefined): string {
  const q = (raw ?? '').trim();
  if (q.length > MAX_QUERY) throw new ValidationError(`q must be at most ${MAX_QUERY} characters`, 'invalid_query', { q: `must be at most ${MAX_QUERY} characters` });
  return q;
}
