import { MAX_NAME_LENGTH } from '../../codecs/limits.ts';
import type { RegistryCache } from '../../controllers/registry-controller.ts';
import { InputError, NotFoundError } from '../../store/errors.ts';
import type { ModelCatalogStore } from '../../store/model-catalog-store.ts';
import type { Provider, ProviderStatus } from '../agents/types.ts';
import type { Settings, SettingsFile } from '../process/settings.ts';
import { mergeRows, modelKey, type Curation } from './merge.ts';
import { CachedAnswer } from './cached-answer.ts';
import { builtinRows } from './models-dev.ts';
import { liveSourceId } from './provider-live.ts';
import { layeredProviders, providerSettings, type ProviderConfig, type ProviderSettings } from './providers.ts';
import type { RefreshJobs } from './refresh-jobs.ts';
import type { RefreshTarget } from './refresher.ts';
import { PRIORITY, PROVIDER_ID, type CatalogModel, type CatalogSourceStatus, type ListQuery, type ModelRow, type SourceKind, type StoredStatus } from './types.ts';

/** ModelCatalogOptions wire the catalog. */
export interface ModelCatalogOptions {
  store: ModelCatalogStore;
  settings: Settings;
  /** Reads the projected `model.curation` registry (its revision invalidates the cache). */
  registries: RegistryCache;
  jobs: RefreshJobs;
  modelsDevUrl: string;
  /** MODEL_CATALOG_REFRESH: a source's TTL; rows not refreshed for three TTLs read as stale. */
  ttlMs: number;
  /** MODEL_CATALOG_TIMEOUT: one upstream request's limit (an on-demand refresh waits a little longer). */
  timeoutMs: number;
}

/** SOURCE_ID is a source id's grammar: a static id, or `<kind>:<slug>` for the per-provider kinds. */
const SOURCE_ID = /^(builtin|config|models_dev|(provider_live|extension|acp_session):[a-z0-9][a-z0-9_-]*)$/;
/** Kinds whose rows put a model in the curated view: someone configured or observed it here. */
const CURATING_KINDS: ReadonlySet<SourceKind> = new Set(['config', 'provider_live', 'extension', 'acp_session']);
/** JSON_CACHE bounds the answers kept per catalog generation. */
const JSON_CACHE = 64;

/** Built is one generation of the merged catalog: everything a listing reads, derived once per change. */
interface Built {
  stamp: string;
  settings: ProviderSettings;
  configured: Map<string, ProviderConfig>;
  rows: ModelRow[];
  statuses: StoredStatus[];
  curations: Map<string, Curation>;
  providers: Set<string>;
  merged: Map<string, CatalogModel[]>;
  answers: Map<string, CachedAnswer>;
  all?: Map<string, CatalogModel>;
}

/** ProviderView is a configured provider as the workspace snapshot shows it: the spec's Provider and its catalog status. */
export type ProviderView = Provider & { status: ProviderStatus };


/** statusView is a stored status as answered (the failure class and a report's digest stay inside). */
const statusView = ({ failure_class: _, digest: __, ...s }: StoredStatus): CatalogSourceStatus => s;
/**
 * STORED_KINDS are the kinds whose sources exist because something wrote them (an agent's report, an extension),
 * not because the settings configure them: each stored status is one registered source.
 */
const STORED_KINDS: ReadonlySet<SourceKind> = new Set(['acp_session', 'extension']);

/**
 * ModelCatalog is the merged model catalog: the builtin rows (the
 * models.dev data shipped with the service), the `config` rows (the settings file's `models`), and the refreshed
 * rows in Redis (models_dev, each configured provider's provider_live), merged by source priority then freshness,
 * with the `model.curation` records applied. NOTE: each process keeps the merge and the JSON of recent answers,
 * keyed by the catalog revision, the curation registry's revision and the settings file, so a listing costs two
 * small reads while nothing changed (the RegistryCache pattern).
 */
export class ModelCatalog {
  private builtin?: ModelRow[];
  private built?: Built;
  /** The build under way, by the stamp it was started for: calls made meanwhile with the same stamp share it. */
  private building?: { stamp: string; built: Promise<Built> };
  private settingsFile?: SettingsFile;
  /** The last global settings file that parsed: what the catalog reads while the file on disk does not. */
  private lastGoodFile?: SettingsFile;
  private settingsGen = 0;
  private readonly startedAt = new Date().toISOString();

