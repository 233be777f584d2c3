import type Router from '@koa/router';
import { accessOf, type RouteAccess } from './auth.ts';
import { routeTakesBody } from './body-rule.ts';

/** RouteInfo is one method and path the API serves. */
export interface RouteInfo {
  method: string;
  path: string;
  summary: string;
  /** Whether the route reads a request body (marked with takesBody); any other route takes none. */
  takesBody: boolean;
  /** Who may call it: the least role, or public, session (agent token) or signature (webhook HMAC). */
  access: RouteAccess;
}

/** routesOf lists every route of the given routers, in OpenAPI path syntax (`{param}`). */
export function routesOf(routers: Router[]): RouteInfo[] {
  const out: RouteInfo[] = [];
  for (const router of routers) {
    for (const layer of router.stack) {
      if (typeof layer.path !== 'string') continue;
      const path = (layer.path.replace(/\/$/, '') || '/').replace(/:([A-Za-z0-9_]+)/g, '{$1}');
      for (const method of layer.methods) {
        if (method === 'HEAD') continue;
        out.push({ method: method.toLowerCase(), path, summary: layer.name ?? '', takesBody: routeTakesBody(layer), access: accessOf(layer as never) });
      }
    }
  }
  return out;
}

const errorRef = { $ref: '#/components/schemas/Error' };

/**
 * openApiDocument describes every route that exists, built from the routers themselves so it cannot drift
 * from what is served; request and response bodies are described in the README's family sections.
 */
export function openApiDocument(routers: Router[]) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routesOf(routers)) {
    const params = [...r.path.matchAll(/\{([^}]+)\}/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
    paths[r.path] ??= {};
    paths[r.path][r.method] = {
      summary: r.summary,
      operationId: `${r.method}_${r.path.replace(/[^A-Za-z0-9]+/g, '_').replace(/^_|_$/g, '')}`,
      parameters: params,
      'x-required-role': r.access,
      // NOTE: the body's fields are in the README's family sections; a route without requestBody refuses any body but {} (400).
      ...(r.takesBody ? { requestBody: { required: false, content: Object.fromEntries((r.method === 'patch' ? ['application/json', 'application/merge-patch+json'] : ['application/json']).map((t) => [t, { schema: {} }])) } } : {}),
      responses: {
        default: { description: 'error', content: { 'application/json': { schema: errorRef } } },
        '2XX': { description: 'success (JSON, or text/event-stream for watch and streams)' },
      },
    };
  }
  return {
    openapi: '3.0.3',
    info: { title: 'Agent Runtime Control Service', version: '0.1.0' },
    paths,
    components: {
      schemas: {
        Error: {
          type: 'object', required: ['error', 'diagnostic'],
          properties: {
            error: { type: 'string' },
            diagnostic: {
              type: 'object',
              properties: Object.fromEntries(['category', 'code', 'data_freshness', 'doc_url', 'id', 'message', 'severity', 'suggested_command', 'title']
                .map((k) => [k, { type: 'string' }]).concat([['evidence', { type: 'object' }]] as any)),
            },
          },
        },
      },
    },
  };
}
