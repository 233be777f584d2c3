import type Router from '@koa/router';
import type { Middleware } from 'koa';
import { fieldWarnings, unknownKeys } from '../runtime/validation/field-validation.ts';
import { InputError } from '../store/errors.ts';
import { queryFieldValidation, setWarnings } from './params.ts';

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

const FIELDS = Symbol('body fields');

/**
 * bodyFields marks a route that takes a JSON object body of these top-level fields, as takesBody does, and applies
 * server-side field validation to the rest (`?field_validation`, kube-apiserver's): strict, the default, refuses an
 * unknown field with 422 naming each; warn drops it with a `Warning: 299` header each; ignore drops it silently. So a
 * typo (`{"agent":"esb"}` for `agent_name`) is never taken for an absent field. NOTE: a handler then sees only
 * known fields; what each field may hold is still its service's to check.
 */
export function bodyFields(known: readonly string[]): Middleware {
  const m: Middleware = (ctx, next) => {
    const body = ctx.request.body;
    const unknown = unknownKeys(body, known);
    if (unknown.length) {
      setWarnings(ctx, fieldWarnings(queryFieldValidation(ctx.query), unknown));
      ctx.request.body = Object.fromEntries(Object.entries(body as Record<string, unknown>).filter(([k]) => known.includes(k)));
    }
    return next();
  };
  return Object.assign(m, { [FIELDS]: known });
}

/** routeTakesBody tells whether a route is marked with takesBody or bodyFields. */
export function routeTakesBody(layer: RouteLayer): boolean {
  return layer.stack.some((m) => m === takesBody || (typeof m === 'function' && FIELDS in m));
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