  constructor(private readonly o: ModelCatalogOptions) {}

  /** providers are the providers the global settings file configures (the ones with a live source). */
  async providers(): Promise<ProviderConfig[]> {
    return [...(await this.view()).configured.values()];
  }

  /**
   * providerViews are the providers the settings configure, each as the spec's Provider with its catalog status:
   * the global settings file's, with a workspace's `.svc/config.yaml` laid over them (layeredProviders). The
   * catalog refreshes the global file's providers only (CONNECTION_FIELDS says why): a workspace may relabel one,
   * and a change of its kind, base_url or api_key is not applied and named in `warnings`; a provider only a
   * workspace configures is shown with refresh_state `disabled`, saying why and how to have it refreshed, and is
   * never fetched.
   */
  async providerViews(ws?: { root_dir: string }): Promise<ProviderView[]> {
    const global = (await this.globalFile()).usable;
    const layered = layeredProviders(global, ws ? await this.o.settings.workspace(ws.root_dir) : { path: '', exists: false, data: {} });
    const all = await this.statuses();
    return layered.map(({ provider: p, scope, ignored }) => {
      const { name, display_name, auth_mode, env_policy, harness, home_policy, runtime_provider, kind, base_url } = p;
      const st = all.find((x) => x.source_id === liveSourceId(name) && x.provider_id === name);
      const status: ProviderStatus = scope === 'workspace'
        ? {
          configured: true, scope, kind, base_url, refresh_state: 'disabled', last_refresh: '', last_success: '', row_count: 0, warnings: [],
          last_error: `not refreshed: provider "${name}" is configured only in this workspace's .svc/config.yaml, and the model catalog reads the providers `
            + `of the global settings file only (${global.path}), so that no file in a workspace can make the service send a key to a URL; add it there to have it refreshed`,
        }
        : {
          configured: true, scope, kind, base_url, refresh_state: st?.refresh_state ?? 'idle', last_refresh: st?.last_refresh ?? '', last_success: st?.last_success ?? '',
          last_error: st?.last_error ?? '', row_count: st?.row_count ?? 0,
          warnings: ignored.map((f) => `this workspace's ${f} for provider "${name}" is not applied: the model catalog uses the global settings file's`),
        };
      return { auth_mode, display_name, env_policy, harness, home_policy, name, runtime_provider, status };
    });
  }

  /** targets are the refreshable sources: models_dev (when MODELS_DEV_URL is set) and each configured provider's live list. */
  async targets(): Promise<RefreshTarget[]> {
    const file = (await this.globalFile()).usable;
    // NOTE: without MODELS_DEV_URL the models_dev source is disabled: nothing to fetch (its status says so).
    const modelsDev: RefreshTarget[] = this.o.modelsDevUrl ? [{ source_id: 'models_dev' }] : [];
    return [...modelsDev, ...providerSettings([file]).providers.map((p) => ({ source_id: liveSourceId(p.name), provider: p }))];
  }

  /** list answers a listing (view, provider, source, include_stale); an unknown provider is a 404. */
  async list(q: ListQuery): Promise<CatalogModel[]> {
    const b = await this.view();
    this.check(b, q.provider_id, q.source_id);
    return this.select(b, q);
  }

  /**
   * answer is a listing's answer (UTF-8 JSON bytes, their ETag, compressed forms on demand: CachedAnswer), built by
   * `shape` from the listed models and kept per (`name`, query) until the catalog changes. NOTE: bytes, so a
   * repeated listing is written as is, not re-encoded, and compressed once per generation, not once per request.
   */
  async answer(name: string, q: ListQuery, shape: (models: CatalogModel[]) => unknown): Promise<CachedAnswer> {
    const b = await this.view();
    this.check(b, q.provider_id, q.source_id);
    const key = `${name}|${q.view}|${q.provider_id ?? ''}|${q.source_id ?? ''}|${q.include_stale}`;
    let answer = b.answers.get(key);
    if (answer === undefined) {
      answer = new CachedAnswer(Buffer.from(JSON.stringify(shape(this.select(b, q)))));
      if (b.answers.size >= JSON_CACHE) b.answers.delete(b.answers.keys().next().value!);
      b.answers.set(key, answer);
    }
    return answer;
  }

