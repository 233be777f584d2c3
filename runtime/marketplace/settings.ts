import { parseDuration } from '../../codecs/duration.ts';
import { ID_PATTERN } from '../../codecs/shared.ts';
import { MARKET_KINDS, type MarketKind, type MarketLimits, type MarketSettings, type SourceConfig } from './types.ts';

/**
 * DEFAULT_LIMITS are the install limits: 50 MiB compressed, 500 MiB expanded, 10,000 entries, a 60 s download,
 * an expansion of at most 100 times the archive, and 30 s to read an archive's entries.
 * NOTE: text and code compress 3-10 times; a ratio of 100 leaves room for that and refuses a compression bomb
 * (zeros compress about 1,000 times) after reading a tenth of it.
 */
export const DEFAULT_LIMITS: MarketLimits = {
  maxArchiveBytes: 50 * 1024 * 1024, maxExpandedBytes: 500 * 1024 * 1024, maxFiles: 10_000, downloadTimeoutMs: 60_000,
  maxExpansionRatio: 100, inspectTimeoutMs: 30_000,
};
/** DEFAULT_REFRESH_MS: each source is synced hourly (the registry's entries change slowly). */
export const DEFAULT_REFRESH_MS = 60 * 60 * 1000;
/** MAX_SOURCES bounds the sources a settings file may list (each is a job and a set of Redis keys). */
export const MAX_SOURCES = 32;

const TYPE_KINDS: Record<SourceConfig['type'], readonly MarketKind[]> = { 'mcp-registry': ['mcp'], index: ['skill', 'extension', 'bundle'] };

