import type { Logger } from 'pino';
import type { EventBus, Outcome } from '../../store/event-bus.ts';
import type { ModelCatalogStore } from '../../store/model-catalog-store.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { redactText } from '../sessions/redact.ts';
import { fetchModelsDev, rowsFromModelsDev } from './models-dev.ts';
import { failureClass, listLiveModels, type FailureClass } from './provider-live.ts';
import type { ProviderConfig } from './providers.ts';
import { PRIORITY, type ModelRow, type StoredStatus } from './types.ts';

export type { StoredStatus };


/** RefreshTarget names one refreshable source: models.dev (the whole file) or one provider's live list. */
export type RefreshTarget = { source_id: 'models_dev' } | { source_id: string; provider: ProviderConfig };

/** RefresherOptions wire a Refresher. */
export interface RefresherOptions {
  store: ModelCatalogStore;
  security: SecurityPolicy;
  bus: EventBus;
  logger: Logger;
  /** MODELS_DEV_URL ('' : the models_dev source is disabled). */
  modelsDevUrl: string;
  /** Each upstream request's time limit (MODEL_CATALOG_TIMEOUT). */
  timeoutMs: number;
  /** How long a successful refresh stays fresh (MODEL_CATALOG_REFRESH). */
  ttlMs: number;
  /** Called after a refresh changed stored rows (agents' model checks re-run). */
  onChange?: () => Promise<void>;
}

/** ERROR_MAX bounds a stored last_error. */
const ERROR_MAX = 500;

/** EVENT_OUTCOME ranks each failure's bus event for notification filters. */
const EVENT_OUTCOME: Record<FailureClass, Outcome> = { auth_required: 'failure', permission_denied: 'failure', rate_limited: 'warning', unavailable: 'failure' };

/**
 * Refresher runs one source's refresh (in a controller process, from its BullMQ job): fetch, then write the rows
 * and the status in one step. A failure never empties the catalog: the previous rows stay, marked stale with the
 * redacted error; a 401 or 403 is the provider's answer that nothing is available with this key, so the rows stay
 * fresh but unavailable (`unavailable_live`). Each outcome goes on the bus: `provider.model_catalog_refreshed`, or
 * `provider.auth_required|permission_denied|rate_limited|unavailable` (the `provider_failure` preset's events), and
 * `provider.auth_recovered` when a provider that needed auth answers again.
 */
export class Refresher {
  constructor(private readonly o: RefresherOptions) {}

  /** statusKey is the (source, provider) a target's status is stored under: models.dev is one file, provider ''. */
  static keyOf(t: RefreshTarget): { source_id: string; provider_id: string } {
    return 'provider' in t ? { source_id: t.source_id, provider_id: t.provider.name } : { source_id: 'models_dev', provider_id: '' };
  }

  /** fresh is true when the target's last refresh succeeded within the TTL (a non-forced refresh skips it). */
  async fresh(t: RefreshTarget, now = Date.now()): Promise<boolean> {
    const k = Refresher.keyOf(t);
    const st = await this.o.store.statusOf<StoredStatus>(k.source_id, k.provider_id);
    return st?.refresh_state === 'succeeded' && Date.parse(st.last_success) + this.o.ttlMs > now;
  }

