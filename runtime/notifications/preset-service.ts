import { createHash } from 'node:crypto';
import { MAX_SLUG_LENGTH } from '../../codecs/limits.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { EventBus } from '../../store/event-bus.ts';
import { canonicalJson } from '../../store/canonical.ts';
import { ConflictError, InputError, NotFoundError, ValidationError } from '../../store/errors.ts';
import type { NotificationStore } from '../../store/notification-store.ts';
import type { ResourceRecord } from '../../store/types.ts';
import { eventPatternProblem } from '../../codecs/event-names.ts';
import { parseFilter } from '../../codecs/event-filter.ts';
import type { DeliveryMode, NotificationPreset, PresetTarget } from './types.ts';

/** StoredPreset is what the store keeps of a preset; the rest of NotificationPreset is derived on read. */
type StoredPreset = Pick<NotificationPreset, 'name' | 'built_in' | 'enabled' | 'events' | 'filter' | 'targets' | 'default_version' | 'created_at' | 'updated_at'>;

/** BUILT_IN_VERSION is the version of the built-in definitions below (`default_version` "1"). */
const BUILT_IN_VERSION = '1';

/** BUILT_IN_PRESETS are the three presets every service has, all disabled and without targets. */
export const BUILT_IN_PRESETS: readonly { name: string; events: string[] }[] = [
  { name: 'task_terminal', events: ['task.run_*'] },
  { name: 'session_unhealthy', events: ['session.unhealthy', 'session.hung', 'session.recovered'] },
  { name: 'provider_failure', events: ['provider.auth_required', 'provider.rate_limited', 'provider.permission_denied', 'provider.unavailable'] },
];

const NAME = new RegExp(`^[a-z0-9][a-z0-9_.-]{0,${MAX_SLUG_LENGTH - 1}}$`);
const MAX_EVENTS = 64;
const MAX_TARGETS = 32;
const CREATE_FIELDS = ['name', 'events', 'targets', 'filter', 'enabled'];
const UPDATE_FIELDS = ['events', 'targets', 'filter', 'enabled'];
const TARGET_FIELDS = ['bridge_id', 'canonical_route', 'display_name', 'delivery_mode'];
const MODE_ALIASES: Readonly<Record<string, DeliveryMode>> = {
  'direct-send': 'direct-send', direct: 'direct-send', direct_send: 'direct-send', send: 'direct-send',
  reply: 'reply', 'reply-send': 'reply', reply_send: 'reply',
};

/** deliveryMode normalizes a delivery_mode or its alias; undefined when it is neither. */
export function deliveryMode(v: string): DeliveryMode | undefined {
  const k = v.trim().toLowerCase();
  return Object.hasOwn(MODE_ALIASES, k) ? MODE_ALIASES[k] : undefined;
}

/** PresetListQuery narrows GET /api/notifications/presets. */
export interface PresetListQuery {
  enabled?: boolean;
  built_in?: boolean;
  name?: string;
  limit?: number;
}

/** PresetServiceOptions configures a PresetService. */
export interface PresetServiceOptions {
  notifications: NotificationStore;
  /** Where bridge.instance records are read (targets must name one). */
  resources: ResourceStore;
  bus?: EventBus;
  now?: () => Date;
}

type TargetInput = { bridge_id: string; canonical_route?: string; display_name?: string; delivery_mode?: string };

/**
 * PresetService manages notification presets: strict JSON create and update (an unknown
 * field is a 400), event patterns and the filter checked at the edge, each target resolved to a bridge.instance
 * record (422 when missing or ambiguous), compare-and-set writes, and `notification.preset_created/updated` on
 * the bus. The three built-ins are seeded on first use; they can be changed but not deleted.
 */
export class PresetService {
  private seeded?: Promise<void>;

  constructor(private readonly o: PresetServiceOptions) {}

  /** list returns the presets matching the query, by name, and how many matched before the limit. */
  async list(q: PresetListQuery = {}): Promise<{ generated_at: string; presets: NotificationPreset[]; total: number }> {
    await this.seed();
    const all = Object.values(await this.o.notifications.presets()).map((j) => view(JSON.parse(j) as StoredPreset))
      .filter((p) => (q.enabled === undefined || p.enabled === q.enabled) && (q.built_in === undefined || p.built_in === q.built_in) && (!q.name || p.name === q.name))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return { generated_at: this.now().toISOString(), presets: q.limit ? all.slice(0, q.limit) : all, total: all.length };
  }

