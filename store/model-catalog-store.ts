import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import { defineScripts } from './scripts.ts';

/** CatalogStatusFields are the fields every stored source status has (the rest is the runtime's: runtime/models/types.ts). */
export interface CatalogStatusFields {
  source_id: string;
  provider_id: string;
}

/** CatalogSnapshot is every stored source's rows and status at one catalog revision. */
export interface CatalogSnapshot<R, S> {
  revision: string;
  rows: R[];
  statuses: S[];
}

const field = (sourceId: string, providerId: string) => `${sourceId}|${providerId}`;

/**
 * ModelCatalogStore keeps the refreshed sources' rows (models_dev, provider_live) and every source's status in
 * Redis under one hash tag, `{models}`, so a source's rows, its status and the catalog revision change in one script
 * (store/scripts/put-catalog-source-3.lua) and any replica serves the same catalog. NOTE: one tag bounds the
 * catalog's write throughput to one Redis shard; refreshes are a few per provider every MODEL_CATALOG_REFRESH, and
 * reads are served from each process's cache (runtime/models/catalog.ts), so the tag is far from that bound.
 */
export class ModelCatalogStore {
  readonly rowsKey: string;
  readonly statusKey: string;
  readonly revisionKey: string;
  readonly reportedKey: string;

  constructor(private readonly redis: Redis, keys: Keys) {
    this.rowsKey = `${keys.prefix}{models}:rows`;
    this.statusKey = `${keys.prefix}{models}:status`;
    this.revisionKey = `${keys.prefix}{models}:rev`;
    this.reportedKey = `${keys.prefix}{models}:reported`;
    defineScripts();
  }

  /** revision is the catalog revision ('0' before any write): it moves whenever any stored row or status does. */
  async revision(): Promise<string> {
    return (await this.redis.get(this.revisionKey)) ?? '0';
  }

  /** put writes a source's status for a provider and, unless `rows` is undefined (kept), its rows. */
  async put<S extends CatalogStatusFields>(status: S, rows?: unknown[]): Promise<void> {
    await (this.redis as unknown as { putCatalogSource(...a: string[]): Promise<number> })
      .putCatalogSource(this.rowsKey, this.statusKey, this.revisionKey, field(status.source_id, status.provider_id), JSON.stringify(status), rows === undefined ? '' : JSON.stringify(rows));
  }

  /**
   * report records a reported source's status and rows (store/scripts/report-catalog-source-4.lua): nothing is
   * written when `digest` equals the stored one and the last write is younger than `refreshMs`; past `maxSources`
   * reported sources the least recently written goes. It answers what happened. NOTE: a reported source is stored
   * under its source id alone (`<source id>|`): its provider may change between reports, and it has one status.
   */
  async report<S extends CatalogStatusFields & { digest: string }>(status: S, rows: unknown[], o: { now: number; refreshMs: number; maxSources: number }): Promise<'unchanged' | 'refreshed' | 'changed'> {
    const code = await (this.redis as unknown as { reportCatalogSource(...a: (string | number)[]): Promise<number> })
      .reportCatalogSource(this.rowsKey, this.statusKey, this.revisionKey, this.reportedKey, field(status.source_id, ''), JSON.stringify(status),
        JSON.stringify(rows), status.digest, o.now, o.refreshMs, o.maxSources);
    return code === 2 ? 'changed' : code === 1 ? 'refreshed' : 'unchanged';
  }

  /** rowsOf returns one source's stored rows for a provider ([] when none). */
  async rowsOf<R>(sourceId: string, providerId: string): Promise<R[]> {
    const json = await this.redis.hget(this.rowsKey, field(sourceId, providerId));
    return json ? (JSON.parse(json) as R[]) : [];
  }

  /** statusOf returns one source's status for a provider, if it was ever written. */
  async statusOf<S extends CatalogStatusFields>(sourceId: string, providerId: string): Promise<S | undefined> {
    const json = await this.redis.hget(this.statusKey, field(sourceId, providerId));
    return json ? (JSON.parse(json) as S) : undefined;
  }

  /** statuses returns every stored status. */
  async statuses<S extends CatalogStatusFields>(): Promise<S[]> {
    return Object.values(await this.redis.hgetall(this.statusKey)).map((j) => JSON.parse(j) as S);
  }

  /** snapshot reads every row and status with the revision they belong to, in one MULTI (one tag, one slot). */
  async snapshot<R, S extends CatalogStatusFields>(): Promise<CatalogSnapshot<R, S>> {
    const res = await this.redis.multi().get(this.revisionKey).hgetall(this.rowsKey).hgetall(this.statusKey).exec();
    const [[e1, rev], [e2, rows], [e3, statuses]] = res as [Error | null, unknown][];
    const err = e1 ?? e2 ?? e3;
    if (err) throw err;
    return {
      revision: (rev as string | null) ?? '0',
      rows: Object.values(rows as Record<string, string>).flatMap((j) => JSON.parse(j) as R[]),
      statuses: Object.values(statuses as Record<string, string>).map((j) => JSON.parse(j) as S),
    };
  }
}
