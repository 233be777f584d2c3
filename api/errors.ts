import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import { ToolError } from '../runtime/tools/types.ts';
import { InputError, NotFoundError, PayloadTooLargeError, ServiceError, UnavailableError, UnsupportedMediaTypeError } from '../store/errors.ts';

/** Diagnostic is the spec's diagnostic object carried by `{error, diagnostic}` bodies. */
export interface Diagnostic {
  category: string;
  code: string;
  data_freshness: string;
  doc_url: string;
  evidence: Record<string, unknown>;
  id: string;
  message: string;
  severity: string;
  suggested_command: string;
  title: string;
}

const TITLES: Record<number, string> = {
  400: 'Bad request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not found', 405: 'Method not allowed', 409: 'Conflict', 410: 'Gone', 413: 'Payload too large',
  415: 'Unsupported media type', 422: 'Invalid content', 429: 'Too many requests', 500: 'Internal error', 503: 'Unavailable',
};
const CATEGORIES: Record<number, string> = {
  400: 'input', 401: 'auth', 403: 'auth', 404: 'not_found', 405: 'input', 409: 'conflict', 410: 'gone', 413: 'limit', 415: 'input', 422: 'validation', 429: 'rate_limit',
  500: 'internal', 503: 'dependency',
};

/** errorBody builds the `{error, diagnostic}` body most families use (spec/concepts.md, "Errors"). */
export function errorBody(status: number, code: string, message: string, evidence: Record<string, unknown> = {}) {
  const diagnostic: Diagnostic = {
    category: CATEGORIES[status] ?? 'internal', code, data_freshness: 'live', doc_url: '', evidence,
    id: `svc.${code}`, message, severity: 'error', suggested_command: '', title: TITLES[status] ?? 'Error',
  };
  return { error: message, diagnostic };
}

/** toServiceError turns anything thrown into a typed error; an untyped one is a 500 and a bug. */
function toServiceError(err: unknown): ServiceError | undefined {
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
 * refused): a dependency outage is a 503 the caller can retry, not a 500.
 */
function isRedisOutage(err: unknown): boolean {
  const e = err as { name?: string; message?: string; code?: string };
  return e?.name === 'MaxRetriesPerRequestError' || ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT'].includes(e?.code ?? '')
    || /^(Connection is closed|Stream isn't writeable)/.test(e?.message ?? '');
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
        ctx.body = errorBody(405, 'method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}`, { allow: ctx.response.get('Allow') });
      }
    } catch (err) {
      const typed = toServiceError(err);
      if (err instanceof ToolError) {
        // NOTE: the tools family has its own body (spec/concepts.md, "Errors"); messages are fixed safe strings.
        ctx.status = err.status;
        ctx.body = { error: { code: err.code, details: err.details, layer: err.layer, message: err.message, reason_codes: err.reasonCodes, tool_id: err.toolId } };
      } else if (typed) {
        ctx.status = typed.status;
        ctx.body = errorBody(typed.status, typed.code, typed.message, typed.evidence);
        // NOTE: RFC 6750 (and the MCP authorization spec for /api/agent/mcp): a 401 names the scheme it wants.
        if (typed.status === 401 && !ctx.response.get('WWW-Authenticate')) ctx.set('WWW-Authenticate', 'Bearer');
        if (typed.status === 503) ctx.set('Retry-After', '1');
      } else {
        logger.error({ err, method: ctx.method, path: ctx.path }, 'unhandled error');
        ctx.status = 500;
        ctx.body = errorBody(500, 'internal_error', 'internal error; see the service log');
      }
    }
  };
}