  /** get returns one preset; 404 when none has the name. */
  async get(name: string): Promise<NotificationPreset> {
    return view((await this.read(name)).preset);
  }

  /** create adds a preset; 400 for an invalid body, 409 when the name is taken, 422 for a bad target. */
  async create(body: unknown): Promise<NotificationPreset> {
    await this.seed();
    const input = strictObject(body, CREATE_FIELDS, 'preset');
    const problems: Record<string, string> = {};
    const name = typeof input.name === 'string' ? input.name.trim() : '';
    if (typeof input.name !== 'string') problems.name = 'is required and must be a string';
    else if (!NAME.test(name)) problems.name = `must be 1-${MAX_SLUG_LENGTH} characters of a-z, 0-9, "_", "." or "-", starting with a letter or digit`;
    if (input.events === undefined) problems.events = 'is required';
    if (input.targets === undefined) problems.targets = 'is required';
    if (typeof input.enabled !== 'boolean') problems.enabled = 'is required and must be a boolean';
    const fields = checkFields(input, problems);
    if (Object.keys(problems).length) throw invalid(problems);
    const targets = await this.resolveTargets(fields.targets ?? []);
    const now = this.now().toISOString();
    const preset: StoredPreset = {
      name, built_in: false, enabled: input.enabled as boolean, events: fields.events!, filter: fields.filter ?? '', targets,
      default_version: '', created_at: now, updated_at: now,
    };
    if (!(await this.o.notifications.putPreset(name, '', JSON.stringify(preset)))) {
      throw new ConflictError(`notification preset "${name}" already exists`, 'preset_exists', { name });
    }
    await this.announce('notification.preset_created', preset);
    return view(preset);
  }

  /** update changes the given fields of a preset (built-ins too); 404 when absent, 400/422 as create. */
  async update(name: string, body: unknown): Promise<NotificationPreset> {
    const input = strictObject(body, UPDATE_FIELDS, 'preset update');
    const problems: Record<string, string> = {};
    if (input.enabled !== undefined && typeof input.enabled !== 'boolean') problems.enabled = 'must be a boolean';
    const fields = checkFields(input, problems);
    if (Object.keys(problems).length) throw invalid(problems);
    const targets = fields.targets ? await this.resolveTargets(fields.targets) : undefined;
    const { preset: current, json } = await this.read(name);
    const next: StoredPreset = {
      ...current,
      ...(typeof input.enabled === 'boolean' ? { enabled: input.enabled } : {}),
      ...(fields.events ? { events: fields.events } : {}),
      ...(fields.filter !== undefined ? { filter: fields.filter } : {}),
      ...(targets ? { targets } : {}),
      updated_at: this.now().toISOString(),
    };
    if (!(await this.o.notifications.putPreset(name, json, JSON.stringify(next)))) {
      throw new ConflictError(`notification preset "${name}" changed while it was being updated; read it and retry`, 'preset_conflict', { name });
    }
    await this.announce('notification.preset_updated', next);
    return view(next);
  }

  /** delete removes a user preset; 404 when absent, 409 for a built-in. */
  async delete(name: string): Promise<void> {
    const { preset, json } = await this.read(name);
    if (preset.built_in) throw new ConflictError(`notification preset "${name}" is built in and cannot be deleted; disable it instead`, 'preset_built_in', { name });
    if (!(await this.o.notifications.putPreset(name, json, ''))) {
      throw new ConflictError(`notification preset "${name}" changed while it was being deleted; read it and retry`, 'preset_conflict', { name });
    }
  }

  /** targeting lists the names of the presets that deliver to a bridge, sorted. */
  async targeting(bridgeId: string): Promise<string[]> {
    const all = Object.values(await this.o.notifications.presets()).map((j) => JSON.parse(j) as StoredPreset);
    return all.filter((p) => p.targets.some((t) => t.bridge_id === bridgeId)).map((p) => p.name).sort();
  }

  /** seed stores the built-ins once (never over a changed one), on first use in this process. */
  seed(): Promise<void> {
    this.seeded ??= (async () => {
      const now = this.now().toISOString();
      for (const b of BUILT_IN_PRESETS) {
        const p: StoredPreset = { ...builtInDefinition(b), built_in: true, default_version: BUILT_IN_VERSION, created_at: now, updated_at: now };
        await this.o.notifications.seedPreset(b.name, JSON.stringify(p));
      }
    })().catch((err) => {
      this.seeded = undefined;
      throw err;
    });
    return this.seeded;
  }

