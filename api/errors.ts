import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import { ToolError } from '../runtime/tools/types.ts';
import { isMemoryPath, memoryErrorBody } from '../runtime/memory/errors.ts';
import { InputError, NotFoundError, PayloadTooLargeError, ServiceError, UnavailableError, UnsupportedMediaTypeError } from '../store/errors.ts';

import type { Diagnostic } from '../store/types.ts';

export type { Diagnostic };

const TITLES: Record<number, string> = {
  400: 'Bad request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not found', 405: 'Method not allowed', 409: 'Conflict', 410: 'Gone', 413: 'Payload too large',
  415: 'Unsupported media type', 422: 'Invalid content', 429: 'Too many requests', 500: 'Internal error', 503: 'Unavailable',
};
const CATEGORIES: Record<number, string> = {
  400: 'input', 401: 'auth', 403: 'auth', 404: 'not_found', 405: 'input', 409: 'conflict', 410: 'gone', 413: 'limit', 415: 'input', 422: 'validation', 429: 'rate_limit',
  500: 'internal', 503: 'dependency',
};

/** errorBody builds the `{error, diagnostic}` body most families use. */
export function errorBody(status: number, code: string, message: string, evidence: Record<string, unknown> = {}) {
  const diagnostic: Diagnostic = {
    category: CATEGORIES[status] ?? 'internal', code, data_freshness: 'live', doc_url: '', evidence,
    id: `svc.${code}`, message, severity: 'error', suggested_command: '', title: TITLES[status] ?? 'Error',
  };
  return { error: message, diagnostic };
}

/** QUOTE_MAX is how much of a refused input an error body repeats: its first 128 characters, then `…(N more)`. */
export const QUOTE_MAX = 128;
/**
 * STRING_MAX bounds every string of an error body, for input an error repeats changed (trimmed, resolved as a path,
 * lower-cased) so that it is not found verbatim; well above the longest message the service writes itself.
 */
const STRING_MAX = 4096;
/** At most this many of a request's long strings are looked for in its error body (the longest first). */
const MAX_INPUTS = 256;

/** clip keeps the first `max` characters of a string and says how many it left out. */
export function clip(s: string, max = QUOTE_MAX): string {
  return s.length <= max ? s : `${s.slice(0, max)}…(${s.length - max} more)`;
}

/**
 * longInputs lists what a request sent that is longer than QUOTE_MAX, longest first: its path and each decoded
 * path segment, query values, header values, and the keys and string values of its JSON body (each also trimmed).
 */
function longInputs(ctx: Context): string[] {
  const out = new Set<string>();
  const add = (s: unknown) => {
    if (typeof s !== 'string' || s.length <= QUOTE_MAX) return;
    out.add(s);
    const t = s.trim();
    if (t.length > QUOTE_MAX) out.add(t);
  };
  add(ctx.path);
  for (const seg of ctx.path.split('/')) {
    add(seg);
    try { add(decodeURIComponent(seg)); } catch { /* not percent-encoded UTF-8: quoted as sent */ }
  }
  for (const v of [...Object.values(ctx.query), ...Object.values(ctx.headers)]) for (const x of [v].flat()) add(x);
  const stack: unknown[] = [ctx.request.body];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === 'string') add(v);
    else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        add(k);
        stack.push(x);
      }
    }
  }
  return [...out].sort((a, b) => b.length - a.length).slice(0, MAX_INPUTS);
}

/**
 * boundQuotes is an error body whose strings (values and keys, at any depth) repeat at most QUOTE_MAX characters of
 * each long input of the request, and are at most STRING_MAX long: a 422 for a 10 KB id names the field and shows
 * the id's start, not the whole id. NOTE: it works on what the request sent, not on the errors' wording, so every
 * error of every layer is bounded here, once, and no message written by the service itself is cut.
 */
function boundQuotes<T>(ctx: Context, body: T): T {
  const inputs = longInputs(ctx);
  const bound = (s: string) => {
    let out = s;
    for (const input of inputs) if (out.includes(input)) out = out.split(input).join(clip(input));
    return clip(out, STRING_MAX);
  };
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return bound(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== 'object') return v;
    // NOTE: the body goes out as JSON, so a value with toJSON (a Date) is bounded as it will be written.
    if (typeof (v as { toJSON?: unknown }).toJSON === 'function') return walk((v as { toJSON: () => unknown }).toJSON());
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [bound(k), walk(x)]));
  };
  return walk(body) as T;
}

