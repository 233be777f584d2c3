import * as yup from 'yup';
import { check, Issues, str, y } from './shared.ts';
import type { Codec } from './types.ts';

/** ModelCurationSpec is the canonical spec of a `model.curation` record: how operators present one model. */
export interface ModelCurationSpec {
  provider_id: string;
  model_id: string;
  hidden: boolean;
  featured: boolean;
  deprecated: boolean;
  /** The reasoning effort the model defaults to ('' keeps the catalog's). */
  default_effort: string;
}

/** CURATION_EFFORTS are the values of `default_effort` ('' keeps the catalog's default). */
export const CURATION_EFFORTS = ['none', 'minimal', 'low', 'medium', 'high', 'xhigh'] as const;

const shape = yup.object({
  provider_id: y.string().required('is required'), model_id: y.string().required('is required'),
  hidden: y.bool(), featured: y.bool(), deprecated: y.bool(), default_effort: y.oneOf([...CURATION_EFFORTS, '']),
});

/**
 * modelCurationCodec validates `model.curation`: one record per curated model, applied over the merged
 * catalog (hidden, featured, deprecated, default effort). The kind is global: the catalog is one for the service.
 * It does not check that the catalog knows the model: live sources lag, and GitOps may apply the curation first.
 */
export const modelCurationCodec: Codec<ModelCurationSpec> = {
  kind: 'model.curation',
  maxBytes: 16 * 1024,
  decode(input, ctx) {
    const issues = new Issues(ctx.unknownFields);
    if (!check(shape, input, issues)) return { ok: false, errors: issues.list };
    const s = input as Record<string, any>;
    const spec: ModelCurationSpec = {
      provider_id: str(s.provider_id), model_id: str(s.model_id), hidden: s.hidden === true, featured: s.featured === true,
      deprecated: s.deprecated === true, default_effort: str(s.default_effort),
    };
    if (!/^[a-z0-9][a-z0-9_-]*$/.test(spec.provider_id)) issues.add('provider_id', 'must match ^[a-z0-9][a-z0-9_-]*$');
    if (!spec.model_id) issues.add('model_id', 'is required');
    if (spec.hidden && spec.featured) issues.add('featured', 'a hidden model cannot be featured');
    if (ctx.scope.kind !== 'global') issues.add('scope', 'model.curation records are global (the model catalog is one for the service)');
    return issues.ok ? { ok: true, spec } : { ok: false, errors: issues.list };
  },
};
