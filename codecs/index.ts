import { agentCodec } from './agent.ts';
import { agentHeartbeatCodec, agentSoulCodec } from './agent-sidecar.ts';
import { automationJobCodec, automationTriggerCodec } from './automation.ts';
import { bridgeInstanceCodec } from './bridge-instance.ts';
import { bundleCodec } from './bundle.ts';
import { bundleActivationCodec } from './bundle-activation.ts';
import { hookBindingCodec } from './hook-binding.ts';
import { loopCodec } from './loop.ts';
import { mcpServerCodec } from './mcp-server.ts';
import { modelCurationCodec } from './model-curation.ts';
import { checkLengths, Issues } from './shared.ts';
import { skillCodec } from './skill.ts';
import { toolCodec } from './tool.ts';
import type { Codec, DecodeContext, DecodeResult } from './types.ts';

export type { AgentSpec } from './agent.ts';
export type { SoulSpec } from './agent-sidecar.ts';
export type { AutomationJobSpec, AutomationTriggerSpec } from './automation.ts';
export type { BridgeInstanceSpec } from './bridge-instance.ts';
export type { BundleProfile, BundleSpec } from './bundle.ts';
export type { BundleActivationSpec } from './bundle-activation.ts';
export type { ModelCurationSpec } from './model-curation.ts';
export type * from './types.ts';

const all: Codec[] = [
  hookBindingCodec, toolCodec, mcpServerCodec, agentCodec, agentSoulCodec, agentHeartbeatCodec, skillCodec,
  automationJobCodec, automationTriggerCodec, bridgeInstanceCodec, bundleCodec, bundleActivationCodec, loopCodec,
  modelCurationCodec,
];

/** codecs holds the codec of each kind (the twelve of the spec, and model.curation), by kind. */
export const codecs: ReadonlyMap<string, Codec> = new Map(all.map((c) => [c.kind, c]));

/** KINDS lists the registered kinds, sorted. */
export const KINDS: readonly string[] = [...codecs.keys()].sort();

/**
 * decodeSpec validates and canonicalizes a spec with its kind's codec, and bounds the length of every name and id
 * in it (checkLengths). It never throws: a codec bug on some input becomes a field error rather than a 500
 * (the property test hunts for those).
 */
export function decodeSpec(kind: string, spec: unknown, ctx: DecodeContext): DecodeResult {
  const codec = codecs.get(kind);
  if (!codec) return { ok: false, errors: [{ path: 'kind', message: `unknown kind "${kind}"` }] };
  const lengths = new Issues();
  checkLengths(spec, '', lengths);
  let decoded: DecodeResult;
  try {
    decoded = codec.decode(spec, ctx);
  } catch (err) {
    decoded = { ok: false, errors: [{ path: 'spec', message: `cannot be decoded: ${(err as Error).message}` }] };
  }
  if (lengths.ok) return decoded;
  return { ok: false, errors: [...lengths.list, ...(decoded.ok ? [] : decoded.errors)] };
}
