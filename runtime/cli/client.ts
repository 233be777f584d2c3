import { ApiError, UnreachableError } from './errors.ts';

/** Endpoint is where svcctl talks to and how it authenticates (see config.ts). */
export interface Endpoint {
  server: string;
  token?: string;
}

/** Reply is a JSON answer: status, parsed body (undefined when empty) and headers. */
export interface Reply<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

/**
 * ApiClient is svcctl's HTTP client of the service's JSON API. It never imports api/: it speaks HTTP only. Any
 * failure to get an answer is an UnreachableError (exit 3); statuses are returned, and `ok()` turns one ≥ 400
 * into an ApiError.
 */
export class ApiClient {
  readonly base: string;

  constructor(private readonly ep: Endpoint) {
    this.base = ep.server.replace(/\/+$/, '');
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { accept: 'application/json', ...(this.ep.token ? { authorization: `Bearer ${this.ep.token}` } : {}), ...extra };
  }

  /** raw sends a request and returns the fetch Response (streams use it). */
  async raw(method: string, path: string, init: { body?: unknown; headers?: Record<string, string>; signal?: AbortSignal } = {}): Promise<Response> {
    const hasBody = init.body !== undefined;
    try {
      return await fetch(this.base + path, {
        method,
        headers: this.headers({ ...(hasBody ? { 'content-type': 'application/json' } : {}), ...init.headers }),
        body: hasBody ? JSON.stringify(init.body) : undefined,
        signal: init.signal,
      });
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err;
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new UnreachableError(`cannot reach ${this.base}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
    }
  }

  async call<T = any>(method: string, path: string, body?: unknown): Promise<Reply<T>> {
    const res = await this.raw(method, path, { body });
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      throw new UnreachableError(`${this.base}: connection lost reading ${method} ${path}: ${(err as Error).message}`);
    }
    let parsed: any = undefined;
    try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = text; }
    return { status: res.status, body: parsed, headers: res.headers };
  }

  /** ok returns the body of a 2xx answer, else throws an ApiError naming the request. */
  async ok<T = any>(method: string, path: string, body?: unknown): Promise<T> {
    const r = await this.call<T>(method, path, body);
    if (r.status >= 400) throw new ApiError(r.status, r.body, `${method} ${path}`);
    return r.body;
  }

  get<T = any>(path: string) { return this.ok<T>('GET', path); }
}

/** enc encodes one path segment. */
export const enc = encodeURIComponent;