  /** refresh runs a target's refresh unless `force` is false and it is fresh; it never throws for an upstream failure. */
  async refresh(t: RefreshTarget, force: boolean): Promise<void> {
    if (!force && (await this.fresh(t))) return;
    const { store } = this.o;
    const k = Refresher.keyOf(t);
    const prev = await store.statusOf<StoredStatus>(k.source_id, k.provider_id);
    const started = new Date();
    const base: StoredStatus = {
      source_id: k.source_id, source_kind: 'provider' in t ? 'provider_live' : 'models_dev', provider_id: k.provider_id,
      priority: 'provider' in t ? PRIORITY.provider_live : PRIORITY.models_dev, last_refresh: started.toISOString(),
      next_refresh: new Date(started.getTime() + this.o.ttlMs).toISOString(), last_success: prev?.last_success ?? '', last_error: prev?.last_error ?? '',
      refresh_state: 'refreshing', row_count: prev?.row_count ?? 0, stale: prev?.stale ?? false, failure_class: prev?.failure_class ?? '',
    };
    if (!('provider' in t) && !this.o.modelsDevUrl) {
      await store.put({ ...base, refresh_state: 'disabled', last_error: '', next_refresh: '', stale: false, row_count: 0 }, []);
      return;
    }
    await store.put(base);
    let key = '';
    try {
      let rows: ModelRow[];
      if ('provider' in t) {
        key = await this.keyOf(t.provider);
        rows = await listLiveModels(t.provider, key, this.o.timeoutMs, started.toISOString(), this.o.security.egress);
      } else {
        const data = await fetchModelsDev(this.o.modelsDevUrl, this.o.timeoutMs, this.o.security.egress);
        // NOTE: a file that parses but is no provider map is a failure, not an empty catalog that would drop the last good rows.
        if (!data || typeof data !== 'object' || Array.isArray(data)) throw new Error('models.dev answered JSON that is not a map of providers');
        rows = rowsFromModelsDev(data, { id: 'models_dev', kind: 'models_dev' }, started.toISOString());
      }
      await store.put({ ...base, refresh_state: 'succeeded', last_success: new Date().toISOString(), last_error: '', row_count: rows.length, stale: false, failure_class: '' }, rows);
      const provider = 'provider' in t ? t.provider.name : '';
      const events = [{ type: 'provider.model_catalog_refreshed', outcome: 'success' as Outcome, summary: `${k.source_id}: ${rows.length} models`, provider }];
      if (prev?.failure_class === 'auth_required' || prev?.failure_class === 'permission_denied') {
        events.push({ type: 'provider.auth_recovered', outcome: 'success', summary: `provider ${provider} answers its model list again`, provider });
      }
      await this.publish(events.map((e) => ({ ...e, data: { provider: e.provider, source_id: k.source_id, row_count: rows.length } })));
    } catch (err) {
      const cls = failureClass(err);
      const message = this.redact(err instanceof Error ? err.message : String(err), key);
      // NOTE: auth failures are an answer, not an outage: the provider says this key can use nothing right now.
      const authoritative = 'provider' in t && (cls === 'auth_required' || cls === 'permission_denied');
      const previous = await store.rowsOf<ModelRow>(k.source_id, k.provider_id);
      const kept = previous.map((r) => ({ ...r, last_error: message, ...(authoritative ? { available: false, stale: false, refreshed_at: started.toISOString() } : { stale: true }) }));
      await store.put({ ...base, refresh_state: 'failed', last_error: message, row_count: kept.length, stale: !authoritative && kept.length > 0, failure_class: cls }, kept);
      this.o.logger.warn({ source_id: k.source_id, provider: k.provider_id, failure: cls, err: message }, 'model catalog refresh failed');
      const provider = 'provider' in t ? t.provider.name : '';
      await this.publish([{
        type: provider ? `provider.${cls}` : 'provider.model_catalog_refreshed', outcome: EVENT_OUTCOME[cls],
        summary: `${k.source_id}: refresh failed (${cls}): ${message}`, data: { provider, source_id: k.source_id, failure: cls, error: message, rows_kept: kept.length },
      }]);
    }
    await this.o.onChange?.().catch((err) => this.o.logger.warn({ err: (err as Error).message }, 'model catalog change hook failed'));
  }

  /**
   * keyOf resolves a provider's `api_key` ref through the security policy ('' when it has none). A ref that does
   * not resolve is an auth failure: the provider cannot be asked with the key it is configured with.
   */
  private async keyOf(p: ProviderConfig): Promise<string> {
    if (!p.api_key) return '';
    const r = await this.o.security.secrets.resolve({ api_key: p.api_key });
    const value = r.env.api_key;
    if (value === undefined) {
      const why = r.refused.length ? this.o.security.secrets.refusal(p.api_key) : r.problems.api_key;
      throw Object.assign(new Error(`api_key ${p.api_key} does not resolve: ${why ?? 'unknown'}`), { authMissing: true });
    }
    return value;
  }

  /** redact masks every secret in an upstream error: the provider's key, values this process resolved, token shapes. */
  private redact(message: string, key: string): string {
    return redactText(this.o.security.secrets.mask(message), key ? [key] : []).slice(0, ERROR_MAX);
  }

  private async publish(events: { type: string; outcome: Outcome; summary: string; data: Record<string, unknown> }[]): Promise<void> {
    await this.o.bus.publishMany(events.map((e) => ({ ...e, source: 'models' }))).catch((err) => this.o.logger.warn({ err: (err as Error).message }, 'model catalog event not published'));
  }
}
