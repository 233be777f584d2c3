import type Router from '@koa/router';
import type { Middleware } from 'koa';
import { InputError } from '../store/errors.ts';

/**
 * takesBody marks a route that reads a request body, placed before its handler:
 * `router.post(name, path, takesBody, handler)`. Every route without it takes none (bodyRule), and the OpenAPI
 * document describes a request body for exactly the marked routes (api/openapi.ts).
 */
export const takesBody: Middleware = (_ctx, next) => next();

/** RouteLayer is what bodyRule and the OpenAPI document read of a router's layer. */
interface RouteLayer {
  methods: string[];
  stack: unknown[];
}

/** routeTakesBody tells whether a route is marked with takesBody. */
export function routeTakesBody(layer: RouteLayer): boolean {
  return layer.stack.includes(takesBody);
}

/** isEmptyBody is true for no body and for `{}`: what the body parser sets when nothing (or `{}`) was sent. */
function isEmptyBody(body: unknown): boolean {
  if (body === undefined) return true;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return false;
  for (const _ in body) return false;
  return true;
}

/** routeOf is the route that serves a method and path: the first one matched, in the order the routers are walked. */
function routeOf(routers: Router[], path: string, method: string): RouteLayer | undefined {
  for (const r of routers) {
    const layers = r.match(path, method).pathAndMethod as unknown as RouteLayer[];
    const route = layers.find((l) => l.methods.length > 0);
    if (route) return route;
  }
  return undefined;
}

/**
 * bodyRule refuses, with 400 `body_not_allowed` before any handler runs, a body other than none or `{}` sent to a
 * route that takes none (one not marked with takesBody), so `DELETE /api/workspaces/{id}` with `[1,2]` deletes
 * nothing instead of ignoring the body. NOTE: it fails closed: a new route that reads a body must say so, or its
 * first test meets this 400; a route that forgot would otherwise silently ignore what a client meant to send.
 * Only requests with a body pay for the route lookup; an unmatched one is left to the routers' 404 or 405.
 */
export function bodyRule(routers: Router[]): Middleware {
  return (ctx, next) => {
    if (isEmptyBody(ctx.request.body)) return next();
    const route = routeOf(routers, ctx.path, ctx.method);
    if (route && !routeTakesBody(route)) {
      throw new InputError(`${ctx.method} ${ctx.path} takes no request body: send none or {}`, 'body_not_allowed', { body: 'must be empty or {}: this route takes no body' });
    }
    return next();
  };
}
