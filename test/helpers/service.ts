import pino from 'pino';
import { loadConfig } from '../../runtime/process/config.ts';
import { Service } from '../../runtime/process/service.ts';

/**
 * startService runs every role in this process against the given Redis (a URL or a store env), on a free port, logging nothing to stderr
 * (TEST_LOG_LEVEL=debug shows the service's lines); warnings and errors still reach the shared log stream.
 */
export async function startService(redis: string | Record<string, string>, env: Record<string, string> = {}): Promise<Service> {
  // NOTE: a URL names one Redis; an object is a store's env (test/helpers/redis-cluster.ts: REDIS_CLUSTER_NODES).
  const config = loadConfig({ ...(typeof redis === 'string' ? { REDIS_URL: redis } : redis), PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent', RESYNC_INTERVAL: '5m', ...env });
  const service = new Service(config, pino.destination(2));
  await service.start();
  return service;
}

/** Client is a tiny JSON HTTP client for tests: it never throws on a status, it returns it. */
export class Client {
  constructor(readonly base: string) {}

  async call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any; headers: Headers }> {
    const res = await fetch(this.base + path, {
      method,
      headers: { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try { parsed = text ? JSON.parse(text) : undefined; } catch { /* not JSON */ }
    return { status: res.status, body: parsed, headers: res.headers };
  }

  get(path: string) { return this.call('GET', path); }
  put(path: string, body: unknown) { return this.call('PUT', path, body); }
  post(path: string, body: unknown) { return this.call('POST', path, body); }
  patch(path: string, body: unknown) { return this.call('PATCH', path, body); }
  delete(path: string, body?: unknown) { return this.call('DELETE', path, body); }
}

/** eventually retries an assertion until it passes or the deadline lapses (then throws its last error). */
export async function eventually<T>(fn: () => Promise<T>, timeoutMs = 15_000, stepMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, stepMs));
    }
  }
}

/** defined leaves out the built-in agents (`provider: builtin`) of an agents list: the definitions records made. */
export const defined = (agents: { provider: string }[]) => agents.filter((a) => a.provider !== 'builtin');