  /** find returns one model of the full catalog (stale rows included), or undefined. */
  async find(provider: string, model: string): Promise<CatalogModel | undefined> {
    const b = await this.view();
    b.all ??= new Map(this.merge(b, true, undefined).map((m) => [modelKey(m.provider_id, m.model_id), m]));
    return b.all.get(modelKey(provider, model));
  }

  /**
   * knows says whether the catalog has a model: under `provider` when the catalog knows that provider, else under
   * any provider (an agent's `provider` may name its ACP harness rather than a catalog provider).
   */
  async knows(provider: string, model: string): Promise<boolean> {
    const b = await this.view();
    if (b.providers.has(provider)) return (await this.find(provider, model)) !== undefined;
    return b.rows.some((r) => r.model_id === model);
  }

  /** knownProvider says whether any source or the settings name a provider. */
  async knownProvider(provider: string): Promise<boolean> {
    return (await this.view()).providers.has(provider);
  }

  /**
   * statuses lists the source statuses, of one provider or (none given) of every source: builtin and config as
   * derived, models_dev and the live sources as their last refresh left them.
   */
  async statuses(provider?: string): Promise<CatalogSourceStatus[]> {
    const b = await this.view();
    if (provider) this.check(b, provider, undefined);
    const count = (sourceId: string, p?: string) => b.rows.filter((r) => r.source_id === sourceId && (!p || r.provider_id === p)).length;
    const out: CatalogSourceStatus[] = [];
    const derived = (source_id: 'builtin' | 'config', p: string, last_error = ''): CatalogSourceStatus => ({
      source_id, source_kind: source_id, provider_id: p, priority: PRIORITY[source_id], last_refresh: this.startedAt, next_refresh: '',
      last_success: this.startedAt, last_error, refresh_state: last_error ? 'failed' : 'succeeded', row_count: count(source_id, p || undefined), stale: false,
    });
    const builtin = derived('builtin', provider ?? '');
    if (!provider || builtin.row_count) out.push(builtin);
    const config = derived('config', provider ?? '', provider ? '' : b.settings.problems.join('; ').slice(0, 2000));
    if (!provider || config.row_count) out.push(config);
    const md = b.statuses.find((s) => s.source_id === 'models_dev');
    const mdView: CatalogSourceStatus = md ? statusView(md) : {
      source_id: 'models_dev', source_kind: 'models_dev', provider_id: '', priority: PRIORITY.models_dev, last_refresh: '', next_refresh: '',
      last_success: '', last_error: '', refresh_state: this.o.modelsDevUrl ? 'idle' : 'disabled', row_count: 0, stale: false,
    };
    out.push(provider ? { ...mdView, provider_id: provider, row_count: count('models_dev', provider) } : mdView);
    for (const p of b.configured.values()) {
      if (provider && p.name !== provider) continue;
      const st = b.statuses.find((s) => s.source_id === liveSourceId(p.name));
      out.push(st ? statusView(st) : {
        source_id: liveSourceId(p.name), source_kind: 'provider_live', provider_id: p.name, priority: PRIORITY.provider_live, last_refresh: '',
        next_refresh: '', last_success: '', last_error: '', refresh_state: 'idle', row_count: 0, stale: false,
      });
    }
    for (const st of this.storedSources(b)) if (!provider || st.provider_id === provider) out.push({ ...statusView(st), stale: st.stale || this.tooOld(st) });
    return out;
  }

