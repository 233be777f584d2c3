import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { AutomationRun, AutomationStore } from '../../store/automation-store.ts';
import { ConflictError, NotFoundError, ServiceError, UnauthorizedError, UnavailableError } from '../../store/errors.ts';
import type { ResourceRecord } from '../../store/types.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import type { WorkspaceService } from '../workspaces/workspace-service.ts';
import type { AutomationService } from './automation-service.ts';
import { webhookIdOf, type OwnerSpec } from './runs.ts';
import { renderTemplate } from './template.ts';

/** The headers a webhook sender signs with (the original's X-AGH-Webhook-* under this service's prefix). */
export const TIMESTAMP_HEADER = 'x-svc-webhook-timestamp';
export const SIGNATURE_HEADER = 'x-svc-webhook-signature';
export const DELIVERY_HEADER = 'x-svc-webhook-delivery-id';
/** MAX_SKEW_S is how far a delivery's timestamp may be from now, either way (older than 5 minutes is 401). */
export const MAX_SKEW_S = 300;
/** A signature is remembered this long (longer than the window in which its timestamp is accepted). */
const REPLAY_TTL_MS = 2 * MAX_SKEW_S * 1000 + 60_000;
/**
 * UNVERIFIED_LIMIT is the budget of deliveries that fail verification (bad or missing signature or timestamp) per
 * source address, across endpoints: beyond it they are 429 instead of 401. It is apart from an endpoint's budget, so
 * bad deliveries never use up what the endpoint's real sender may send.
 */
export const UNVERIFIED_LIMIT = { max: 10, windowMs: 60_000 };

