import { failureOf, type EgressPolicy } from '../security/egress.ts';

/**
 * ErrorClass names why a source or a download failed, as a page's `error_class` and a refresh's outcome show it:
 * a client can tell a registry that is down from one that answers nonsense, and both from a destination the
 * egress rule refuses (`egress_denied`: runtime/security/egress.ts).
 */
export type ErrorClass = 'timeout' | 'unreachable' | 'egress_denied' | 'http_status' | 'too_large' | 'invalid_response' | 'not_configured';

/** SourceError is a failed read of a source or an archive, with its class. */
export class SourceError extends Error {
  constructor(readonly errorClass: ErrorClass, message: string, readonly status = 0) {
    super(message);
    this.name = 'SourceError';
  }
}

/** BoundedResponse is a fully read response body. */
export interface BoundedResponse { status: number; headers: Headers; body: Buffer }

/** FetchBoundedOptions bound one download: its time, its size, its headers, and the egress rule it passes. */
export interface FetchBoundedOptions { timeoutMs: number; maxBytes: number; headers?: Record<string, string>; egress: EgressPolicy }

/**
 * fetchBounded GETs a URL through the egress rule (each redirect hop is a connection it checks again) and reads its
 * whole body, refusing more than `maxBytes` (by Content-Length before reading, and by counting while reading, since
 * a server may lie or send none) and giving up after `timeoutMs` for the whole exchange. A status other than 2xx or
 * 304 is an `http_status` error; the body of such an answer is never read.
 */
export async function fetchBounded(url: string, o: FetchBoundedOptions): Promise<BoundedResponse> {
  const signal = AbortSignal.timeout(o.timeoutMs);
  let res: Response;
  try {
    res = await o.egress.fetch(url, { headers: { 'user-agent': 'agent-runtime-control-service', accept: 'application/json, */*', ...o.headers }, signal, redirect: 'follow' });
  } catch (err) {
    throw classify(err, url, o.timeoutMs);
  }
  if (res.status === 304) return { status: 304, headers: res.headers, body: Buffer.alloc(0) };
  if (res.status < 200 || res.status > 299) {
    await res.body?.cancel().catch(() => undefined);
    throw new SourceError('http_status', `GET ${safeUrl(url)} answered ${res.status} (http_status)`, res.status);
  }
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > o.maxBytes) {
    await res.body?.cancel().catch(() => undefined);
    throw new SourceError('too_large', `GET ${safeUrl(url)} is ${declared} bytes; the limit is ${o.maxBytes}`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res.body ?? []) {
      size += chunk.length;
      if (size > o.maxBytes) {
        await res.body?.cancel().catch(() => undefined);
        throw new SourceError('too_large', `GET ${safeUrl(url)} sent more than ${o.maxBytes} bytes`);
      }
      chunks.push(Buffer.from(chunk));
    }
  } catch (err) {
    if (err instanceof SourceError) throw err;
    throw classify(err, url, o.timeoutMs);
  }
  return { status: res.status, headers: res.headers, body: Buffer.concat(chunks, size) };
}

/** fetchJson is fetchBounded for a JSON document; a body that is not JSON is `invalid_response`. */
export async function fetchJson(url: string, o: FetchBoundedOptions): Promise<{ status: number; headers: Headers; json: unknown }> {
  const res = await fetchBounded(url, o);
  if (res.status === 304) return { status: 304, headers: res.headers, json: undefined };
  try {
    return { status: res.status, headers: res.headers, json: JSON.parse(res.body.toString('utf8')) };
  } catch {
    throw new SourceError('invalid_response', `GET ${safeUrl(url)} did not answer JSON`);
  }
}

/** safeUrl drops a URL's credentials and query before it reaches an error, a log or a page (a token may sit there). */
export function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}

/**
 * classify words a transport failure by its class. NOTE: never the errno code or the cause's text: a page any
 * reader sees would otherwise tell which ports of a host answer.
 */
function classify(err: unknown, url: string, timeoutMs: number): SourceError {
  const failure = failureOf(err);
  if (failure === 'timeout') return new SourceError('timeout', `GET ${safeUrl(url)} took longer than ${timeoutMs} ms`);
  if (failure === 'egress_denied') return new SourceError('egress_denied', `GET ${safeUrl(url)} refused: egress_denied (a private, loopback or link-local address EGRESS_ALLOWLIST does not list)`);
  return new SourceError('unreachable', `GET ${safeUrl(url)} failed: the connection could not be made`);
}