/** toServiceError turns anything thrown into a typed error; an untyped one is a 500 and a bug. */
export function toServiceError(err: unknown): ServiceError | undefined {
  if (err instanceof ServiceError) return err;
  const e = err as { status?: number; type?: string; message?: string };
  // NOTE: body-parsing errors from co-body carry a status and a type instead of a class.
  if (e?.status === 413 || e?.type === 'entity.too.large') return new PayloadTooLargeError('request body is larger than 1 MiB', 'body_too_large');
  if (e?.status === 400 || e?.type === 'entity.parse.failed') return new InputError(`malformed JSON body: ${e.message ?? 'cannot be decoded'}`, 'malformed_json');
  if (e?.status === 415) return new UnsupportedMediaTypeError('request body must be JSON', 'unsupported_media_type');
  if (isRedisOutage(err)) return new UnavailableError('the store (Redis) does not answer; retry shortly', 'dependency_unavailable', { dependency: 'redis' });
  return undefined;
}

/**
 * isRedisOutage recognizes ioredis's errors for a Redis it cannot reach (retries exhausted, connection closed or
 * refused), and the answers of a Redis Cluster or Sentinel set between a master's loss and its replica's promotion
 * (CLUSTERDOWN, TRYAGAIN, READONLY from a demoted master, LOADING, MASTERDOWN, no reachable sentinel or seed):
 * a dependency outage is a 503 the caller can retry, not a 500.
 */
export function isRedisOutage(err: unknown): boolean {
  const e = err as { name?: string; message?: string; code?: string };
  return ['MaxRetriesPerRequestError', 'ClusterAllFailedError'].includes(e?.name ?? '')
    || ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'].includes(e?.code ?? '')
    || /^(Connection is closed|Stream isn't writeable|None of startup nodes is available|Cluster isn't ready|Too many Cluster redirections|All sentinels are unreachable|Failed to refresh slots cache)/.test(e?.message ?? '')
    // NOTE: a script's error carries the Redis error after its own words ("ERR Error running script ...: READONLY").
    || /\b(CLUSTERDOWN|TRYAGAIN|READONLY|LOADING|MASTERDOWN|NOREPLICAS|UNBLOCKED)\b/.test(e?.message ?? '');
}

/**
 * errorMiddleware is the one place errors become responses: typed errors map to their status and the
 * family body, an unmatched route or method gets a JSON 404/405, and anything else is a logged 500.
 */
export function errorMiddleware(logger: Logger) {
  return async (ctx: Context, next: Next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new NotFoundError(`no route for ${ctx.method} ${ctx.path}`, 'route_not_found', { method: ctx.method, path: ctx.path });
      }
      if (ctx.status === 405 && ctx.body === undefined) {
        const render = isMemoryPath(ctx.path) ? memoryErrorBody : errorBody;
        ctx.body = boundQuotes(ctx, render(405, 'method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}`, { allow: ctx.response.get('Allow') }));
      }
    } catch (err) {
      const typed = toServiceError(err);
      if (err instanceof ToolError) {
        // NOTE: the tools family has its own body; messages are fixed safe strings.
        ctx.status = err.status;
        ctx.body = boundQuotes(ctx, { error: { code: err.code, details: err.details, layer: err.layer, message: err.message, reason_codes: err.reasonCodes, tool_id: err.toolId } });
      } else if (typed && isMemoryPath(ctx.path)) {
        // NOTE: the memory family's body is `{code, message, details}` for every error of its routes, another layer's
        // (authentication, roles, the body rule, an unknown field's 422) included, each with its own status.
        ctx.status = typed.status;
        ctx.body = boundQuotes(ctx, memoryErrorBody(typed.status, typed.code, typed.message, typed.evidence));
        if (typed.status === 401 && !ctx.response.get('WWW-Authenticate')) ctx.set('WWW-Authenticate', 'Bearer');
        if (typed.status === 503) ctx.set('Retry-After', '1');
        if (typed.status === 429) ctx.set('Retry-After', String(Math.max(1, Math.ceil(Number(typed.evidence.retry_after_ms ?? 1000) / 1000))));
      } else if (typed) {
        ctx.status = typed.status;
        ctx.body = boundQuotes(ctx, errorBody(typed.status, typed.code, typed.message, typed.evidence));
        // NOTE: RFC 6750 (and the MCP authorization spec for /api/agent/mcp): a 401 names the scheme it wants.
        if (typed.status === 401 && !ctx.response.get('WWW-Authenticate')) ctx.set('WWW-Authenticate', 'Bearer');
        if (typed.status === 503) ctx.set('Retry-After', '1');
        if (typed.status === 429) ctx.set('Retry-After', String(Math.max(1, Math.ceil(Number(typed.evidence.retry_after_ms ?? 1000) / 1000))));
      } else {
        logger.error({ err, method: ctx.method, path: ctx.path }, 'unhandled error');
        ctx.status = 500;
        ctx.body = errorBody(500, 'internal_error', 'internal error; see the service log');
      }
    }
  };
}