  /**
   * refresh refreshes sources now (all, one provider's, or one source) through the refresh jobs, merged with any
   * refresh of the same source already in flight, and answers the statuses: 200 when every source refreshed, the
   * failure status with an error otherwise (503 when all failed, 502 when some did), 202 when they are still running.
   * `error` is empty unless a source failed (the contract's answer has it on success too).
   */
  async refresh(o: { provider?: string; source?: string; force: boolean }): Promise<{ status: number; sources: CatalogSourceStatus[]; error: string }> {
    const b = await this.view();
    this.check(b, o.provider, o.source);
    const targets = (await this.targets()).filter((t) => {
      if (o.source && t.source_id !== o.source) return false;
      return !o.provider || !('provider' in t) || t.provider.name === o.provider;
    });
    const ids = await this.o.jobs.add(targets, o.force);
    const done = await this.o.jobs.wait(ids, this.o.timeoutMs * 2 + 5000);
    const sources = (await this.statuses(o.provider)).filter((s) => !o.source || s.source_id === o.source);
    if (!done) return { status: 202, sources, error: '' };
    const wanted = new Set(targets.map((t) => t.source_id));
    const failed = sources.filter((s) => wanted.has(s.source_id) && s.refresh_state === 'failed');
    if (!failed.length) return { status: 200, sources, error: '' };
    const error = failed.map((s) => `${s.source_id}: ${s.last_error}`).join('; ');
    return { status: failed.length === wanted.size ? 503 : 502, sources, error };
  }

  /** checkSource refuses a source id that is malformed or not registered (400). */
  private check(b: Built, provider: string | undefined, source: string | undefined): void {
    if (provider !== undefined && !PROVIDER_ID.test(provider)) {
      throw new InputError(`provider_id "${provider}" must match ^[a-z0-9][a-z0-9_-]*$`, 'invalid_provider_id', { provider_id: 'must match ^[a-z0-9][a-z0-9_-]*$' });
    }
    // NOTE: a provider name is at most MAX_NAME_LENGTH (providers.ts), so a longer id is a bad request, not an unknown one.
    if (provider !== undefined && provider.length > MAX_NAME_LENGTH) {
      throw new InputError(`provider_id must be at most ${MAX_NAME_LENGTH} characters`, 'invalid_provider_id', { provider_id: `must be at most ${MAX_NAME_LENGTH} characters` });
    }
    if (source !== undefined) {
      if (!SOURCE_ID.test(source)) throw new InputError(`source_id "${source}" must be builtin, config, models_dev or <kind>:<slug>`, 'invalid_source_id', { source_id: 'must be builtin, config, models_dev or provider_live:<provider>' });
      const registered = ['builtin', 'config', 'models_dev', ...[...b.configured.keys()].map(liveSourceId), ...this.storedSources(b).map((st) => st.source_id)];
      if (!registered.includes(source)) throw new InputError(`source "${source}" is not registered; sources: ${registered.join(', ')}`, 'source_not_registered', { source_id: `must be one of ${registered.join(', ')}` });
    }
    if (provider !== undefined && !b.providers.has(provider)) {
      throw new NotFoundError(`provider "${provider}" is not in the model catalog (configure it in the global settings file's providers: a workspace's .svc/config.yaml providers are not refreshed; or see GET /api/model-catalog/models?view=all)`, 'provider_not_found', { provider_id: provider });
    }
  }

  /** storedSources are the stored statuses of the STORED_KINDS (agents' reports, extensions), by source id. */
  private storedSources(b: Built): StoredStatus[] {
    return b.statuses.filter((st) => STORED_KINDS.has(st.source_kind)).sort((x, y) => (x.source_id < y.source_id ? -1 : x.source_id > y.source_id ? 1 : 0));
  }

  /** tooOld says whether a source's last success is older than three TTLs: its rows then read as stale. */
  private tooOld(st: StoredStatus | undefined, now = Date.now()): boolean {
    return !!st?.last_success && Date.parse(st.last_success) + 3 * this.o.ttlMs < now;
  }

  private select(b: Built, q: ListQuery): CatalogModel[] {
    const models = this.merge(b, q.include_stale, q.source_id);
    return models.filter((m) => (!q.provider_id || m.provider_id === q.provider_id) && (q.view === 'all' || m.curated));
  }

