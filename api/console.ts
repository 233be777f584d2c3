import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Context, Next } from 'koa';
import { NotFoundError } from '../store/errors.ts';

/** CONSOLE_DIR is where `vite build` (api/console/vite.config.ts) writes the web console; `npm run build` copies it beside the compiled api/. */
export const CONSOLE_DIR = fileURLToPath(new URL('./console/dist/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml', '.png': 'image/png', '.ico': 'image/x-icon', '.json': 'application/json', '.map': 'application/json',
  '.txt': 'text/plain; charset=utf-8', '.woff2': 'font/woff2',
};

/**
 * isServicePath tells the service's own paths, which the console never answers whatever the method: `/api`, the
 * probes, `/metrics`, and `/.well-known/` (a client looking for OAuth or other metadata gets the API's 404 JSON, not
 * the console's page). NOTE: without case and with repeated slashes collapsed, as a router may match them: any
 * spelling of an API path gets the API's answer, never the page.
 */
function isServicePath(path: string): boolean {
  const p = path.toLowerCase().replace(/\/{2,}/g, '/');
  return p === '/api' || p.startsWith('/api/') || p.startsWith('/.well-known/') || p === '/healthz' || p === '/readyz' || p === '/metrics';
}

/** The page's own rules: scripts and connections only to this origin, never framed (clickjacking). */
const PAGE_HEADERS = {
  'Content-Security-Policy': "default-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
};

/** ASSETS is Vite's `build.assetsDir` (api/console/vite.config.ts): content-hashed files only, no client routes. */
const ASSETS = '/assets/';

/**
 * consoleAssets serves the built web console at `/` (same origin as the API, so browserSafety's origin rule admits
 * its requests). Only GET and HEAD: a path is a file only when that file exists under CONSOLE_DIR; Vite's
 * content-hashed `/assets/*` are cached for a year (immutable), everything else is revalidated. Every other path
 * is a client route (`/resources/automation.job/w1.x` as well as `/resources/agent/x`) and gets index.html,
 * except under `/assets/`, where a missing file is passed on (a stale page asking for an old hash gets the API's
 * 404, not HTML it would try to run). `/api/*`, `/healthz`, `/readyz` and `/metrics` are passed on untouched.
 * NOTE: whether a path "looks like a file" (has an extension) decides nothing: record ids and kinds contain dots.
 * NOTE: mounted before authentication: the assets hold no data (the page asks for a token in `token` mode and
 * sends it on every API call it makes).
 */
export function consoleAssets(dir: string = CONSOLE_DIR) {
  const root = path.resolve(dir);
  return async (ctx: Context, next: Next) => {
    if ((ctx.method !== 'GET' && ctx.method !== 'HEAD') || isServicePath(ctx.path)) return next();
    let rel: string;
    try {
      rel = decodeURIComponent(ctx.path);
    } catch {
      return next();
    }
    rel = path.posix.normalize(rel);
    const file = path.resolve(root, `.${rel}`);
    if (file !== root && !file.startsWith(root + path.sep)) return next();
    const hashed = rel.startsWith(ASSETS);
    const found = await fileAt(file === root ? path.join(root, 'index.html') : file);
    if (!found && hashed) return next();
    const target = found ?? await fileAt(path.join(root, 'index.html'));
    if (!target) throw new NotFoundError('the web console is not built: run `make deps` (or `npm run build:console`)', 'console_not_built');
    const ext = path.extname(target.path);
    ctx.set('Cache-Control', hashed ? 'public, max-age=31536000, immutable' : 'no-cache');
    ctx.set('X-Content-Type-Options', 'nosniff');
    if (ext === '.html') ctx.set(PAGE_HEADERS);
    ctx.type = TYPES[ext] ?? 'application/octet-stream';
    ctx.length = target.size;
    ctx.lastModified = target.mtime;
    ctx.status = 200;
    if (ctx.fresh) {
      ctx.status = 304;
      return;
    }
    // NOTE: a HEAD answer is its headers (Koa sends no body), so no file is opened for it.
    if (ctx.method === 'GET') ctx.body = createReadStream(target.path);
  };
}

/** fileAt is the regular file at `p` with its size and mtime, or undefined. */
async function fileAt(p: string): Promise<{ path: string; size: number; mtime: Date } | undefined> {
  try {
    const s = await stat(p);
    return s.isFile() ? { path: p, size: s.size, mtime: s.mtime } : undefined;
  } catch {
    return undefined;
  }
}
