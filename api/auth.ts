import type Router from '@koa/router';
import type { Context, Middleware, Next } from 'koa';
import type { Logger } from 'pino';
import { ROLES, type Authenticator, type Principal, type Role } from '../runtime/process/auth.ts';
import { ForbiddenError, UnauthorizedError } from '../store/errors.ts';

/**
 * RouteAccess is who may call a route: a role (the least one), `public` (probes and metrics), `session` (agent
 * routes: the handler checks the per-session token) or `signature` (webhook deliveries: the handler checks the
 * HMAC signature).
 */
export type RouteAccess = Role | 'public' | 'session' | 'signature';

const ACCESS = Symbol('route access');

/**
 * requires declares a route's access where the route is defined, placed among its middleware:
 * `router.put(name, path, requires('admin'), …)`. A route without it takes its method's default: reads (GET, HEAD)
 * need reader, every other method operator.
 */
export function requires(access: RouteAccess): Middleware {
  const marker: Middleware = (_ctx, next) => next();
  return Object.assign(marker, { [ACCESS]: access });
}

/** RouteLayer is what the gate reads of a router's layer. */
interface RouteLayer {
  methods: string[];
  stack: Middleware[];
}

/** accessOf is the access a route declared, or its method's default. */
export function accessOf(layer: RouteLayer): RouteAccess {
  for (const m of layer.stack) if (ACCESS in m) return (m as unknown as Record<symbol, RouteAccess>)[ACCESS];
  return layer.methods.every((m) => m === 'GET' || m === 'HEAD') ? 'reader' : 'operator';
}

const guarded = new WeakSet<RouteLayer>();

/**
 * guardRoutes puts the check of each route's own access first in that route's middleware. NOTE: the role belongs
 * to the route that matched, not to the request's path: a path is matched without case, with encoded characters
 * and trailing slashes, so any rule on the path's spelling has a spelling it misses; a handler runs only after the
 * check of its own route. A caller's token is checked once per request (ctx.state.principal).
 */
export function guardRoutes(routers: Router[], authenticator: Authenticator, logger: Logger): void {
  for (const router of routers) {
    for (const layer of router.stack as unknown as RouteLayer[]) {
      if (!layer.methods.length || guarded.has(layer)) continue;
      guarded.add(layer);
      const access = accessOf(layer);
      if (access === 'public' || access === 'session' || access === 'signature') continue;
      layer.stack.unshift(roleCheck(access, authenticator, logger));
    }
  }
}

function roleCheck(need: Role, authenticator: Authenticator, logger: Logger): Middleware {
  return async (ctx: Context, next: Next) => {
    const principal: Principal = ctx.state.principal ?? (ctx.state.principal = await authenticate(ctx, authenticator, logger));
    if (!principal.role || ROLES.indexOf(principal.role) < ROLES.indexOf(need)) {
      throw new ForbiddenError(`${principal.name} (${principal.role ?? 'no role'}) may not ${ctx.method} ${ctx.path}; it needs ${need}`, 'forbidden', { required_role: need });
    }
    return next();
  };
}

/** authenticate turns the request's bearer token into a principal. NOTE: a token never reaches a log line or an error. */
async function authenticate(ctx: Context, authenticator: Authenticator, logger: Logger): Promise<Principal> {
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
  return principal;
}
