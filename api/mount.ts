import type Router from '@koa/router';
import type { Middleware } from 'koa';
import compose from 'koa-compose';

// NOTE: path-to-regexp's syntax characters: a layer's path up to the first of them is matched literally.
const SYNTAX = /[:*{}()[\]?+!\\]/;

/**
 * literalPrefixes is, for each route of a router, the part of its path a request path must start with
 * (lower-cased, as routes match without case), or undefined when some route could match any path (a RegExp
 * path, a path-less middleware layer, a host or routerPath option, not-found handlers): such a router is walked
 * for every request.
 */
function literalPrefixes(r: Router): string[] | undefined {
  const router = r as unknown as { host?: unknown; opts: { routerPath?: unknown }; stack: { path: unknown; opts: { pathAsRegExp?: boolean } }[]; _events?: { _handlers?: Map<unknown, unknown[]> } };
  if (router.host || router.opts.routerPath) return undefined;
  for (const handlers of router._events?._handlers?.values() ?? []) if (handlers.length) return undefined;
  const out = new Set<string>();
  for (const layer of router.stack) {
    if (typeof layer.path !== 'string' || layer.opts.pathAsRegExp) return undefined;
    const cut = layer.path.search(SYNTAX);
    const literal = (cut < 0 ? layer.path : layer.path.slice(0, cut)).replace(/\/+$/, '').toLowerCase();
    if (!literal) return undefined;
    out.add(literal);
  }
  return [...out];
}

/**
 * mountRouters serves the routers as `app.use(r.routes()).use(r.allowedMethods())` for each in order would, but a
 * request walks only the routers with a route whose literal start its path has (the first router when none has),
 * and one allowedMethods, outermost. A skipped router could not have matched the path, so it would only have
 * passed the request on; and every router's allowedMethods answers 405, 501 and OPTIONS from the same matches
 * (ctx.matched, gathered by every router walked), so the first to see them decides and the others pass: one is
 * enough. The router list is read again whenever it grew, so routers pushed after this call are served too.
 */
export function mountRouters(routers: Router[]): Middleware {
  let plan: { size: number; prefixes: (string[] | undefined)[]; chains: Map<string, Middleware>; all?: Middleware } | undefined;
  const build = () => {
    const methods = JSON.stringify((routers[0] as unknown as { methods?: string[] })?.methods);
    // NOTE: skipping relies on every router answering 405/501 alike; otherwise every router is walked.
    const uniform = routers.every((r) => JSON.stringify((r as unknown as { methods?: string[] }).methods) === methods);
    return {
      size: routers.length,
      prefixes: routers.map((r) => literalPrefixes(r)),
      chains: new Map<string, Middleware>(),
      all: uniform ? undefined : compose(routers.flatMap((r) => [r.routes(), r.allowedMethods()]) as Middleware[]),
    };
  };
  return (ctx, next) => {
    if (plan?.size !== routers.length) plan = build();
    if (plan.all) return plan.all(ctx, next);
    const p = plan;
    const path = ctx.path.toLowerCase();
    let key = '';
    for (const prefixes of p.prefixes) key += !prefixes || prefixes.some((x) => path.startsWith(x)) ? '1' : '0';
    if (!key.includes('1')) key = `1${key.slice(1)}`;
    let chain = p.chains.get(key);
    if (!chain) {
      chain = compose([routers[0].allowedMethods(), ...routers.filter((_, i) => key[i] === '1').map((r) => r.routes())] as Middleware[]);
      if (p.chains.size < 256) p.chains.set(key, chain);
    }
    return chain(ctx, next);
  };
}
