import * as yup from 'yup';
import { at, check, isObject, Issues, secretRefProblem, sortedJson, str, y } from './shared.ts';
import type { Codec } from './types.ts';

/** BridgeInstanceSpec is the canonical spec of a `bridge.instance` record. */
export type BridgeInstanceSpec = Record<string, unknown>;

const shape = yup.object({
  scope: y.string(), workspace_id: y.string(), platform: y.string().required('is required'), extension_name: y.string().required('is required'),
  display_name: y.string().required('is required'), source: y.string(), enabled: y.bool(), dm_policy: y.string(),
  routing_policy: y.object().shape({ include_peer: y.bool(), include_thread: y.bool(), include_group: y.bool() }).default(undefined),
  provider_config: y.object().nullable(), delivery_defaults: y.stringMap().nullable(), notification_suppress: y.bool(),
  secret_slots: yup.array(y.object().shape({ name: y.string(), description: y.string(), required: y.bool() })),
  config_schema: y.object().shape({ schema: y.object(), version: y.string() }).default(undefined),
});

/** WEBHOOK_PROVIDER is the built-in bridge provider (extension_name and platform `webhook`): HTTP POST delivery. */
export const WEBHOOK_PROVIDER = 'webhook';

/** WebhookProviderConfig is the canonical `provider_config` of a webhook bridge. */
export interface WebhookProviderConfig {
  /** Where each notification is POSTed (http or https). */
  url: string;
  /** Extra request headers (not secret: served with the record). */
  headers?: Record<string, string>;
  /** Request headers whose values are secrets, as `env:NAME` or `vault:bridges/<path>` refs (resolved at delivery, never stored). */
  secret_headers?: Record<string, string>;
  /** `env:NAME` or `vault:bridges/<path>` of the HMAC-SHA256 key that signs each delivery (X-SVC-Signature). */
  secret_ref?: string;
  /** Path on the url's origin answered with 2xx when the receiver is up; without it the url itself is probed (HEAD). */
  health_path?: string;
}

const RESERVED_HEADERS = new Set(['content-type', 'content-length', 'host', 'connection', 'transfer-encoding', 'idempotency-key']);
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;
const SECRET_HEADER = /authorization|token|secret|password|passwd|api[-_]?key|cookie|credential|signature/i;

/**
 * webhookConfig checks the built-in webhook provider's `provider_config` and returns it canonical.
 * NOTE: a header whose name looks secret must go in secret_headers as an env: or vault: ref: plain headers are part of
 * the record, which GET /api/resources serves and the bus announces.
 */
function webhookConfig(pc: unknown, issues: Issues): WebhookProviderConfig | undefined {
  const base = 'provider_config';
  if (!isObject(pc)) {
    issues.add(base, 'is required for the webhook provider (url, headers?, secret_headers?, secret_ref?, health_path?)');
    return undefined;
  }
  for (const k of Object.keys(pc)) if (!['url', 'headers', 'secret_headers', 'secret_ref', 'health_path'].includes(k)) issues.add(at(base, k), 'is not a webhook provider field');
  const url = str(pc.url);
  let parsed: URL | undefined;
  try { parsed = new URL(url); } catch { /* reported below */ }
  if (!parsed || !['http:', 'https:'].includes(parsed.protocol)) issues.add(at(base, 'url'), 'must be an http or https URL');
  else if (parsed.username || parsed.password) issues.add(at(base, 'url'), 'must not carry credentials; use secret_headers');
  const headerMap = (key: 'headers' | 'secret_headers') => {
    const v = pc[key];
    if (v === undefined || v === null) return undefined;
    if (!isObject(v) || !Object.values(v).every((x) => typeof x === 'string')) {
      issues.add(at(base, key), 'must be an object of strings');
      return undefined;
    }
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(v as Record<string, string>)) {
      const n = name.trim();
      if (!HEADER_NAME.test(n)) issues.add(at(at(base, key), name), 'is not a valid header name');
      else if (RESERVED_HEADERS.has(n.toLowerCase()) || n.toLowerCase().startsWith('x-svc-')) issues.add(at(at(base, key), name), 'is set by the service');
      else if (key === 'headers' && SECRET_HEADER.test(n)) issues.add(at(at(base, key), name), 'looks like a secret; put an env: or vault: ref in secret_headers');
      else if (key === 'secret_headers' && secretRefProblem(value.trim(), 'bridges')) issues.add(at(at(base, key), name), secretRefProblem(value.trim(), 'bridges')!);
      else if (/[\r\n]/.test(value)) issues.add(at(at(base, key), name), 'must not contain a line break');
      out[n] = value.trim();
    }
    return Object.keys(out).length ? sortedJson(out) as Record<string, string> : undefined;
  };
  const headers = headerMap('headers');
  const secretHeaders = headerMap('secret_headers');
  const secretRef = str(pc.secret_ref);
  if (pc.secret_ref !== undefined && secretRefProblem(secretRef, 'bridges')) issues.add(at(base, 'secret_ref'), secretRefProblem(secretRef, 'bridges')!);
  const health = str(pc.health_path);
  if (pc.health_path !== undefined && !/^\/[^\s]*$/.test(health)) issues.add(at(base, 'health_path'), 'must be a path starting with /');
  return {
    url, ...(headers ? { headers } : {}), ...(secretHeaders ? { secret_headers: secretHeaders } : {}),
    ...(secretRef ? { secret_ref: secretRef } : {}), ...(health ? { health_path: health } : {}),
  };
}

