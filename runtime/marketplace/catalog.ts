import MiniSearch from 'minisearch';
import type { MarketplaceStore } from '../../store/marketplace-store.ts';
import type { KindState, MarketKind, MarketRow, SourceConfig, Trust } from './types.ts';

/** KindView is one kind's merged rows (a duplicate identity resolved to its highest-priority source) and their index. */
export interface KindView {
  rows: MarketRow[];
  byId: Map<string, MarketRow>;
  index: MiniSearch<MarketRow>;
  /** Rows in the order of the curated idle slice (most downloaded, then most recently updated, then by name). */
  curated: MarketRow[];
  /** Recent queries' ranked rows: valid as long as this view (a sync builds a new one). */
  recent: Map<string, MarketRow[]>;
}

/** RECENT_QUERIES bounds each view's query cache (a page and its next pages, and popular queries, are asked again). */
const RECENT_QUERIES = 256;

/** KindStatus is what the sources of one kind last said, merged: stale when any is, with the first failure's class. */
export interface KindStatus { stale: boolean; error_class: string; error: string; synced: boolean }

const byCurated = (a: MarketRow, b: MarketRow) => (b.downloads ?? -1) - (a.downloads ?? -1)
  || (b.updated_at ?? '').localeCompare(a.updated_at ?? '') || a.name.localeCompare(b.name) || a.entry_id.localeCompare(b.entry_id);

/**
 * newIndex builds a kind's BM25 index (MiniSearch, the one search library of the service): the name field holds the
 * display name, the identity (server name or slug) and the author, and weighs most; then tags, then the
 * description. Prefix and a little fuzziness forgive a half-typed or misspelt word. NOTE: three fields, not five:
 * the identity and author repeat the name's words, and each field is a posting list every query term walks
 * (test/bench/marketplace.ts: p99 of distinct queries over 5,000 entries about halved).
 */
function newIndex(rows: MarketRow[]): MiniSearch<MarketRow> {
  const index = new MiniSearch<MarketRow>({
    idField: 'entry_id',
    fields: ['name', 'tags', 'description'],
    extractField: (doc, field) => {
      if (field === 'name') return [...new Set([doc.name, doc.identity, doc.author])].join(' ').replace(/[/@._-]+/g, ' ');
      const v = (doc as unknown as Record<string, unknown>)[field];
      return Array.isArray(v) ? v.join(' ') : (v as string) ?? '';
    },
    searchOptions: { boost: { name: 4, tags: 1.5, description: 1 }, prefix: true, fuzzy: 0.2, combineWith: 'AND' },
  });
  index.addAll(rows);
  return index;
}

/**
 * MarketCatalog is one process's view of the marketplace: the rows every source synced into Redis, merged per kind
 * (a duplicate identity goes to the source with the higher priority, then the one listed first), with a search
 * index per kind. It is rebuilt when the marketplace revision or the configured sources change, so every replica
 * answers from the same Redis state.
 */
export class MarketCatalog {
  private cache?: { key: string; views: Map<MarketKind, KindView> };
  private building?: Promise<Map<MarketKind, KindView>>;

  constructor(private readonly store: MarketplaceStore) {}

  /** views returns the merged view of every kind the sources serve. */
  async views(sources: SourceConfig[]): Promise<Map<MarketKind, KindView>> {
    const key = `${await this.store.revision()}|${JSON.stringify(sources)}`;
    if (this.cache?.key === key) return this.cache.views;
    // NOTE: concurrent requests after a change share one rebuild.
    this.building ??= this.build(sources).then((views) => {
      this.cache = { key, views };
      return views;
    }).finally(() => { this.building = undefined; });
    return this.building;
  }

  private async build(sources: SourceConfig[]): Promise<Map<MarketKind, KindView>> {
    const pairs = sources.flatMap((s, order) => s.kinds.map((kind) => ({ source: s.id, kind, order, priority: s.priority })));
    const raw = await this.store.rows(pairs);
    const winners = new Map<MarketKind, Map<string, { row: MarketRow; rank: [number, number] }>>();
    pairs.forEach((p, i) => {
      const byIdentity = winners.get(p.kind) ?? new Map();
      winners.set(p.kind, byIdentity);
      for (const json of raw[i]) {
        const row = JSON.parse(json) as MarketRow;
        const prev = byIdentity.get(row.identity);
        // NOTE: higher priority wins; on a tie, the source listed first in the settings file.
        if (!prev || p.priority > prev.rank[0] || (p.priority === prev.rank[0] && p.order < prev.rank[1])) {
          byIdentity.set(row.identity, { row: { ...row, priority: p.priority }, rank: [p.priority, p.order] });
        }
      }
    });
    const views = new Map<MarketKind, KindView>();
    for (const [kind, byIdentity] of winners) {
      const rows = [...byIdentity.values()].map((w) => w.row).sort((a, b) => a.name.localeCompare(b.name) || a.entry_id.localeCompare(b.entry_id));
      views.set(kind, { rows, byId: new Map(rows.map((r) => [r.entry_id, r])), index: newIndex(rows), curated: [...rows].sort(byCurated), recent: new Map() });
    }
    return views;
  }

  /** status merges the sync states of a kind's sources. */
  async status(sources: SourceConfig[], kind: MarketKind): Promise<KindStatus> {
    const serving = sources.filter((s) => s.kinds.includes(kind));
    const states = await this.store.states<KindState>(serving.map((s) => ({ source: s.id, kind })));
    const out: KindStatus = { stale: false, error_class: '', error: '', synced: states.length > 0 && states.every(Boolean) };
    states.forEach((st, i) => {
      if (!st) {
        out.stale = true;
        out.error_class ||= 'not_synced';
        out.error ||= `source "${serving[i].id}" has not been synced yet`;
      } else if (st.stale) {
        out.stale = true;
        out.error_class ||= st.error_class;
        out.error ||= `source "${serving[i].id}": ${st.error}`;
      }
    });
    return out;
  }
}

/** search runs a query over one kind's view: ranked matches, or the curated slice when the query is empty. */
export function searchView(view: KindView | undefined, q: string): MarketRow[] {
  if (!view) return [];
  const key = q.trim().toLowerCase().replace(/\s+/g, ' ');
  if (!key) return view.curated;
  const hit = view.recent.get(key);
  if (hit) return hit;
  const rows = view.index.search(key).map((r) => view.byId.get(String(r.id))!).filter(Boolean);
  if (view.recent.size >= RECENT_QUERIES) view.recent.delete(view.recent.keys().next().value!);
  view.recent.set(key, rows);
  return rows;
}

/**
 * entryTrust is an entry's trust object as every route shows it: a skill version and an extension artifact with a
 * published SHA-256 are checked against it before unpacking (`verifiable`); an MCP package, a bundle and an
 * extension without one have nothing to check (`unverified`).
 */
export function entryTrust(r: MarketRow): Trust {
  const checked = r.kind === 'skill' ? Boolean(r.versions?.length && r.versions.every((v) => v.sha256)) : r.kind === 'extension' && Boolean(r.detail.extension?.digest_sha256);
  return { allow_unverified: false, checksum_verified: checked, decision: checked ? 'verifiable' : 'unverified', registry_tier: r.tier, warnings: [] };
}