  /** merge returns (and keeps) one variant of the merge: with or without stale rows, of every source or one. */
  private merge(b: Built, includeStale: boolean, source: string | undefined): CatalogModel[] {
    const key = `${includeStale}|${source ?? ''}`;
    let models = b.merged.get(key);
    if (!models) {
      const rows = b.rows.filter((r) => (includeStale || !r.stale) && (!source || r.source_id === source));
      models = mergeRows(rows, b.curations);
      for (const m of models) {
        m.curated = !m.hidden && (m.featured || b.configured.has(m.provider_id) || b.curations.has(modelKey(m.provider_id, m.model_id))
          || m.sources.some((s) => CURATING_KINDS.has(s.source_kind)));
      }
      b.merged.set(key, models);
    }
    return models;
  }

  /**
   * globalFile is the global settings file to read, `usable`: the file, or, while it does not parse (an edit
   * half-saved, a typo), the last one that did, with `broken` saying why. NOTE: a file that fails to parse is not
   * an operator removing every provider: dropping them would empty the curated listing and the OpenAI list until
   * the file is fixed. A process that starts with a broken file has no last good one and reads none.
   */
  private async globalFile(): Promise<{ usable: SettingsFile; broken?: string }> {
    const file = await this.o.settings.global();
    if (!file.error) {
      this.lastGoodFile = file;
      return { usable: file };
    }
    if (!this.lastGoodFile) return { usable: file };
    return { usable: this.lastGoodFile, broken: `${file.path}:${file.error.line}:${file.error.column}: ${file.error.message} (the last good providers and models are kept until the file parses)` };
  }

  /** view returns the current generation, rebuilding it when the catalog, the curations or the settings changed. */
  private async view(): Promise<Built> {
    const file = await this.o.settings.global();
    if (file !== this.settingsFile) {
      this.settingsFile = file;
      this.settingsGen++;
    }
    const now = Date.now();
    const [rev, cur] = await Promise.all([this.o.store.revision(), this.o.registries.read(['model.curation'])]);
    // NOTE: the minute is in the stamp so rows age into stale without a write.
    const stamp = `${rev}|${cur.stamp}|${this.settingsGen}|${Math.floor(now / 60_000)}`;
    if (this.built?.stamp === stamp) return this.built;
    // NOTE: calls made together (a reconcile page checks every agent's model at once) share one build.
    if (this.building?.stamp !== stamp) {
      const building = { stamp, built: this.build(cur, now) };
      this.building = building;
      void building.built.finally(() => { if (this.building === building) this.building = undefined; }).catch(() => undefined);
    }
    return this.building.built;
  }

  /** build reads the stored catalog and derives the generation `view` returns. */
  private async build(cur: Awaited<ReturnType<RegistryCache['read']>>, now: number): Promise<Built> {
    const snap = await this.o.store.snapshot<ModelRow, StoredStatus>();
    const { usable, broken } = await this.globalFile();
    const settings = providerSettings([usable]);
    if (broken) settings.problems.unshift(broken);
    const configured = new Map(settings.providers.map((p) => [p.name, p]));
    const statusOf = new Map(snap.statuses.map((s) => [s.source_id, s as StoredStatus]));
    const tooOld = (r: ModelRow) => this.tooOld(statusOf.get(r.source_id), now);
    // NOTE: a provider removed from the settings stops contributing its live rows at once; they stay in Redis.
    const stored = snap.rows.filter((r) => r.source_kind !== 'provider_live' || configured.has(r.provider_id)).map((r) => (!r.stale && tooOld(r) ? { ...r, stale: true } : r));
    this.builtin ??= builtinRows(this.startedAt);
    const config = settings.models.map((m) => ({ ...m, refreshed_at: this.startedAt }));
    const rows = [...this.builtin, ...stored, ...config];
    const curations = new Map<string, Curation>();
    for (const e of cur.entries['model.curation'] ?? []) curations.set(modelKey(e.spec.provider_id, e.spec.model_id), e.spec as Curation);
    const providers = new Set([...configured.keys(), ...rows.map((r) => r.provider_id)]);
    this.built = {
      stamp: `${snap.revision}|${cur.stamp}|${this.settingsGen}|${Math.floor(now / 60_000)}`,
      settings, configured, rows, statuses: snap.statuses.filter((s) => s.source_kind !== 'provider_live' || configured.has(s.provider_id)),
      curations, providers, merged: new Map(), answers: new Map(),
    };
    return this.built;
  }
}
