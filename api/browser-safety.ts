import type { Context, Next } from 'koa';
import { ForbiddenError, UnsupportedMediaTypeError, ValidationError } from '../store/errors.ts';

/** BrowserSafetyOptions are the origin and host rules of the API (runtime/security/types.ts SecurityConfig). */
export interface BrowserSafetyOptions {
  allowedOrigins: readonly string[];
  allowedHosts: readonly string[];
  /** With AUTH_MODE=none the Host header must name this machine (or ALLOWED_HOSTS): DNS rebinding otherwise. */
  checkHost: boolean;
}

/** MAX_DEPTH is the deepest JSON nesting a body may have; deeper is 422 before anything walks it. */
export const MAX_DEPTH = 64;
const JSON_TYPES = ['application/json'];
const PATCH_TYPES = ['application/json', 'application/merge-patch+json'];
const ALLOW_HEADERS = 'Authorization, Content-Type, Last-Event-ID, Mcp-Session-Id, Mcp-Protocol-Version';
const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/;

/** hostName is the Host header without its port (bracketed IPv6 kept whole). */
const hostName = (host: string) => (host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:\d+$/, '')).toLowerCase();

/**
 * browserSafety refuses what a web page could make a browser send here, before any handler runs
 *: a foreign `Origin` is 403 (preflights answer only allowed origins), a
 * foreign `Host` with AUTH_MODE=none is 403 (DNS rebinding), and a body that is not JSON is 415. NOTE: a page can
 * POST `text/plain` or a form cross-site without a preflight, so the content type is what stops it, and the
 * body is never read.
 */
export function browserSafety(o: BrowserSafetyOptions) {
  return async (ctx: Context, next: Next) => {
    const host = ctx.get('Host');
    if (o.checkHost && !LOOPBACK.test(hostName(host)) && !o.allowedHosts.includes(host.toLowerCase()) && !o.allowedHosts.includes(hostName(host))) {
      throw new ForbiddenError(`host "${host}" is not served: use localhost, 127.0.0.1 or [::1], or add it to ALLOWED_HOSTS`, 'host_not_allowed', { host });
    }
    const origin = ctx.get('Origin');
    if (origin) {
      // NOTE: the service's own origin is allowed for a page it serves; the Host check above makes it trustworthy.
      if (origin !== `${ctx.protocol}://${host}` && !o.allowedOrigins.includes(origin)) {
        throw new ForbiddenError(`origin "${origin}" is not allowed; add it to ALLOWED_ORIGINS`, 'origin_not_allowed', { origin });
      }
      ctx.set('Access-Control-Allow-Origin', origin);
      ctx.vary('Origin');
      if (ctx.method === 'OPTIONS' && ctx.get('Access-Control-Request-Method')) {
        ctx.set('Access-Control-Allow-Methods', 'GET, HEAD, POST, PUT, PATCH, DELETE');
        ctx.set('Access-Control-Allow-Headers', ALLOW_HEADERS);
        ctx.set('Access-Control-Max-Age', '600');
        ctx.status = 204;
        return;
      }
    }
    const type = ctx.get('Content-Type');
    const hasBody = Boolean(ctx.get('Transfer-Encoding')) || Number(ctx.get('Content-Length') || 0) > 0;
    if (type || hasBody) {
      const allowed = ctx.method === 'PATCH' ? PATCH_TYPES : JSON_TYPES;
      const media = type.split(';')[0].trim().toLowerCase();
      if (!allowed.includes(media)) {
        throw new UnsupportedMediaTypeError(`request body must be ${allowed.join(' or ')}${type ? `, not ${media}` : ''}`, 'unsupported_media_type', { 'content-type': type || '(none)' });
      }
    }
    return next();
  };
}

/**
 * checkDepth refuses a parsed body nested deeper than MAX_DEPTH (422), walking it without recursion, so the
 * recursive walks after it (canonical JSON, digests, codecs) never meet a stack overflow.
 */
export function checkDepth(body: unknown): void {
  const stack: [unknown, number][] = [[body, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > MAX_DEPTH) throw new ValidationError(`request body nests deeper than ${MAX_DEPTH} levels`, 'body_too_deep', { body: `nests deeper than ${MAX_DEPTH} levels` });
    for (const x of Array.isArray(v) ? v : Object.values(v)) if (x !== null && typeof x === 'object') stack.push([x, depth + 1]);
  }
}
