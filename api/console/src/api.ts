// The console's HTTP client: JSON calls and fetch-based server-sent events, both with the bearer token of
// `token` mode. NOTE: EventSource cannot send an Authorization header, and the service's SSE routes sit behind
// the same auth as every other route, so streams are read with fetch and eventsource-parser.
import { createParser, type EventSourceMessage } from 'eventsource-parser';

const TOKEN_KEY = 'svc-console-token';

/** token is the bearer token of `token` mode, kept in this tab's sessionStorage only. */
export const token = {
  get: (): string => sessionStorage.getItem(TOKEN_KEY) ?? '',
  set: (v: string) => sessionStorage.setItem(TOKEN_KEY, v),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

let onUnauthorized: () => void = () => undefined;
/** whenUnauthorized registers what to do on a 401 (the app shows the token form). */
export const whenUnauthorized = (f: () => void) => { onUnauthorized = f; };

export interface Answer<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

/** ApiError is a non-2xx answer with the service's `{error, diagnostic}` body. */
export class ApiError extends Error {
  constructor(readonly status: number, readonly body: any) {
    super(describeError(status, body));
  }
}

/** describeError makes one line of an error body: message, code and each failing field. */
export function describeError(status: number, body: any): string {
  const e = body?.error;
  const msg = typeof e === 'string' ? e : e?.message ?? JSON.stringify(body);
  const d = body?.diagnostic ?? (typeof e === 'object' ? e : undefined);
  const code = d?.code ?? d?.reason ?? '';
  const ev = d?.evidence && typeof d.evidence === 'object' ? Object.entries(d.evidence).map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`).join('; ') : '';
  return `${status}${code ? ` ${code}` : ''}: ${msg}${ev ? ` (${ev})` : ''}`;
}

/** authHeaders are the request headers with the bearer token (when one is kept) added. */
export function headers(extra: Record<string, string> = {}): Record<string, string> {
  const t = token.get();
  return { ...(t ? { Authorization: `Bearer ${t}` } : {}), ...extra };
}

/** api calls a JSON route; any status >= 400 throws an ApiError (401 also asks for a token). */
export async function api<T = any>(path: string, opts: { method?: string; body?: unknown } = {}): Promise<Answer<T>> {
  const res = await fetch(path, {
    method: opts.method ?? 'GET',
    headers: headers({ Accept: 'application/json', ...(opts.body !== undefined ? { 'Content-Type': 'application/json' } : {}) }),
    body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
  });
  const text = await res.text();
  let body: any = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch { /* not JSON (e.g. /metrics) */ }
  if (res.status === 401) onUnauthorized();
  if (res.status >= 400) throw new ApiError(res.status, body);
  return { status: res.status, headers: res.headers, body };
}

/** Stream is an open server-sent-events reading; close() ends it for good. */
export interface Stream {
  close(): void;
}

/**
 * stream reads an SSE route with fetch, as EventSource would: frames to `onFrame`, and after a dropped connection
 * it reconnects with `Last-Event-ID` (the last frame's id). A 204 answer ends it (the session stream's "stopped");
 * so does leaving the page.
 */
export function stream(path: string, onFrame: (m: EventSourceMessage) => void, o: { lastEventId?: string; onState?: (s: 'open' | 'closed' | 'retrying') => void } = {}): Stream {
  const abort = new AbortController();
  // NOTE: chromium does not end a page's fetch streams when it leaves or reloads the page: each stays open, and
  // after two or three reloads the six connections it allows per host are all taken by dead pages' streams and
  // the next page load waits forever. So leaving the page aborts them.
  const onHide = () => abort.abort();
  addEventListener('pagehide', onHide);
  abort.signal.addEventListener('abort', () => removeEventListener('pagehide', onHide));
  let lastId = o.lastEventId;
  const run = async () => {
    while (!abort.signal.aborted) {
      try {
        const res = await fetch(path, { headers: headers({ Accept: 'text/event-stream', ...(lastId !== undefined ? { 'Last-Event-ID': lastId } : {}) }), signal: abort.signal });
        if (res.status === 401) onUnauthorized();
        if (res.status === 204 || res.status >= 400 || !res.body) {
          o.onState?.('closed');
          return;
        }
        o.onState?.('open');
        const parser = createParser({ onEvent: (m) => { if (m.id !== undefined) lastId = m.id; onFrame(m); } });
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          parser.feed(value);
        }
      } catch {
        if (abort.signal.aborted) return;
      }
      o.onState?.('retrying');
      await new Promise((r) => setTimeout(r, 1000));
    }
  };
  // NOTE: a stream that ended by itself (204, 4xx) aborts too, which drops its pagehide listener.
  void run().finally(() => abort.abort());
  return { close: () => abort.abort() };
}