  private async read(name: string): Promise<{ preset: StoredPreset; json: string }> {
    await this.seed();
    const json = await this.o.notifications.preset(name);
    if (!json) throw new NotFoundError(`notification preset "${name}" does not exist`, 'preset_not_found', { name });
    return { preset: JSON.parse(json) as StoredPreset, json };
  }

  /**
   * resolveTargets binds each target to one bridge.instance record: by id, else by a display_name only one
   * bridge has. Missing, ambiguous (two bridges share the name, or the same bridge twice) or a canonical_route
   * the bridge does not have is a 422 naming the target.
   */
  private async resolveTargets(inputs: TargetInput[]): Promise<PresetTarget[]> {
    if (!inputs.length) return [];
    const problems: Record<string, string> = {};
    let bridges: ResourceRecord<any>[] | undefined;
    const out: PresetTarget[] = [];
    const seen = new Map<string, number>();
    for (const [i, t] of inputs.entries()) {
      const at = `targets[${i}].bridge_id`;
      let rec = await this.o.resources.get('bridge.instance', t.bridge_id) as ResourceRecord<any> | undefined;
      if (!rec) {
        bridges ??= await this.o.resources.list({ kind: 'bridge.instance' }) as ResourceRecord<any>[];
        const named = bridges.filter((b) => String(b.spec?.display_name ?? '').toLowerCase() === t.bridge_id.toLowerCase());
        if (named.length > 1) { problems[at] = `is ambiguous: bridges ${named.map((b) => `"${b.id}"`).join(', ')} are all named "${t.bridge_id}"; use a bridge id`; continue; }
        if (!named.length) { problems[at] = `names no bridge.instance record ("${t.bridge_id}")`; continue; }
        rec = named[0];
      }
      if (seen.has(rec.id)) { problems[at] = `is ambiguous: bridge "${rec.id}" is already targets[${seen.get(rec.id)}]`; continue; }
      seen.set(rec.id, i);
      const route = canonicalRoute(rec);
      if (t.canonical_route && t.canonical_route !== route) { problems[`targets[${i}].canonical_route`] = `is not a route of bridge "${rec.id}" (its route is "${route}")`; continue; }
      const dflt = deliveryMode(String(rec.spec?.delivery_defaults?.mode ?? '')) ?? 'direct-send';
      out.push({
        bridge_id: rec.id, canonical_route: route, delivery_mode: (t.delivery_mode && deliveryMode(t.delivery_mode)) || dflt,
        display_name: t.display_name || String(rec.spec?.display_name ?? rec.id),
      });
    }
    if (Object.keys(problems).length) {
      throw new ValidationError(`invalid preset targets: ${Object.entries(problems).map(([k, v]) => `${k} ${v}`).join('; ')}`, 'preset_target_invalid', problems);
    }
    return out;
  }

  private async announce(type: string, p: StoredPreset): Promise<void> {
    await this.o.bus?.publish({
      type, source: 'notifications', outcome: 'info', summary: `notification preset ${p.name} ${type.endsWith('created') ? 'created' : 'updated'}`,
      data: { name: p.name, enabled: p.enabled, events: p.events, filter: p.filter, bridge_ids: p.targets.map((t) => t.bridge_id) },
    });
  }

  private now(): Date {
    return this.o.now?.() ?? new Date();
  }
}

/** canonicalRoute is a bridge's one notification route: `<platform>/<id>`. */
export function canonicalRoute(rec: { id: string; spec?: { platform?: unknown } }): string {
  return `${String(rec.spec?.platform ?? '') || 'bridge'}/${rec.id}`;
}

function builtInDefinition(b: { name: string; events: string[] }) {
  return { name: b.name, enabled: false, events: [...b.events], filter: '', targets: [] as PresetTarget[] };
}

const hashOf = (v: unknown) => createHash('sha256').update(canonicalJson(v)).digest('hex').slice(0, 16);

