/** ReportedModel is one model an ACP agent offers in a session: its id and, when it names one, its label. */
export interface ReportedModel {
  id: string;
  name: string;
}

/** ConfigOptionView is one of a session's ACP configuration options, as `acp_caps.config_options` shows it. */
export interface ConfigOptionView {
  current: string;
  description: string;
  id: string;
  kind: string;
  label: string;
  values: { description: string; label: string; value: string }[];
}

/** AcpCaps is what a session's ACP answer says it can do (`acp_caps`), and the models it offers. */
export interface AcpCaps {
  config_options: ConfigOptionView[];
  supported_models: string[];
  supported_modes: string[];
  /** The models with their labels (the catalog's `acp_session` source reads these). */
  models: ReportedModel[];
}

/** MAX_ITEMS bounds every list an agent's answer contributes (options, values, modes, models). */
export const MAX_ITEMS = 256;
/** MAX_ID and MAX_TEXT bound an id and a label or description taken from an agent's answer. */
const MAX_ID = 253;
const MAX_TEXT = 1024;

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const text = (v: unknown, max = MAX_TEXT) => (typeof v === 'string' ? v.trim().slice(0, max) : '');
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v.slice(0, MAX_ITEMS) : []);

/** selectValues flattens a select option's values, grouped or not (SessionConfigSelectOptions). */
function selectValues(options: unknown): ConfigOptionView['values'] {
  const out: ConfigOptionView['values'] = [];
  for (const o of list(options)) {
    if (!isObj(o)) continue;
    const items = Array.isArray(o.options) ? o.options : [o];
    for (const v of items) {
      const value = isObj(v) ? text(v.value, MAX_ID) : '';
      if (value && out.length < MAX_ITEMS) out.push({ value, label: text(v.name) || value, description: text(v.description) });
    }
  }
  return out;
}

/**
 * acpCapsOf reads an agent's `session/new` (or `session/load`) answer: its configuration options, modes and the
 * models it offers. Models come from the stable ACP shape (SDK 2.4.0: a `select` config option of category
 * `model`) and from the earlier unstable `models: {currentModelId, availableModels: [{modelId, name}]}` that
 * agents in use still send; both, deduplicated, the config option's first. NOTE: the answer is the agent's
 * (any program an operator configured), so everything is type-checked and bounded, never trusted.
 */
export function acpCapsOf(answer: unknown): AcpCaps {
  const caps: AcpCaps = { config_options: [], supported_models: [], supported_modes: [], models: [] };
  if (!isObj(answer)) return caps;
  const models = new Map<string, ReportedModel>();
  for (const o of list(answer.configOptions)) {
    const id = isObj(o) ? text(o.id, MAX_ID) : '';
    if (!isObj(o) || !id) continue;
    const kind = text(o.type, 64);
    const values = kind === 'select' ? selectValues(o.options) : [];
    const current = typeof o.currentValue === 'boolean' ? String(o.currentValue) : text(o.currentValue, MAX_ID);
    caps.config_options.push({ current, description: text(o.description), id, kind, label: text(o.name) || id, values });
    const category = text(o.category, 64);
    if (kind === 'select' && (category === 'model' || (!category && id === 'model'))) {
      for (const v of values) if (!models.has(v.value)) models.set(v.value, { id: v.value, name: v.label === v.value ? '' : v.label });
    }
  }
  const legacy = isObj(answer.models) ? answer.models : undefined;
  for (const m of list(legacy?.availableModels)) {
    const id = isObj(m) ? text(m.modelId, MAX_ID) : '';
    if (id && !models.has(id) && models.size < MAX_ITEMS) models.set(id, { id, name: text((m as Record<string, unknown>).name, MAX_ID) });
  }
  const modes = isObj(answer.modes) ? answer.modes : undefined;
  for (const m of list(modes?.availableModes)) {
    const id = isObj(m) ? text(m.id, MAX_ID) : '';
    if (id) caps.supported_modes.push(id);
  }
  caps.models = [...models.values()];
  caps.supported_models = caps.models.map((m) => m.id);
  return caps;
}

/** reportsModels says whether an answer carries a model state at all (an empty list is a report; no field is none). */
export function reportsModels(answer: unknown): boolean {
  if (!isObj(answer)) return false;
  if (isObj(answer.models) && Array.isArray(answer.models.availableModels)) return true;
  return list(answer.configOptions).some((o) => isObj(o) && o.type === 'select' && (o.category === 'model' || (!o.category && o.id === 'model')));
}
