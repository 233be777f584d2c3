import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import { ROLES, type Authenticator, type Role } from '../runtime/process/auth.ts';
import { ForbiddenError, UnauthorizedError } from '../store/errors.ts';

const OPEN = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * requiredRole is the least role a request needs: reads need reader, writes operator; the vault's reads (metadata
 * only) operator and its writes (PUT, DELETE, rotate) admin; support bundles admin; marketplace installs, updates
 * and removals admin; extension installs, updates, removals, enables and disables admin.
 */
export function requiredRole(method: string, path: string): Role {
  const read = method === 'GET' || method === 'HEAD' || method === 'OPTIONS';
  if (path === '/api/vault' || path.startsWith('/api/vault/')) return read ? 'operator' : 'admin';
  if (path.startsWith('/api/support')) return 'admin';
  // NOTE: marketplace installs run or unpack code from elsewhere on the service (issue 33).
  // NOTE: lower-cased, as routes match without case.
  const lower = path.toLowerCase();
  if (!read && (lower.startsWith('/api/skills/marketplace/') || /^\/api\/marketplace\/[^/]+\/[^/]+\/install\/?$/.test(lower))) return 'admin';
  // NOTE: an extension brings code the service runs (its daemon), so every change to one is the admin's (issue 34).
  if (!read && (lower === '/api/extensions' || lower.startsWith('/api/extensions/'))) return 'admin';
  return read ? 'reader' : 'operator';
}

/**
 * authMiddleware authenticates bearer tokens and authorizes by role. Probes and metrics stay open;
 * agent-facing routes (`/api/agent/...`) take the per-session token and check it themselves, webhook deliveries
 * (`POST /api/webhooks/...`) their signature.
 * NOTE: a token never reaches a log line, an error or a metric label; only the principal's name does.
 */
export function authMiddleware(authenticator: Authenticator, logger: Logger) {
  return async (ctx: Context, next: Next) => {
    // NOTE: webhook deliveries (POST /api/webhooks/...) carry their own credential, an HMAC signature (api/webhooks.ts).
    if (OPEN.has(ctx.path) || ctx.path.startsWith('/api/agent/') || (ctx.method === 'POST' && ctx.path.startsWith('/api/webhooks/'))) return next();
    const token = /^Bearer\s+(\S+)$/i.exec(ctx.get('Authorization'))?.[1];
    if (!token) {
      ctx.set('WWW-Authenticate', 'Bearer');
      throw new UnauthorizedError('a bearer token is required', 'unauthenticated');
    }
    let principal;
    try {
      principal = await authenticator.authenticate(token);
    } catch (err) {
      logger.error({ err: (err as Error).message }, 'token check failed');
      throw new UnauthorizedError('the token could not be checked', 'unauthenticated');
    }
    if (!principal) {
      ctx.set('WWW-Authenticate', 'Bearer error="invalid_token"');
      throw new UnauthorizedError('the bearer token is not valid', 'unauthenticated');
    }
    const need = requiredRole(ctx.method, ctx.path);
    if (!principal.role || ROLES.indexOf(principal.role) < ROLES.indexOf(need)) {
      throw new ForbiddenError(`${principal.name} (${principal.role ?? 'no role'}) may not ${ctx.method} ${ctx.path}; it needs ${need}`, 'forbidden', { required_role: need });
    }
    ctx.state.principal = principal;
    return next();
  };
}