/** signWebhook is the signature a sender puts in X-SVC-Webhook-Signature: `sha256=` + hex HMAC-SHA256 of `<timestamp>.<body>`. */
export function signWebhook(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** RateLimitedError is a webhook endpoint over its rate: 429 with Retry-After. */
export class RateLimitedError extends ServiceError {
  readonly status = 429;
  constructor(message: string, readonly retryAfterS: number) {
    super(message, 'webhook_rate_limited', { retry_after_seconds: retryAfterS });
  }
}

/** WebhookDelivery is one POST to a webhook endpoint, as the route read it. */
export interface WebhookDelivery {
  /** The workspace of a `/api/webhooks/workspaces/{ws}/{endpoint}` delivery; undefined for the global one. */
  workspace?: string;
  endpoint: string;
  timestamp?: string;
  signature?: string;
  deliveryId?: string;
  /** The address the delivery came from (its own budget of failed verifications). */
  source: string;
  /** The body exactly as sent (what the signature covers). */
  rawBody: string;
  payload: unknown;
}

/** WebhookReceiverOptions configures a WebhookReceiver. */
export interface WebhookReceiverOptions {
  automation: AutomationService;
  store: AutomationStore;
  workspaces: WorkspaceService;
  security: SecurityPolicy;
  /** Verified deliveries accepted per endpoint per window (429 beyond). */
  rateLimit: { max: number; windowMs: number };
  /** Deliveries that fail verification per source address per window (401 within, 429 beyond); UNVERIFIED_LIMIT by default. */
  unverifiedLimit?: { max: number; windowMs: number };
}

/**
 * WebhookReceiver turns a signed delivery into a webhook run: it finds the enabled webhook
 * trigger by endpoint (`endpoint_slug` or `webhook_id`) and scope, checks the timestamp (±5 minutes) and the
 * HMAC-SHA256 signature with the secret of `webhook_secret_ref`, refuses a signature seen before (409, SET NX with a
 * TTL), rate-limits the endpoint, and records and queues the run.
 *
 * NOTE: only verified deliveries count against the endpoint's rate limit; one that fails verification counts
 * against its source address's own budget (UNVERIFIED_LIMIT). Counting before the check let anyone who knew an
 * endpoint's URL spend its budget with unsigned requests and block the real sender. A replayed
 * delivery is refused before it is counted too: whoever saw one signed delivery must not block the endpoint with it.
 */
export class WebhookReceiver {
  constructor(private readonly o: WebhookReceiverOptions) {}

  async accept(d: WebhookDelivery): Promise<AutomationRun> {
    const ws = d.workspace ? await this.o.workspaces.get(d.workspace) : undefined;
    const trigger = await this.find(d.endpoint, ws?.id);
    const spec = trigger.spec as OwnerSpec;
    const secret = await this.secret(spec.webhook_secret_ref ?? '');
    const failure = verify(secret, d);
    if (failure) {
      const { max, windowMs } = this.o.unverifiedLimit ?? UNVERIFIED_LIMIT;
      const wait = await this.o.store.rateLimit(`webhook-unverified:${d.source}`, max, windowMs);
      if (wait > 0) throw new RateLimitedError(`too many webhook deliveries that fail verification from ${d.source}`, Math.ceil(wait / 1000));
      throw failure;
    }
    const sigHash = createHash('sha256').update(d.signature!).digest('hex').slice(0, 32);
    const replay = `replay:${trigger.id}:${sigHash}`;
    const replayed = () => new ConflictError('this delivery (signature) was accepted before', 'webhook_replayed', { trigger_id: trigger.id });
    if (await this.o.store.claimed(replay)) throw replayed();
    const wait = await this.o.store.rateLimit(`webhook:${trigger.id}`, this.o.rateLimit.max, this.o.rateLimit.windowMs);
    if (wait > 0) throw new RateLimitedError(`webhook endpoint "${d.endpoint}" is over its rate limit`, Math.ceil(wait / 1000));
    if (!(await this.o.store.claimOnce(replay, REPLAY_TTL_MS))) throw replayed();
    const workspaceId = ws?.id ?? '';
    const ctx = { type: 'webhook', event: 'webhook', payload: d.payload, data: { payload: d.payload }, endpoint: d.endpoint, workspace_id: workspaceId, delivery_id: d.deliveryId ?? '', timestamp: d.timestamp };
    return this.o.automation.fireWebhook(trigger, `wh.${trigger.id}.${sigHash}`, workspaceId, renderTemplate(spec.prompt ?? '', ctx));
  }

  /** find is the enabled webhook trigger of an endpoint in a scope; anything else is 404 (the endpoint says nothing more). */
  private async find(endpoint: string, workspaceId: string | undefined): Promise<ResourceRecord> {
    const all = await this.o.automation.records('automation.trigger', workspaceId);
    const hit = all.find((r) => {
      const s = r.spec as OwnerSpec;
      if (s.event !== 'webhook' || !s.enabled) return false;
      if (workspaceId ? r.scope.kind !== 'workspace' : r.scope.kind !== 'global') return false;
      return s.endpoint_slug === endpoint || webhookIdOf(r.id, s) === endpoint;
    });
    if (!hit) throw new NotFoundError(`no enabled webhook trigger at "${endpoint}"`, 'webhook_not_found', { endpoint });
    return hit;
  }

  /**
   * secret resolves `webhook_secret_ref`: `env:NAME` under SECRET_ENV_ALLOWLIST or `vault:automation/…`. A ref
   * that does not resolve (outside the allowlist, unset, no such vault secret) is the service's misconfiguration,
   * not the sender's: 503, and the value or the reason never reaches the response.
   */
  private async secret(ref: string): Promise<string> {
    const r = await this.o.security.secrets.resolve({ WEBHOOK_SECRET: ref });
    const value = r.env.WEBHOOK_SECRET;
    if (!value) throw new UnavailableError('the webhook secret of this endpoint cannot be resolved on the service', 'webhook_secret_unavailable');
    return value;
  }
}

/** verify checks a delivery's timestamp (within MAX_SKEW_S of now) and signature: the 401 to answer, or undefined when both hold. */
function verify(secret: string, d: WebhookDelivery): UnauthorizedError | undefined {
  if (!d.timestamp || !/^\d+$/.test(d.timestamp) || Math.abs(Date.now() / 1000 - Number(d.timestamp)) > MAX_SKEW_S) {
    return new UnauthorizedError(`${TIMESTAMP_HEADER} must be the unix time in seconds, within ${MAX_SKEW_S} s of now`, 'webhook_timestamp_invalid');
  }
  const want = Buffer.from(signWebhook(secret, d.timestamp, d.rawBody));
  const got = Buffer.from(d.signature ?? '');
  if (got.length !== want.length || !timingSafeEqual(got, want)) {
    return new UnauthorizedError(`${SIGNATURE_HEADER} does not match the body and timestamp`, 'webhook_signature_invalid');
  }
  return undefined;
}
