import { createHmac } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { WebhookProviderConfig } from '../../codecs/bridge-instance.ts';
import { failureOf, type EgressFailure, type EgressPolicy } from '../security/egress.ts';
import type { SecurityPolicy } from '../security/policy.ts';

/** The headers every delivery carries (documented in the README; receivers verify and dedupe with them). */
export const HEADER_IDEMPOTENCY = 'Idempotency-Key';
export const HEADER_TIMESTAMP = 'X-SVC-Timestamp';
export const HEADER_SIGNATURE = 'X-SVC-Signature';
export const HEADER_EVENT_TYPE = 'X-SVC-Event-Type';
export const HEADER_ATTEMPT = 'X-SVC-Delivery-Attempt';

/**
 * webhookSignature is the HMAC-SHA256 a receiver recomputes: over `${timestamp}.${body}` with the bridge's
 * secret, hex, sent as `X-SVC-Signature: sha256=<hex>` beside `X-SVC-Timestamp` (unix seconds).
 */
export function webhookSignature(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** INVALID_HEADER_VALUE matches what node:http refuses in a header value (its checkInvalidHeaderChar). */
const INVALID_HEADER_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** WebhookSecrets are a bridge's resolved secrets; `problem` names a ref that did not resolve (never a value). */
export interface WebhookSecrets {
  signingKey?: string;
  headers: Record<string, string>;
  problem?: string;
  /**
   * The Degraded reason of a problem: `SecretNotFound` (a vault ref with no secret), `SecretHostNotAllowed` (a
   * vault secret whose allowed_hosts does not name the url's host) or `SecretUnavailable`.
   */
  reason?: 'SecretNotFound' | 'SecretHostNotAllowed' | 'SecretUnavailable';
}

/**
 * resolveWebhookSecrets resolves a webhook bridge's refs: env: under SECRET_ENV_ALLOWLIST, vault:bridges/… from the
 * vault; a vault secret header whose allowed_hosts does not name the url's host is not resolved at all.
 */
export async function resolveWebhookSecrets(cfg: WebhookProviderConfig, security: SecurityPolicy): Promise<WebhookSecrets> {
  // NOTE: checked at each send too, not only when written: an admin may narrow a secret's hosts after the bridge.
  const headerRefs = Object.entries(cfg.secret_headers ?? {}).map(([k, ref]) => ({ path: `secret_headers.${k}`, ref }));
  const refused = await security.destinations.refusals(headerRefs, cfg.url);
  if (Object.keys(refused).length) {
    return { headers: {}, problem: Object.entries(refused).map(([k, v]) => `${k}: ${v}`).join('; '), reason: 'SecretHostNotAllowed' };
  }
  const refs: Record<string, string> = { ...(cfg.secret_headers ?? {}) };
  const SIGNING = '\u0000signing';
  if (cfg.secret_ref) refs[SIGNING] = cfg.secret_ref;
  const r = await security.secrets.resolve(refs);
  const name = (k: string) => (k === SIGNING ? 'secret_ref' : `secret_headers.${k}`);
  const vault = r.missing.filter((k) => refs[k].startsWith('vault:'));
  // NOTE: a secret sent as a header must be a valid header value; node:http would refuse the whole request.
  const unsendable = Object.keys(r.env).filter((k) => k !== SIGNING && INVALID_HEADER_VALUE.test(r.env[k]));
  const problem = vault.length ? vault.map((k) => `${name(k)}: ${r.problems[k]}`).join('; ')
    : r.refused.length ? `${r.refused.map(name).join(', ')}: not allowed by SECRET_ENV_ALLOWLIST`
    : r.missing.length ? `${r.missing.map(name).join(', ')}: the referenced variable is not set`
    : unsendable.length ? `${unsendable.map(name).join(', ')}: the secret is not a valid header value (a line break or control character)` : undefined;
  const { [SIGNING]: signingKey, ...headers } = r.env;
  return { signingKey, headers, problem, ...(problem ? { reason: vault.length ? 'SecretNotFound' as const : 'SecretUnavailable' as const } : {}) };
}

/**
 * webhookHeaders are the headers a bridge sends: its plain headers, then its resolved secret headers, a name given
 * in both (in any case) sent once with the secret's value. NOTE: the client sends header lists as they are, so
 * two spellings of one name would otherwise go out twice.
 */
export function webhookHeaders(cfg: WebhookProviderConfig, secrets: WebhookSecrets): Record<string, string> {
  const out: Record<string, string> = { ...(cfg.headers ?? {}) };
  for (const [k, v] of Object.entries(secrets.headers)) {
    for (const name of Object.keys(out)) if (name.toLowerCase() === k.toLowerCase()) delete out[name];
    out[k] = v;
  }
  return out;
}

/**
 * WebhookResponse is what a receiver answered: an HTTP status, or why there was none (status 0): the class of the
 * failure (egress.ts), or a request the client could not form (`invalid url`, a header node:http refuses).
 */
export interface WebhookResponse {
  status: number;
  error?: EgressFailure | string;
}

/** Endpoint is a url's request options, parsed once per url rather than once per delivery. */
interface Endpoint {
  mod: typeof http | typeof https;
  agent: http.Agent;
  host: string;
  port: string;
  path: string;
  hostHeader: string;
}

/**
 * WebhookClient sends webhook requests over keep-alive agents (Node's fetch tops out near 1,000 requests/s on
 * this machine) whose every connection passes the egress rule. It never follows redirects and never reads more
 * than a small part of a response body.
 * NOTE: the per-request work is kept small (it is most of a delivery's CPU): a url is parsed once, headers go to
 * node:http as one flat list (no per-header setHeader), and one deadline timer bounds the whole exchange.
 */
export class WebhookClient {
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: http.Agent;
  private readonly endpoints = new Map<string, Endpoint | undefined>();

  constructor(egress: EgressPolicy) {
    this.httpAgent = egress.httpAgent(false, { maxSockets: 64 });
    this.httpsAgent = egress.httpAgent(true, { maxSockets: 64 });
  }

  /** post sends one delivery; it resolves with the status or the transport error, never rejects. */
  post(url: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<WebhookResponse> {
    return this.request('POST', url, ['Content-Type', 'application/json', 'Content-Length', String(Buffer.byteLength(body))], headers, body, timeoutMs);
  }

  /** probe checks that a receiver answers (HEAD). */
  probe(url: string, headers: Record<string, string>, timeoutMs: number): Promise<WebhookResponse> {
    return this.request('HEAD', url, [], headers, undefined, timeoutMs);
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  private endpoint(url: string): Endpoint | undefined {
    if (this.endpoints.has(url)) return this.endpoints.get(url);
    let e: Endpoint | undefined;
    try {
      const u = new URL(url);
      const tls = u.protocol === 'https:';
      // NOTE: a url never carries credentials (the bridge codec refuses them), so there is no auth to send here.
      if (tls || u.protocol === 'http:') {
        e = { mod: tls ? https : http, agent: tls ? this.httpsAgent : this.httpAgent, host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: u.port, path: u.pathname + u.search, hostHeader: u.host };
      }
    } catch { /* not a url */ }
    if (this.endpoints.size >= 1000) this.endpoints.clear();
    this.endpoints.set(url, e);
    return e;
  }

  private request(method: string, url: string, own: string[], headers: Record<string, string>, body: string | undefined, timeoutMs: number): Promise<WebhookResponse> {
    return new Promise((resolve) => {
      const e = this.endpoint(url);
      if (!e) { resolve({ status: 0, error: 'invalid url' }); return; }
      // NOTE: a flat list is sent as given, so it names Host itself; the codec keeps a bridge's headers off these names.
      const list = ['Host', e.hostHeader, ...own];
      for (const k in headers) list.push(k, headers[k]);
      let deadline: NodeJS.Timeout | undefined;
      const done = (r: WebhookResponse) => { clearTimeout(deadline); resolve(r); };
      let req: http.ClientRequest;
      try {
        req = e.mod.request({ method, host: e.host, port: e.port, path: e.path, agent: e.agent, headers: list as unknown as http.OutgoingHttpHeaders }, (res) => {
          res.resume();
          res.on('end', () => done({ status: res.statusCode ?? 0 }));
          res.on('error', (err) => done({ status: res.statusCode ?? 0, error: failureOf(err) }));
        });
      } catch (err) {
        // e.g. a secret header value that is not a valid header value
        done({ status: 0, error: (err as NodeJS.ErrnoException).code ?? (err as Error).message });
        return;
      }
      // NOTE: one deadline bounds the whole exchange (connect, send, answer).
      deadline = setTimeout(() => req.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { name: 'TimeoutError' })), timeoutMs);
      req.on('error', (err) => done({ status: 0, error: failureOf(err) }));
      req.end(body);
    });
  }
}

/** healthUrlOf is where a webhook bridge's receiver is probed: its health_path on the url's origin, or the url. */
export function healthUrlOf(cfg: WebhookProviderConfig): string {
  return cfg.health_path ? new URL(cfg.health_path, new URL(cfg.url).origin).toString() : cfg.url;
}

/**
 * probeOutcome reads a probe: with a health_path the receiver must answer 2xx; probing the delivery url itself,
 * any answer below 500 shows it is up (a receiver that takes only POST may well answer HEAD with 404 or 405).
 */
export function probeOutcome(cfg: WebhookProviderConfig, res: WebhookResponse): { up: boolean; detail: string } {
  if (!res.status) return { up: false, detail: `is unreachable (${res.error ?? 'no answer'})` };
  const up = cfg.health_path ? res.status >= 200 && res.status < 300 : res.status < 500;
  return { up, detail: up ? `answered ${res.status}` : `answered ${res.status} (http_status)` };
}
