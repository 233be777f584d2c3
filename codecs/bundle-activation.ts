import * as yup from 'yup';
import { check, Issues, str, y } from './shared.ts';
import type { Codec } from './types.ts';

/** BundleActivationSpec is the canonical spec of a `bundle.activation` record. */
export interface BundleActivationSpec {
  extension_name: string;
  bundle_name: string;
  profile_name: string;
  spec_content_hash: string;
  bind_primary_channel_default: boolean;
}

const shape = yup.object({
  extension_name: y.string().required('is required'), bundle_name: y.string().required('is required'), profile_name: y.string().required('is required'),
  spec_content_hash: y.string(), bind_primary_channel_default: y.bool(),
});

/** bundleActivationCodec validates `bundle.activation`; its cap is 64 KiB. */
export const bundleActivationCodec: Codec<BundleActivationSpec> = {
  kind: 'bundle.activation',
  maxBytes: 64 * 1024,
  decode(input, ctx) {
    const issues = new Issues(ctx.unknownFields);
    if (!check(shape, input, issues)) return { ok: false, errors: issues.list };
    const s = input as Record<string, any>;
    const spec = {
      extension_name: str(s.extension_name), bundle_name: str(s.bundle_name), profile_name: str(s.profile_name),
      spec_content_hash: str(s.spec_content_hash), bind_primary_channel_default: Boolean(s.bind_primary_channel_default),
    };
    for (const f of ['extension_name', 'bundle_name', 'profile_name'] as const) if (!spec[f]) issues.add(f, 'is required');
    return issues.ok ? { ok: true, spec } : { ok: false, errors: issues.list };
  },
};
