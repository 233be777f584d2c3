import * as yup from 'yup';
import { at, check, isObject, Issues, sortedJson, str, y } from './shared.ts';
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

/**
 * bridgeInstanceCodec validates `bridge.instance` (spec/kinds.md §1.10). NOTE: no bridge providers are
 * installed in this service yet, so the provider checks (platform equals the provider's; secret_slots and
 * config_schema filled from its manifest) cannot run; the shape and every provider-free rule are enforced.
 */
export const bridgeInstanceCodec: Codec<BridgeInstanceSpec> = {
  kind: 'bridge.instance',
  maxBytes: 256 * 1024,
  decode(input, ctx) {
    const issues = new Issues();
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
    if (!issues.ok) return { ok: false, errors: issues.list };
    return {
      ok: true,
      spec: {
        scope: ctx.scope.kind, workspace_id: ctx.scope.kind === 'workspace' ? ctx.scope.id : '', platform: str(s.platform),
        extension_name: str(s.extension_name), display_name: str(s.display_name), source, enabled: Boolean(s.enabled), dm_policy: dm,
        routing_policy: rp, ...(isObject(s.provider_config) ? { provider_config: sortedJson(s.provider_config) } : {}),
        ...(isObject(s.delivery_defaults) ? { delivery_defaults: sortedJson(s.delivery_defaults) } : {}),
        notification_suppress: Boolean(s.notification_suppress), secret_slots: slots,
        ...(isObject(s.config_schema) ? { config_schema: sortedJson(s.config_schema) } : {}),
      },
    };
  },
};
