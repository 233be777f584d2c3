import { createHash } from 'node:crypto';
import { Queue, QueueEvents, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { quietQueue } from '../../store/connections.ts';
import type { MarketplaceStore } from '../../store/marketplace-store.ts';
import { repeatedErrors } from '../process/repeated-errors.ts';
import type { EgressPolicy } from '../security/egress.ts';
import { SourceError } from './http.ts';
import { pullIndex } from './index-source.ts';
import { pullRegistry } from './mcp-registry.ts';
import type { KindState, MarketKind, MarketRefreshKind, MarketRow, MarketSettings, SourceConfig } from './types.ts';

/** MARKET_QUEUE is the BullMQ queue source syncs run on (its prefix is `<prefix>{q:marketplace}`). */
export const MARKET_QUEUE = 'marketplace';
/** A full registry sync at least this often; in between, `updated_since` brings only the changes. */
const FULL_SYNC_MS = 24 * 60 * 60 * 1000;
/** updated_since starts this much before the last sync began, so a clock skew between us and the registry loses nothing. */
const SKEW_MS = 60_000;
/** A source read gets this long when no download timeout is configured larger. */
const SOURCE_TIMEOUT_MS = 30_000;

/** SyncJob names one source to sync. */
interface SyncJob { source: string }

/** SourceState is a kind state with the bookkeeping a sync needs. */
type SourceState = KindState & { full_at?: string; content_hash?: string };

/** MarketplaceSyncOptions wire the sync engine. */
export interface MarketplaceSyncOptions {
  store: MarketplaceStore;
  connection: ConnectionOptions;
  queuePrefix: string;
  logger: Logger;
  /** The current `marketplace` settings (re-read at each use: the settings file may change at any time). */
  settings: () => Promise<MarketSettings>;
  /** The egress rule every source read passes (runtime/security/egress.ts). */
  egress: EgressPolicy;
}

const contentHash = (rows: MarketRow[]) => {
  const h = createHash('sha256');
  for (const r of [...rows].sort((a, b) => a.entry_id.localeCompare(b.entry_id))) h.update(JSON.stringify(r)).update('\n');
  return h.digest('hex');
};
const errorOf = (err: unknown) => (err instanceof SourceError ? { error_class: err.errorClass, error: err.message } : { error_class: 'invalid_response', error: (err as Error).message });

/**
 * MarketplaceSync keeps each source's rows in Redis current: one BullMQ job per source (deduplicated by source
 * id, so a refresh during a scheduled sync waits for the one in flight), run by controller processes, on a
 * schedule and on `POST /api/marketplace/refresh`. Each kind of a source is resolved on its own: a kind that fails
 * keeps its last rows and is marked stale with why, while the source's other kinds update.
 */
export class MarketplaceSync {
  private readonly queue: Queue<SyncJob | Record<string, never>>;
  private worker?: Worker;
  private events?: QueueEvents;

  constructor(private readonly o: MarketplaceSyncOptions) {
    this.queue = quietQueue(new Queue(MARKET_QUEUE, { connection: o.connection, prefix: o.queuePrefix }));
  }

  /** enqueue adds a sync job per source; a source already waiting is not added twice. */
  async enqueue(sources: SourceConfig[]): Promise<Job[]> {
    return Promise.all(sources.map((s) => this.queue.add('sync', { source: s.id }, {
      deduplication: { id: s.id }, removeOnComplete: { count: 100 }, removeOnFail: { count: 100 },
    })));
  }

  /**
   * refresh syncs the sources that serve `kind` (all when absent) through the queue and waits for them (up to
   * `timeoutMs`), then answers each kind's outcome from the states in Redis; a kind whose sync has not finished in
   * time is `pending`.
   */
  async refresh(kind: MarketKind | undefined, timeoutMs = 60_000): Promise<MarketRefreshKind[]> {
    const settings = await this.o.settings();
    const sources = settings.sources.filter((s) => !kind || s.kinds.includes(kind));
    const before = await this.o.store.states<SourceState>(sources.flatMap((s) => s.kinds.map((k) => ({ source: s.id, kind: k }))));
    this.events ??= new QueueEvents(MARKET_QUEUE, { connection: this.o.connection, prefix: this.o.queuePrefix });
    await this.events.waitUntilReady();
    const jobs = await this.enqueue(sources);
    const done = await Promise.all(jobs.map((j) => j.waitUntilFinished(this.events!, timeoutMs).then(() => true, () => false)));
    const kinds = [...new Set(sources.flatMap((s) => s.kinds))].filter((k) => !kind || k === kind);
    const out: MarketRefreshKind[] = [];
    let i = 0;
    const pairs = sources.flatMap((s, si) => s.kinds.map((k) => ({ s, si, k, prev: before[i++] })));
    const after = await this.o.store.states<SourceState>(pairs.map((p) => ({ source: p.s.id, kind: p.k })));
    const counts = await this.o.store.counts(pairs.map((p) => ({ source: p.s.id, kind: p.k })));
    for (const k of kinds) {
      const mine = pairs.map((p, j) => ({ ...p, now: after[j], count: counts[j] })).filter((p) => p.k === k);
      const failed = mine.filter((p) => !done[p.si] || p.now?.stale);
      const updated = mine.some((p) => done[p.si] && p.now && !p.now.stale && p.now.content_hash !== p.prev?.content_hash);
      const pending = mine.some((p) => !done[p.si]);
      out.push({
        kind: k, entry_count: mine.reduce((n, p) => n + p.count, 0), stale: failed.length > 0,
        error_class: failed.find((p) => p.now?.stale)?.now?.error_class ?? (pending ? 'timeout' : ''),
        outcome: pending ? 'pending' : failed.length && failed.length === mine.length ? 'failed' : updated ? 'updated' : 'unchanged',
      });
    }
    return out;
  }

  /** startWorker runs source syncs in this process (controller role) and keeps the schedule. */
  async startWorker(): Promise<void> {
    const { o } = this;
    this.worker = new Worker<SyncJob | Record<string, never>>(MARKET_QUEUE, async (job) => {
      if (job.name === 'tick') return this.tick();
      const settings = await o.settings();
      const source = settings.sources.find((s) => s.id === (job.data as SyncJob).source);
      // NOTE: a source removed from the settings since the job was queued has nothing to sync.
      if (!source) return [];
      return this.syncSource(source, settings);
    }, { connection: o.connection, prefix: o.queuePrefix, concurrency: 2 });
    this.worker.on('error', repeatedErrors.listener(o.logger, 'error', 'marketplace worker error'));
    // NOTE: a broken marketplace section must not stop the service; its routes answer 503 saying why.
    await this.tick().catch((err) => o.logger.warn({ err: (err as Error).message }, 'marketplace schedule not set'));
  }

  /** tick enqueues every configured source and keeps the job scheduler at the configured interval. */
  private async tick(): Promise<void> {
    const settings = await this.o.settings();
    if (settings.refreshIntervalMs > 0) {
      await this.queue.upsertJobScheduler('marketplace-tick', { every: settings.refreshIntervalMs }, { name: 'tick', data: {} });
    } else {
      await this.queue.removeJobScheduler('marketplace-tick');
    }
    await this.enqueue(settings.sources);
  }

  /** syncSource reads one source and commits each of its kinds (rows and state together). */
  async syncSource(source: SourceConfig, settings: MarketSettings): Promise<MarketRefreshKind[]> {
    const { store, logger } = this.o;
    const now = new Date();
    const pairs = source.kinds.map((kind) => ({ source: source.id, kind }));
    const states = await store.states<SourceState>(pairs);
    const timeoutMs = Math.max(SOURCE_TIMEOUT_MS, settings.limits.downloadTimeoutMs);
    const ok = (prev: SourceState | undefined, extra: Partial<SourceState>): SourceState => ({
      synced_at: now.toISOString(), ok_at: now.toISOString(), stale: false, error_class: '', error: '', entry_count: 0,
      ...(prev ? { updated_since: prev.updated_since, etag: prev.etag, full_at: prev.full_at, content_hash: prev.content_hash } : {}), ...extra,
    });
    const failed = (prev: SourceState | undefined, err: unknown): SourceState => ({
      ...(prev ?? { ok_at: '', entry_count: 0 }), synced_at: now.toISOString(), stale: true, ...errorOf(err),
    });
    const results: MarketRefreshKind[] = [];
    const finish = async (kind: MarketKind, state: SourceState, commit: Parameters<MarketplaceStore['commit']>[2]['mode'], rows: MarketRow[] = [], gone: string[] = []) => {
      const json = rows.map((r) => ({ id: r.entry_id, json: JSON.stringify(r) }));
      await store.commit(source.id, kind, commit === 'state' ? { mode: 'state', state } : commit === 'replace' ? { mode: 'replace', state, rows: json } : { mode: 'merge', state, rows: json, gone });
      const [count] = await store.counts([{ source: source.id, kind }]);
      if (count !== state.entry_count) await store.commit(source.id, kind, { mode: 'state', state: { ...state, entry_count: count } });
      results.push({ kind, entry_count: count, error_class: state.error_class, stale: state.stale, outcome: state.stale ? 'failed' : commit === 'state' ? 'unchanged' : 'updated' });
    };

    if (source.type === 'mcp-registry') {
      const prev = states[0];
      const full = !prev?.updated_since || !prev.full_at || now.getTime() - Date.parse(prev.full_at) > FULL_SYNC_MS || prev.stale;
      try {
        const pull = await pullRegistry(source, { updatedSince: full ? undefined : prev!.updated_since, timeoutMs, egress: this.o.egress });
        const since = new Date(now.getTime() - SKEW_MS).toISOString();
        if (full) {
          const hash = contentHash(pull.rows);
          const state = ok(prev, { updated_since: since, full_at: now.toISOString(), content_hash: hash });
          await finish('mcp', state, hash === prev?.content_hash && !prev?.stale ? 'state' : 'replace', pull.rows);
        } else {
          // NOTE: the skew re-reads recent changes; rows that are stored as they are and ids already gone change nothing.
          const stored = await store.rowsById(source.id, 'mcp', pull.rows.map((r) => r.entry_id));
          pull.rows = pull.rows.filter((r, i) => stored[i] !== JSON.stringify(r));
          const present = await store.rowsById(source.id, 'mcp', pull.gone);
          pull.gone = pull.gone.filter((_, i) => present[i] !== null);
          const changed = pull.rows.length + pull.gone.length > 0;
          // NOTE: an incremental change gets a fresh content hash, so a refresh reports it as updated.
          const state = ok(prev, { updated_since: since, ...(changed ? { content_hash: `${prev?.content_hash}+${now.getTime()}` } : {}) });
          await finish('mcp', state, changed ? 'merge' : 'state', pull.rows, pull.gone);
        }
        logger.debug({ source: source.id, pages: pull.pages, rows: pull.rows.length, gone: pull.gone.length, full }, 'marketplace source synced');
      } catch (err) {
        logger.warn({ source: source.id, ...errorOf(err) }, 'marketplace source sync failed');
        await finish('mcp', failed(prev, err), 'state');
      }
      return results;
    }

    // index: one fetch serves every kind; each kind's section is decoded on its own.
    const anyStale = states.some((s) => !s || s.stale);
    try {
      const pull = await pullIndex(source, { etag: anyStale ? undefined : states[0]?.etag, timeoutMs, egress: this.o.egress });
      for (const [i, kind] of source.kinds.entries()) {
        const prev = states[i];
        if (pull.notModified) { await finish(kind, ok(prev, {}), 'state'); continue; }
        const k = pull.kinds[kind];
        if (!k || !k.ok) { await finish(kind, failed(prev, new SourceError('invalid_response', k && !k.ok ? k.error : 'missing')), 'state'); continue; }
        const hash = contentHash(k.rows);
        const note = k.skipped.length ? `skipped ${k.skipped.length} invalid entries (first: ${k.skipped[0]})` : '';
        const state = ok(prev, { etag: pull.etag, content_hash: hash, error: note });
        await finish(kind, state, hash === prev?.content_hash && !prev?.stale ? 'state' : 'replace', k.rows);
      }
    } catch (err) {
      logger.warn({ source: source.id, ...errorOf(err) }, 'marketplace source sync failed');
      for (const [i, kind] of source.kinds.entries()) await finish(kind, failed(states[i], err), 'state');
    }
    return results;
  }

  async stop(): Promise<void> {
    await this.worker?.close();
    await this.events?.close();
    await this.queue.close();
  }
}