/** MarketSettingsResult is a decoded `marketplace` section, or every problem with it (path → message). */
export type MarketSettingsResult = { ok: true; settings: MarketSettings } | { ok: false; problems: Record<string, string> };

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * decodeMarketSettings reads the settings file's `marketplace` section: `{sources: [{id, type, url, kinds?,
 * priority?}], refresh_interval?, limits?: {max_archive_bytes, max_expanded_bytes, max_files, download_timeout}}`.
 * An absent section is no sources. Unknown fields are problems, as everywhere in this service's input.
 */
export function decodeMarketSettings(raw: unknown): MarketSettingsResult {
  const problems: Record<string, string> = {};
  const settings: MarketSettings = { sources: [], refreshIntervalMs: DEFAULT_REFRESH_MS, limits: { ...DEFAULT_LIMITS } };
  if (raw === undefined || raw === null) return { ok: true, settings };
  if (!isObject(raw)) return { ok: false, problems: { marketplace: 'must be a mapping' } };
  for (const k of Object.keys(raw)) if (!['sources', 'refresh_interval', 'limits'].includes(k)) problems[`marketplace.${k}`] = 'is not a known field';
  if (raw.refresh_interval !== undefined) {
    const ms = typeof raw.refresh_interval === 'string' ? parseDuration(raw.refresh_interval) : undefined;
    if (ms === undefined || (ms > 0 && ms < 1000)) problems['marketplace.refresh_interval'] = 'must be a duration of 1s or more (0 turns the schedule off)';
    else settings.refreshIntervalMs = ms;
  }
  if (raw.limits !== undefined) {
    if (!isObject(raw.limits)) problems['marketplace.limits'] = 'must be a mapping';
    else {
      const l = raw.limits;
      const int = (k: string, field: keyof MarketLimits) => {
        if (l[k] === undefined) return;
        if (typeof l[k] !== 'number' || !Number.isSafeInteger(l[k]) || (l[k] as number) < 1) problems[`marketplace.limits.${k}`] = 'must be a positive integer';
        else (settings.limits[field] as number) = Math.min(l[k] as number, DEFAULT_LIMITS[field]);
      };
      const known = ['max_archive_bytes', 'max_expanded_bytes', 'max_files', 'download_timeout', 'max_expansion_ratio', 'inspect_timeout'];
      for (const k of Object.keys(l)) if (!known.includes(k)) problems[`marketplace.limits.${k}`] = 'is not a known field';
      // NOTE: a settings file may only tighten the default limits, never loosen them.
      int('max_archive_bytes', 'maxArchiveBytes');
      int('max_expanded_bytes', 'maxExpandedBytes');
      int('max_files', 'maxFiles');
      int('max_expansion_ratio', 'maxExpansionRatio');
      const duration = (k: string, field: 'downloadTimeoutMs' | 'inspectTimeoutMs') => {
        if (l[k] === undefined) return;
        const ms = typeof l[k] === 'string' ? parseDuration(l[k] as string) : undefined;
        if (!ms || ms <= 0) problems[`marketplace.limits.${k}`] = 'must be a positive duration';
        else settings.limits[field] = Math.min(ms, DEFAULT_LIMITS[field]);
      };
      duration('download_timeout', 'downloadTimeoutMs');
      duration('inspect_timeout', 'inspectTimeoutMs');
    }
  }
  if (raw.sources !== undefined && !Array.isArray(raw.sources)) problems['marketplace.sources'] = 'must be a list';
  const list = Array.isArray(raw.sources) ? raw.sources : [];
  if (list.length > MAX_SOURCES) problems['marketplace.sources'] = `must list at most ${MAX_SOURCES} sources`;
  const seen = new Set<string>();
  list.forEach((s, i) => {
    const at = `marketplace.sources[${i}]`;
    if (!isObject(s)) { problems[at] = 'must be a mapping'; return; }
    for (const k of Object.keys(s)) if (!['id', 'type', 'url', 'kinds', 'priority'].includes(k)) problems[`${at}.${k}`] = 'is not a known field';
    const id = typeof s.id === 'string' ? s.id.trim() : '';
    // NOTE: the id is a Redis key segment and a BullMQ deduplication id; 64 keeps keys short.
    if (!/^[a-z0-9][a-z0-9_-]{0,63}$/.test(id)) problems[`${at}.id`] = 'must be 1-64 lower-case letters, digits, "_" or "-"';
    else if (seen.has(id)) problems[`${at}.id`] = `duplicates source "${id}"`;
    seen.add(id);
    const type = s.type;
    if (type !== 'mcp-registry' && type !== 'index') { problems[`${at}.type`] = 'must be mcp-registry or index'; return; }
    const url = typeof s.url === 'string' ? s.url.trim() : '';
    let parsed: URL | undefined;
    try { parsed = new URL(url); } catch { /* below */ }
    if (!parsed || !['http:', 'https:'].includes(parsed.protocol)) problems[`${at}.url`] = 'must be an http(s) URL';
    const allowed = TYPE_KINDS[type];
    let kinds = [...allowed];
    if (s.kinds !== undefined) {
      if (!Array.isArray(s.kinds) || !s.kinds.length) problems[`${at}.kinds`] = 'must be a non-empty list';
      else {
        const bad = s.kinds.filter((k) => !allowed.includes(k as MarketKind));
        if (bad.length) problems[`${at}.kinds`] = `a ${type} source serves ${allowed.join(', ')} (not ${bad.join(', ')})`;
        kinds = [...new Set(s.kinds as MarketKind[])].sort((a, b) => MARKET_KINDS.indexOf(a) - MARKET_KINDS.indexOf(b));
      }
    }
    let priority = 0;
    if (s.priority !== undefined) {
      if (typeof s.priority !== 'number' || !Number.isSafeInteger(s.priority) || Math.abs(s.priority) > 1_000_000) problems[`${at}.priority`] = 'must be an integer from -1000000 to 1000000';
      else priority = s.priority;
    }
    if (ID_PATTERN.test(id)) settings.sources.push({ id, type, url: type === 'mcp-registry' ? url.replace(/\/+$/, '') : url, kinds, priority });
  });
  return Object.keys(problems).length ? { ok: false, problems } : { ok: true, settings };
}
