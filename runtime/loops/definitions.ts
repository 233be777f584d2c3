import { childId } from '../../controllers/bundle-activation.ts';
import { decodeLoop, LOOP_CONFIG_SCHEMA, NETWORK_PARTICIPATION_SCHEMA, plainMessage } from '../../codecs/loop.ts';
import { check, isObject, Issues } from '../../codecs/shared.ts';
import { ConflictError, NotFoundError, ServiceError, ValidationError } from '../../store/errors.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { ResourceRecord, ResourceStatus } from '../../store/types.ts';
import type { ResourceService } from '../resources/resource-service.ts';
import type { WriteOptions } from '../resources/types.ts';

/** LoopWriteOptions are a resource write's options plus a sink for its `?field_validation=warn` warnings. */
export type LoopWriteOptions = WriteOptions & { warnings?: string[] };
import type { WorkspaceService } from '../workspaces/workspace-service.ts';
import type { LintIssue, LoopAnnotation, LoopConfig, LoopDefinition } from './types.ts';

/** LoopView is a loop definition as the definition routes show it: a view over its `loop` record. */
export interface LoopView {
  name: string;
  workspace_id: string;
  /** The record's id and version (the version is `expected_version` for PATCH, and GitOps'). */
  id: string;
  version: number;
  definition: LoopDefinition;
  created_at: string;
  updated_at: string;
  /** Ready or Degraded with a reason (an agent a run-agent node names that does not exist), Pending before the first reconcile. */
  state: string;
  status: ResourceStatus | null;
}

/** CREATE_FIELDS, PATCH_FIELDS: the definition routes' bodies. */
export const CREATE_FIELDS = ['definition', 'fork_from_name'] as const;
export const PATCH_FIELDS = ['expected_version', 'definition'] as const;

/** LoopDefinitionsOptions wire the definition views to the resource layer. */
export interface LoopDefinitionsOptions {
  store: ResourceStore;
  workspaces: Pick<WorkspaceService, 'get'>;
  /** The resource write path (codec, admission, optimistic concurrency); only the api role writes. */
  resources?: ResourceService;
}

const nameOf = (r: ResourceRecord) => (r.spec as LoopDefinition).meta?.name ?? r.id;

/**
 * invalidDefinition is the 422 of a definition that does not pass the lint or its shape: every finding, inside the
 * diagnostic evidence as `{valid: false, errors}`.
 */
export function invalidDefinition(errors: LintIssue[]): ValidationError {
  // NOTE: a field error's message names its field; a lint finding is named by its node and code (the list has the rest).
  const said = (e: LintIssue) => (e.code === 'invalid_field' ? e.message : `${e.node_id ? `${e.node_id}: ` : ''}${e.code}`);
  return new ValidationError(`invalid loop definition: ${errors.map(said).join('; ')}`, 'loop_invalid', { valid: false, errors });
}

/**
 * lintReport decodes a definition and answers every finding: shape errors as `invalid_field` (path in the message),
 * then the lint's. `base` is where the caller wrote the definition (`definition` in a route's body), so each path
 * names the field as the caller wrote it.
 */
export function lintReport(definition: unknown, unknown?: string[], base = ''): { valid: boolean; errors: LintIssue[]; spec?: LoopDefinition } {
  const r = decodeLoop(definition, unknown);
  const lint = r.lint ?? [];
  if (r.ok) return { valid: !lint.some((i) => i.severity === 'error'), errors: lint, spec: r.spec };
  const field = (e: { path: string; message: string }) => ({ code: 'invalid_field', message: `${fieldPath(base, e.path)}: ${e.message}`, severity: 'error' as const });
  const shape = lint.length ? [] : r.errors.map(field);
  const extra = lint.length ? r.errors.filter((e) => !/^[a-z_]+: /.test(e.message)).map(field) : [];
  return { valid: false, errors: [...shape, ...lint, ...extra] };
}

/** fieldPath is a spec path as the caller wrote it: under `base` (`definition.graph…`), the whole value when none. */
const fieldPath = (base: string, path: string) => (!base ? path : path === 'spec' || !path ? base : `${base}.${path}`);