/** view derives the read-only fields (default_hash, user_modified, default_update_available). */
function view(p: StoredPreset): NotificationPreset {
  const builtIn = p.built_in ? BUILT_IN_PRESETS.find((b) => b.name === p.name) : undefined;
  const defaultHash = builtIn ? hashOf(builtInDefinition(builtIn)) : '';
  const mine = { name: p.name, enabled: p.enabled, events: p.events, filter: p.filter, targets: p.targets };
  return {
    name: p.name, built_in: p.built_in, enabled: p.enabled, events: p.events, filter: p.filter, targets: p.targets,
    default_version: p.default_version, default_hash: defaultHash,
    default_update_available: Boolean(builtIn) && p.default_version !== BUILT_IN_VERSION,
    user_modified: Boolean(builtIn) && hashOf(mine) !== defaultHash,
    created_at: p.created_at, updated_at: p.updated_at,
  };
}

/** strictObject requires a JSON object with only the allowed fields (unknown fields are a 400). */
function strictObject(body: unknown, allowed: string[], what: string): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new InputError(`${what} body must be a JSON object`, 'invalid_body', { body: 'must be a JSON object' });
  const unknown = Object.keys(body).filter((k) => !allowed.includes(k));
  if (unknown.length) {
    throw new InputError(`unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')} in the ${what} body; allowed: ${allowed.join(', ')}`,
      'unknown_field', Object.fromEntries(unknown.map((k) => [k, 'is not a known field'])));
  }
  return body as Record<string, unknown>;
}

const invalid = (problems: Record<string, string>) =>
  new InputError(`invalid preset: ${Object.entries(problems).map(([k, v]) => `${k} ${v}`).join('; ')}`, 'invalid_preset', problems);

/** checkFields validates the fields create and update share, recording each problem by field path. */
function checkFields(input: Record<string, unknown>, problems: Record<string, string>): { events?: string[]; filter?: string; targets?: TargetInput[] } {
  const out: { events?: string[]; filter?: string; targets?: TargetInput[] } = {};
  if (input.events !== undefined) {
    if (!Array.isArray(input.events) || !input.events.every((e) => typeof e === 'string')) problems.events = 'must be an array of strings';
    else if (!input.events.length) problems.events = 'must name at least one event or pattern';
    else if (input.events.length > MAX_EVENTS) problems.events = `must have at most ${MAX_EVENTS} entries`;
    else {
      const events = [...new Set((input.events as string[]).map((e) => e.trim()))];
      events.forEach((e, i) => {
        const why = eventPatternProblem(e);
        if (why) problems[`events[${i}]`] = why;
      });
      out.events = events;
    }
  }
  if (input.filter !== undefined) {
    if (typeof input.filter !== 'string') problems.filter = 'must be a string';
    else {
      const parsed = parseFilter(input.filter);
      if (!parsed.ok) problems.filter = `is not a valid filter: ${parsed.error}`;
      else out.filter = input.filter.trim();
    }
  }
  if (input.targets !== undefined) {
    if (!Array.isArray(input.targets)) problems.targets = 'must be an array of {bridge_id, canonical_route?, display_name?, delivery_mode?}';
    else if (input.targets.length > MAX_TARGETS) problems.targets = `must have at most ${MAX_TARGETS} entries`;
    else {
      out.targets = [];
      input.targets.forEach((t, i) => {
        const at = `targets[${i}]`;
        if (t === null || typeof t !== 'object' || Array.isArray(t)) { problems[at] = 'must be an object'; return; }
        for (const k of Object.keys(t)) if (!TARGET_FIELDS.includes(k)) problems[`${at}.${k}`] = 'is not a known field';
        const o = t as Record<string, unknown>;
        for (const k of TARGET_FIELDS) if (o[k] !== undefined && typeof o[k] !== 'string') problems[`${at}.${k}`] = 'must be a string';
        const bridge = typeof o.bridge_id === 'string' ? o.bridge_id.trim() : '';
        if (!bridge) problems[`${at}.bridge_id`] = 'is required';
        const mode = typeof o.delivery_mode === 'string' ? o.delivery_mode.trim().toLowerCase() : '';
        if (mode && !deliveryMode(mode)) problems[`${at}.delivery_mode`] = 'must be direct-send (direct, direct_send, send) or reply (reply-send, reply_send)';
        out.targets!.push({
          bridge_id: bridge, delivery_mode: mode || undefined,
          canonical_route: typeof o.canonical_route === 'string' ? o.canonical_route.trim() : undefined,
          display_name: typeof o.display_name === 'string' ? o.display_name.trim() : undefined,
        });
      });
    }
  }
  return out;
}