/**
 * bridgeInstanceCodec validates `bridge.instance`. The one installed provider is the
 * built-in `webhook` (its platform is `webhook`; its provider_config is checked by webhookConfig). NOTE: extension
 * bridge providers are not installed in this service yet, so for any other extension_name the provider checks
 * (platform equals the provider's; secret_slots and config_schema filled from its manifest) cannot run; the shape
 * and every provider-free rule are enforced, and the controller reports that no provider delivers for it.
 */
export const bridgeInstanceCodec: Codec<BridgeInstanceSpec> = {
  kind: 'bridge.instance',
  maxBytes: 256 * 1024,
  decode(input, ctx) {
    const issues = new Issues(ctx.unknownFields);
    if (!check(shape, input, issues)) return { ok: false, errors: issues.list };
    const s = input as Record<string, any>;
    const scope = str(s.scope).toLowerCase();
    if (scope && scope !== ctx.scope.kind) issues.add('scope', `must match the record scope "${ctx.scope.kind}"`);
    const ws = str(s.workspace_id);
    if (ctx.scope.kind === 'global' && ws) issues.add('workspace_id', 'must be empty for a global scope');
    if (ctx.scope.kind === 'workspace' && ws && ws !== ctx.scope.id) issues.add('workspace_id', `must be the scope's workspace "${ctx.scope.id}"`);
    for (const f of ['platform', 'extension_name', 'display_name']) if (!str(s[f])) issues.add(f, 'is required');
    const source = str(s.source).toLowerCase() || 'dynamic';
    if (!['dynamic', 'package'].includes(source)) issues.add('source', 'must be dynamic or package');
    const dm = str(s.dm_policy).toLowerCase() || 'open';
    if (!['open', 'allowlist', 'pairing'].includes(dm)) issues.add('dm_policy', 'must be open, allowlist or pairing');
    const rp = { include_peer: Boolean(s.routing_policy?.include_peer), include_thread: Boolean(s.routing_policy?.include_thread), include_group: Boolean(s.routing_policy?.include_group) };
    if (rp.include_thread && !rp.include_peer && !rp.include_group) issues.add('routing_policy.include_thread', 'needs include_peer or include_group');
    if (isObject(s.delivery_defaults) && s.delivery_defaults.mode !== undefined && !['direct-send', 'reply'].includes(s.delivery_defaults.mode)) {
      issues.add('delivery_defaults.mode', 'must be direct-send or reply');
    }
    const slots = (s.secret_slots ?? [])
      .map((x: any) => ({ name: str(x.name), description: str(x.description), required: Boolean(x.required) }))
      .filter((x: any) => x.name || x.description)
      .sort((a: any, b: any) => a.name.localeCompare(b.name) || a.description.localeCompare(b.description));
    slots.forEach((x: any, i: number) => { if (!x.name) issues.add(at('secret_slots', i), 'name is required'); });
    let providerConfig: unknown = isObject(s.provider_config) ? sortedJson(s.provider_config) : undefined;
    if (str(s.extension_name) === WEBHOOK_PROVIDER) {
      if (str(s.platform) && str(s.platform) !== WEBHOOK_PROVIDER) issues.add('platform', `must be "${WEBHOOK_PROVIDER}", the webhook provider's platform`);
      providerConfig = webhookConfig(s.provider_config, issues);
    }
    if (!issues.ok) return { ok: false, errors: issues.list };
    return {
      ok: true,
      spec: {
        scope: ctx.scope.kind, workspace_id: ctx.scope.kind === 'workspace' ? ctx.scope.id : '', platform: str(s.platform),
        extension_name: str(s.extension_name), display_name: str(s.display_name), source, enabled: Boolean(s.enabled), dm_policy: dm,
        routing_policy: rp, ...(providerConfig ? { provider_config: sortedJson(providerConfig) } : {}),
        ...(isObject(s.delivery_defaults) ? { delivery_defaults: sortedJson(s.delivery_defaults) } : {}),
        notification_suppress: Boolean(s.notification_suppress), secret_slots: slots,
        ...(isObject(s.config_schema) ? { config_schema: sortedJson(s.config_schema) } : {}),
      },
    };
  },
};