/** renameSpec names the spec, or a `spec.` path, of a text (an error, a warning, an evidence key) as `base` instead. */
const renameSpec = (text: string, base: string) => text.replace(/(^|[\s,("])spec(?=[.\s:;,"]|$)/g, `$1${base}`);

/**
 * asWritten renames the `spec.` paths of a resource write's error (its message and evidence) to where the caller of
 * a definition route wrote them (`definition.`): the resource layer names the record's spec, which these bodies do
 * not have.
 */
function asWritten(err: unknown, base: string): unknown {
  if (!(err instanceof ServiceError)) return err;
  const rename = (x: string) => renameSpec(x, base);
  const evidence = Object.fromEntries(Object.entries(err.evidence).map(([k, v]) => [rename(k), v]));
  const Ctor = err.constructor as new (message: string, code: string, evidence: Record<string, unknown>) => ServiceError;
  return new Ctor(rename(err.message), err.code, evidence);
}

/**
 * LoopDefinitions serves the definition routes as views over `loop` records (workspace scope): a name
 * resolves to the workspace's record whose `meta.name` it is (the highest id if several, as agents resolve), and a
 * write goes through the one resource write path, so GitOps and these routes see and change the same records.
 */
export class LoopDefinitions {
  constructor(private readonly o: LoopDefinitionsOptions) {}

  /** workspaceId resolves a workspace reference (id, name or path); 404 when there is none. */
  async workspaceId(ref: string): Promise<string> {
    return (await this.o.workspaces.get(ref)).id;
  }

  /** find returns the workspace's loop record of that name, or undefined. */
  async find(workspaceId: string, name: string): Promise<ResourceRecord<LoopDefinition> | undefined> {
    const recs = await this.o.store.list({ kind: 'loop', scope: { kind: 'workspace', id: workspaceId } });
    return recs.filter((r) => nameOf(r) === name).at(-1) as ResourceRecord<LoopDefinition> | undefined;
  }

  /** record returns the record of a name, or a 404 naming the loop. */
  async record(workspaceId: string, name: string): Promise<ResourceRecord<LoopDefinition>> {
    const rec = await this.find(workspaceId, name);
    if (!rec) throw new NotFoundError(`loop "${name}" does not exist in workspace ${workspaceId}`, 'loop_not_found', { workspace_id: workspaceId, name });
    return rec;
  }

  private async view(rec: ResourceRecord): Promise<LoopView> {
    const status = (await this.o.store.getStatus(rec.kind, rec.id)) ?? null;
    return viewOf(rec, status);
  }

  async list(wsRef: string): Promise<LoopView[]> {
    const ws = await this.workspaceId(wsRef);
    const recs = await this.o.store.list({ kind: 'loop', scope: { kind: 'workspace', id: ws } });
    const byName = new Map<string, ResourceRecord>();
    for (const r of recs) byName.set(nameOf(r), r);
    const statuses = await this.o.store.statusesOf([...byName.values()]);
    return [...byName.values()].map((r, i) => viewOf(r, statuses[i] ?? null)).sort((a, b) => a.name.localeCompare(b.name));
  }

  async get(wsRef: string, name: string): Promise<LoopView> {
    return this.view(await this.record(await this.workspaceId(wsRef), name));
  }

  /** create writes a new definition (`definition`, or a copy of `fork_from_name` named by `definition.meta.name`); 409 when the name exists. */
  async create(wsRef: string, body: Record<string, unknown>, opts: LoopWriteOptions): Promise<LoopView> {
    const ws = await this.workspaceId(wsRef);
    let definition = body.definition;
    if (body.fork_from_name !== undefined) {
      if (typeof body.fork_from_name !== 'string' || !body.fork_from_name.trim()) throw new ValidationError('fork_from_name must be a loop name', 'invalid_body', { fork_from_name: 'must be a non-empty string' });
      const src = await this.record(ws, body.fork_from_name.trim());
      const meta = isObject(definition) && isObject(definition.meta) ? definition.meta : undefined;
      if (!meta || typeof meta.name !== 'string') throw new ValidationError('a fork needs definition.meta.name, the new loop\'s name', 'invalid_body', { 'definition.meta.name': 'is required with fork_from_name' });
      definition = { ...src.spec, ...(isObject(definition) ? definition : {}), meta: { ...src.spec.meta, ...meta } };
    }
    if (definition === undefined) throw new ValidationError('definition is required', 'invalid_body', { definition: 'is required' });
    const report = lintReport(definition, undefined, 'definition');
    if (!report.valid) throw invalidDefinition(report.errors.filter((e) => e.severity === 'error'));
    const name = report.spec!.meta!.name!;
    const existing = await this.find(ws, name);
    if (existing) throw new ConflictError(`loop "${name}" already exists in workspace ${ws} (record ${existing.id}, version ${existing.version})`, 'loop_exists', { name, id: existing.id, current_version: existing.version });
    const res = await this.resources.put('loop', childId('loop-', ws, name), { scope: { kind: 'workspace', id: ws }, spec: definition, expected_version: 0 }, opts).catch((err) => { throw asWritten(err, 'definition'); });
    opts.warnings?.push(...(res.warnings ?? []).map((w) => renameSpec(w, 'definition')));
    return this.view(res.record);
  }

  /**
   * patch replaces a definition. With `expected_version`, a write against another version is 409 `loop version
   * conflict` naming `current_version` (and nothing changes). A definition without `meta.name` keeps the path's
   * name; another name is 422 naming `definition.meta.name`. NOTE: a rename is refused rather than applied: runs,
   * run-loop nodes and GitOps sources name a loop, and a new name is a new loop (create it, then delete the old).
   */
  async patch(wsRef: string, name: string, body: Record<string, unknown>, opts: LoopWriteOptions): Promise<LoopView> {
    const ws = await this.workspaceId(wsRef);
    const rec = await this.record(ws, name);
    const ev = body.expected_version;
    if (ev !== undefined && (typeof ev !== 'number' || !Number.isSafeInteger(ev) || ev < 0)) {
      throw new ValidationError('expected_version must be a non-negative integer', 'invalid_body', { expected_version: 'must be a non-negative integer' });
    }
    if (body.definition === undefined) throw new ValidationError('definition is required', 'invalid_body', { definition: 'is required' });
    const given = isObject(body.definition) && isObject(body.definition.meta) ? body.definition.meta.name : undefined;
    if (given !== undefined && (typeof given !== 'string' || given.trim() !== name)) {
      throw new ValidationError(`definition.meta.name must be "${name}", the loop this path names; a loop is not renamed (create the new name, then delete this one)`, 'loop_rename_refused', { 'definition.meta.name': `must be "${name}" (a loop is not renamed)` });
    }
    if (ev !== undefined && ev !== rec.version) throw versionConflict(name, rec.version);
    const definition = isObject(body.definition) ? { ...body.definition, meta: { ...(isObject(body.definition.meta) ? body.definition.meta : {}), name } } : body.definition;
    return this.write(rec, definition, opts);
  }

  private async write(rec: ResourceRecord, definition: unknown, opts: LoopWriteOptions): Promise<LoopView> {
    const report = lintReport(definition, undefined, 'definition');
    if (!report.valid) throw invalidDefinition(report.errors.filter((e) => e.severity === 'error'));
    try {
      const res = await this.resources.put('loop', rec.id, { scope: rec.scope, spec: definition, expected_version: rec.version, source: rec.source.kind === 'daemon' ? undefined : rec.source }, opts);
      opts.warnings?.push(...(res.warnings ?? []).map((w) => renameSpec(w, 'definition')));
      return this.view(res.record);
    } catch (err) {
      // NOTE: a write that lands between the read and this put is the same conflict as a stale expected_version.
      if (err instanceof ConflictError && err.code !== 'loop_exists') {
        const cur = await this.o.store.get('loop', rec.id);
        throw versionConflict(nameOf(rec), cur?.version ?? 0);
      }
      throw asWritten(err, 'definition');
    }
  }

  async delete(wsRef: string, name: string): Promise<void> {
    const ws = await this.workspaceId(wsRef);
    const rec = await this.record(ws, name);
    await this.resources.delete('loop', rec.id, { expected_version: rec.version });
  }

  /**
   * validate lints the stored definition or `{definition}` as a write would see it: an unknown field is an
   * `unknown_field` error (a write refuses it), a warning under `?field_validation=warn`, nothing under ignore.
   */
  async validate(wsRef: string, name: string, body: Record<string, unknown>, fieldValidation: 'strict' | 'warn' | 'ignore' = 'strict'): Promise<{ valid: boolean; errors: LintIssue[] }> {
    const ws = await this.workspaceId(wsRef);
    const definition = body.definition !== undefined ? body.definition : (await this.record(ws, name)).spec;
    const unknown: string[] = [];
    const r = lintReport(definition, unknown, 'definition');
    if (fieldValidation === 'ignore' || !unknown.length) return { valid: r.valid, errors: r.errors };
    const severity = fieldValidation === 'warn' ? 'warning' as const : 'error' as const;
    const found = unknown.map((p) => ({ code: 'unknown_field', message: `${fieldPath('definition', p)}: unknown field`, severity }));
    return { valid: r.valid && severity === 'warning', errors: [...found, ...r.errors] };
  }

  async getConfig(wsRef: string, name: string): Promise<{ config: LoopConfig }> {
    return { config: (await this.record(await this.workspaceId(wsRef), name)).spec.config ?? {} };
  }

  /** putConfig replaces the definition's run settings (`{config}`), a new version of the record. */
  async putConfig(wsRef: string, name: string, body: Record<string, unknown>, opts: LoopWriteOptions): Promise<{ config: LoopConfig }> {
    const config = checkConfig(body.config, 'config');
    const rec = await this.record(await this.workspaceId(wsRef), name);
    const v = await this.write(rec, { ...rec.spec, config }, keepsExecutables(opts));
    return { config: v.definition.config ?? {} };
  }

  async getAnnotations(wsRef: string, name: string): Promise<{ annotations: LoopAnnotation[] }> {
    return { annotations: (await this.record(await this.workspaceId(wsRef), name)).spec.annotations ?? [] };
  }

  /**
   * putAnnotations replaces the console's node positions (`{annotations: [{node_id, x, y}]}`): each node_id a node of
   * the loop, placed once; another field of an annotation is an unknown field (`?field_validation` applies).
   */
  async putAnnotations(wsRef: string, name: string, body: Record<string, unknown>, opts: LoopWriteOptions): Promise<{ annotations: LoopAnnotation[] }> {
    const rec = await this.record(await this.workspaceId(wsRef), name);
    const list = body.annotations;
    const problems: Record<string, string> = {};
    if (!Array.isArray(list)) problems.annotations = 'must be a list of {node_id, x, y}';
    else {
      const placed = new Map<string, number>();
      list.forEach((a, i) => {
        if (!isObject(a) || typeof a.node_id !== 'string' || typeof a.x !== 'number' || typeof a.y !== 'number' || !Number.isFinite(a.x) || !Number.isFinite(a.y)) problems[`annotations[${i}]`] = 'must be {node_id: string, x: number, y: number}';
        else if (!rec.spec.graph.nodes.some((n) => n.id === a.node_id)) problems[`annotations[${i}].node_id`] = `"${a.node_id}" is not a node of loop ${name}`;
        else if (placed.has(a.node_id)) problems[`annotations[${i}].node_id`] = `"${a.node_id}" is placed already by annotations[${placed.get(a.node_id)}]`;
        else placed.set(a.node_id, i);
        // NOTE: an annotation's other fields are not kept, so they are unknown fields, as in any write.
        const unknown = isObject(a) ? Object.keys(a).filter((k) => !['node_id', 'x', 'y'].includes(k)).map((k) => `annotations[${i}].${k}`) : [];
        if (opts.fieldValidation === 'warn') opts.warnings?.push(...unknown.map((u) => `unknown field "${u}"`));
        else if (opts.fieldValidation !== 'ignore') for (const u of unknown) problems[u] = 'unknown field';
      });
    }
    if (Object.keys(problems).length) throw new ValidationError(`invalid annotations: ${Object.entries(problems).map(([k, v]) => `${k} ${v}`).join('; ')}`, 'invalid_body', problems);
    const annotations = (list as LoopAnnotation[]).map((a) => ({ node_id: a.node_id, x: a.x, y: a.y }));
    const v = await this.write(rec, { ...rec.spec, annotations }, keepsExecutables(opts));
    return { annotations: v.definition.annotations ?? [] };
  }

  private get resources(): ResourceService {
    if (!this.o.resources) throw new Error('LoopDefinitions: writes need the resource service (api role)');
    return this.o.resources;
  }
}

/**
 * keepsExecutables are the options of a write that changes only run settings or node positions and keeps the stored
 * definition's criteria as they are. NOTE: what runs a program was admitted when it was written (by an admin, with
 * authentication on); placing nodes or tuning run settings runs nothing new, so such a write needs the route's own
 * role, not admin. EXEC_ALLOWLIST is still checked.
 */
const keepsExecutables = (opts: LoopWriteOptions): LoopWriteOptions => ({ ...opts, role: 'admin' });

/** versionConflict is the 409: `loop version conflict` with the current version. */
export function versionConflict(name: string, current: number): ConflictError {
  return new ConflictError('loop version conflict', 'loop_version_conflict', { name, current_version: current });
}

/** checkNetworkParticipation validates a run start's `network_participation` (422 naming each field, unknown ones too). */
export function checkNetworkParticipation(v: unknown, field: string): void {
  if (v === undefined || v === null) return;
  if (!isObject(v)) throw new ValidationError(`${field} must be an object {mode}`, 'invalid_body', { [field]: 'must be an object {mode}' });
  const unknown: string[] = [];
  const issues = new Issues(unknown);
  check(NETWORK_PARTICIPATION_SCHEMA as unknown as Parameters<typeof check>[0], v, issues, field);
  for (const u of unknown) issues.add(u, 'is not a network_participation field');
  if (!issues.ok) throw new ValidationError(`invalid ${field}: ${issues.list.map((e) => `${e.path} ${e.message}`).join('; ')}`, 'invalid_body', Object.fromEntries(issues.list.map((e) => [e.path, e.message])));
}

/** checkConfig validates a LoopConfig (422 naming each field), used by the config route and start's config_overrides. */
export function checkConfig(v: unknown, field: string): LoopConfig {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) throw new ValidationError(`${field} must be an object`, 'invalid_body', { [field]: 'must be an object' });
  const unknown: string[] = [];
  const issues = new Issues(unknown);
  check(LOOP_CONFIG_SCHEMA as unknown as Parameters<typeof check>[0], v, issues, field);
  for (const u of unknown) issues.add(u, 'is not a loop config field');
  const list = issues.list.map((e) => ({ path: e.path, message: plainMessage(e.message) }));
  if (list.length) throw new ValidationError(`invalid ${field}: ${list.map((e) => `${e.path} ${e.message}`).join('; ')}`, 'invalid_body', Object.fromEntries(list.map((e) => [e.path, e.message])));
  return v as LoopConfig;
}

function viewOf(rec: ResourceRecord, status: ResourceStatus | null): LoopView {
  const ready = status?.conditions.find((c) => c.type === 'Ready');
  const state = !status || status.observed_version !== rec.version ? 'Pending' : ready?.status === 'True' ? 'Ready' : 'Degraded';
  return {
    name: nameOf(rec), workspace_id: rec.scope.id ?? '', id: rec.id, version: rec.version, definition: rec.spec as LoopDefinition,
    created_at: rec.created_at, updated_at: rec.updated_at, state, status,
  };
}
