import { MAX_ID_LENGTH } from '../../codecs/limits.ts';
import { createHash } from 'node:crypto';
import { CURATION_EFFORTS, type ModelCurationSpec } from '../../codecs/model-curation.ts';
import { canonicalJson } from '../../store/canonical.ts';
import { NotFoundError, ValidationError } from '../../store/errors.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { ResourceService } from '../resources/resource-service.ts';
import type { ModelCatalog } from './catalog.ts';
import type { CatalogModel, CurateApply } from './types.ts';

/** CURATE_FIELDS are the fields of a curate request. */
export const CURATE_FIELDS = ['model_id', 'hidden', 'featured', 'deprecated', 'default_effort'];
/** How long a curate waits for its record's reconcile, so its answer and the next listing agree. */
const WAIT_MS = 10_000;

/**
 * curationId is the record id the curate route gives a model's first curation: `<provider>.<model id>` where the
 * model id fits the record id grammar, else its safe characters and a hash (model ids hold `/` and `:`).
 */
export function curationId(provider: string, model: string): string {
  const safe = model.replace(/[^A-Za-z0-9._-]/g, '-');
  const id = `${provider}.${safe}`;
  if (safe === model && id.length <= 253) return id;
  return `${provider}.${safe.slice(0, 200)}-${createHash('sha256').update(model).digest('hex').slice(0, 12)}`;
}

/**
 * Curations is the curate route's side of `model.curation`: a convenience over the same record GitOps applies. It
 * writes (or updates, at its version) the record of the model, so a curation made here and one applied as a record
 * are one thing, and answers the model as the catalog now shows it and what the write did (CurateApply).
 */
export class Curations {
  constructor(private readonly o: { catalog: ModelCatalog; resources: ResourceService; store: ResourceStore }) {}

  /** curate applies `{model_id, hidden?, featured?, deprecated?, default_effort?}` to a model of `provider`. */
  async curate(provider: string, body: Record<string, unknown>, role?: string): Promise<{ model: CatalogModel; apply: CurateApply }> {
    const { catalog } = this.o;
    await catalog.statuses(provider); // validates the provider id (400) and that the catalog knows it (404)
    const problems: Record<string, string> = {};
    const modelId = typeof body.model_id === 'string' ? body.model_id.trim() : '';
    if (!modelId) problems.model_id = 'is required (a model id of the provider, as the catalog lists it)';
    else if (modelId.length > MAX_ID_LENGTH) problems.model_id = `must be at most ${MAX_ID_LENGTH} characters`;
    for (const f of ['hidden', 'featured', 'deprecated']) if (body[f] !== undefined && typeof body[f] !== 'boolean') problems[f] = 'must be true or false';
    if (body.default_effort !== undefined && !(['', ...CURATION_EFFORTS] as unknown[]).includes(body.default_effort)) problems.default_effort = `must be one of ${CURATION_EFFORTS.join(', ')} (or "" for the catalog's)`;
    if (Object.keys(problems).length) throw new ValidationError(`invalid curation: ${Object.entries(problems).map(([k, v]) => `${k} ${v}`).join('; ')}`, 'invalid_curation', problems);
    if (!(await catalog.find(provider, modelId))) {
      throw new NotFoundError(`model "${modelId}" of provider "${provider}" is not in the catalog; list GET /api/model-catalog/providers/${provider}/models?view=all, or refresh it`, 'model_not_found', { provider_id: provider, model_id: modelId });
    }
    const existing = (await this.o.store.list({ kind: 'model.curation' })).filter((r) => {
      const s = r.spec as ModelCurationSpec;
      return s.provider_id === provider && s.model_id === modelId;
    }).at(-1);
    const prev = existing?.spec as ModelCurationSpec | undefined;
    const spec: ModelCurationSpec = {
      provider_id: provider, model_id: modelId, hidden: prev?.hidden ?? false, featured: prev?.featured ?? false,
      deprecated: prev?.deprecated ?? false, default_effort: prev?.default_effort ?? '',
    };
    for (const f of ['hidden', 'featured', 'deprecated'] as const) if (typeof body[f] === 'boolean') spec[f] = body[f] as boolean;
    if (typeof body.default_effort === 'string') spec.default_effort = body.default_effort;
    // NOTE: hiding a featured model un-features it, rather than refusing what the caller plainly asked for.
    if (body.hidden === true && body.featured === undefined) spec.featured = false;
    const id = existing?.id ?? curationId(provider, modelId);
    const res = await this.o.resources.put('model.curation', id, { scope: { kind: 'global' }, spec, expected_version: existing?.version ?? 0 }, { waitMs: WAIT_MS, role });
    const model = (res.reconciled ? await catalog.find(provider, modelId) : undefined) ?? applied(await catalog.find(provider, modelId), spec);
    const warnings = [...(res.warnings ?? [])];
    if (spec.featured && model.available === false) warnings.push(`${provider}/${modelId} is featured but its provider says it is not available with the configured key`);
    if (spec.default_effort && spec.default_effort !== 'none' && model.supports_reasoning === false) warnings.push(`${provider}/${modelId} does not reason; default_effort ${spec.default_effort} has no effect`);
    const record = res.record;
    const apply: CurateApply = {
      active_config_hash: createHash('sha256').update(canonicalJson(record.spec)).digest('hex'), active_generation: record.version, agent_name: '',
      applied: true, apply_record_id: record.id, lifecycle: res.reconciled ? 'live' : 'pending', next_action: res.reconciled ? 'none' : 'wait_for_reconcile',
      partial_failures: [], restart_required: false, restart_scope: '', scope: 'global', section: 'model.curation',
      skipped: !res.changed, skipped_reason: res.changed ? '' : 'unchanged', warnings, workspace_id: '', write_target: `resource:model.curation/${record.id}`,
    };
    return { model, apply };
  }
}

/** applied is a model with a curation spec applied (the answer when the record's reconcile has not landed yet). */
function applied(model: CatalogModel | undefined, spec: ModelCurationSpec): CatalogModel {
  const m = { ...model! };
  m.hidden = spec.hidden;
  m.featured = spec.featured;
  m.deprecated = spec.deprecated;
  m.curated = !spec.hidden;
  if (spec.default_effort) {
    m.default_reasoning_effort = spec.default_effort;
    m.reasoning_source = 'curation';
  }
  return m;
}
