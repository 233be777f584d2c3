import { createHash } from 'node:crypto';
import { readFile, unlink } from 'node:fs/promises';
import path from 'node:path';
import { isMap, isScalar, LineCounter, parseDocument } from 'yaml';
import { DEFAULT_HEARTBEAT_CONFIG, parseHeartbeat, type HeartbeatConfig, type HeartbeatDiagnostic } from '../../codecs/heartbeat.ts';
import { parseDuration } from '../../codecs/duration.ts';
import { readRegistry, type RegistryEntry } from '../../controllers/registry-controller.ts';
import { canonicalJson } from '../../store/canonical.ts';
import { ConflictError, NotFoundError } from '../../store/errors.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { Workspace } from '../../store/workspace-store.ts';
import { pickAgent, SCRIPTED_AGENT } from './resolve-agent.ts';
import type { PathConfinement } from '../security/paths.ts';
import { agentDirName } from '../skills/catalog.ts';
import type { Settings, SettingsFile } from '../process/settings.ts';

const SCHEMA_VERSION = 1;
const FILE = 'HEARTBEAT.md';
const PACKAGE_OWNER = 'bundle.activation';
/** The original's ceiling for `heartbeat.max_body_bytes` and floor for `heartbeat.wake_event_retention`. */
const MAX_BODY_BYTES_CEILING = 1 << 20;
const MIN_WAKE_EVENT_RETENTION_MS = 3_600_000;
const sha = (s: string) => `sha256:${createHash('sha256').update(s).digest('hex')}`;

/**
 * Source is where an agent's HEARTBEAT.md comes from: a file, or a package agent's `agent.heartbeat` record
 * (`text` absent when the package ships none). `shadowed` lists files a package agent's policy ignores.
 */
type Source =
  | { kind: 'file'; path: string; text?: string; created_at: string; refused?: string }
  | { kind: 'package'; path: string; text?: string; created_at: string; owner: RegistryEntry['owner']; shadowed: string[] };

type Layer = 'builtin' | 'global' | 'workspace';
type Config = Record<string, unknown>;

/** valueOk checks one `heartbeat:` setting against its type and the original's per-setting bounds. */
function valueOk(key: string, v: unknown): boolean {
  const dflt = (DEFAULT_HEARTBEAT_CONFIG as unknown as Config)[key];
  if (typeof dflt === 'boolean') return typeof v === 'boolean';
  if (typeof dflt === 'number') return Number.isInteger(v) && (v as number) > 0 && (key !== 'max_body_bytes' || (v as number) <= MAX_BODY_BYTES_CEILING);
  const ms = typeof v === 'string' ? parseDuration(v) ?? 0 : 0;
  return ms > 0 && (key !== 'wake_event_retention' || ms >= MIN_WAKE_EVENT_RETENTION_MS);
}

/** Rules between two settings (the original refuses a configuration that breaks one). */
const PAIR_RULES: { fields: [string, string]; ok: (c: HeartbeatConfig) => boolean; message: string }[] = [
  { fields: ['context_projection_bytes', 'max_body_bytes'], ok: (c) => c.context_projection_bytes <= c.max_body_bytes, message: 'context_projection_bytes must not exceed max_body_bytes' },
  { fields: ['min_interval', 'default_interval'], ok: (c) => (parseDuration(c.min_interval) ?? 0) <= (parseDuration(c.default_interval) ?? 0), message: 'min_interval must not exceed default_interval' },
];

/** positionIn finds a `heartbeat:` key (or its value) in a configuration file, as 1-based line and column. */
async function positionIn(file: string, key: string, at: 'key' | 'value'): Promise<[number, number]> {
  const lines = new LineCounter();
  const doc = parseDocument(await readFile(file, 'utf8').catch(() => ''), { lineCounter: lines });
  const section = doc.get('heartbeat', true);
  const pair = isMap(section) ? section.items.find((p) => isScalar(p.key) && p.key.value === key) : undefined;
  const node = (at === 'key' ? pair?.key : pair?.value) ?? pair?.key ?? section;
  const offset = (node as { range?: [number] } | undefined)?.range?.[0];
  if (offset === undefined) return [1, 1];
  const p = lines.linePos(offset);
  return [p.line, p.col];
}

/**
 * resolveConfig overlays the global and then the workspace `heartbeat:` section on the built-in defaults,
 * setting by setting, and says which layer each setting came from. NOTE: the original refuses to start on
 * a bad value; a view cannot refuse, so a bad value is a warning and the layer below it applies. A layer
 * that breaks a rule between two settings loses both of the settings it set.
 */
export async function resolveConfig(files: SettingsFile[]): Promise<{ config: HeartbeatConfig; layers: Record<string, Layer>; diagnostics: HeartbeatDiagnostic[] }> {
  const config: Config = { ...DEFAULT_HEARTBEAT_CONFIG };
  const layers: Record<string, Layer> = Object.fromEntries(Object.keys(config).map((k) => [k, 'builtin']));
  const diagnostics: HeartbeatDiagnostic[] = [];
  for (const [i, file] of files.entries()) {
    const layer: Layer = i === 0 ? 'global' : 'workspace';
    const warn = async (field: string, message: string, where: [number, number] | Promise<[number, number]>) => {
      const [line, column] = await where;
      diagnostics.push({ code: 'heartbeat_config_invalid', column, field, line, message, owner_surface: 'config', section: 'config', severity: 'warning', source_path: file.path });
    };
    if (file.error) { await warn('', `${file.error.message}; this file's heartbeat settings are ignored`, [file.error.line, file.error.column]); continue; }
    const section = file.data.heartbeat;
    if (section === undefined || section === null) continue;
    if (typeof section !== 'object' || Array.isArray(section)) { await warn('heartbeat', 'heartbeat must be a mapping', positionIn(file.path, '', 'key')); continue; }
    const before = { config: { ...config }, layers: { ...layers } };
    for (const [k, v] of Object.entries(section as Config)) {
      if (!(k in DEFAULT_HEARTBEAT_CONFIG)) { await warn(`heartbeat.${k}`, `heartbeat.${k} is not a heartbeat setting`, positionIn(file.path, k, 'key')); continue; }
      if (!valueOk(k, v)) { await warn(`heartbeat.${k}`, `heartbeat.${k} has an invalid value (${JSON.stringify(v)}); the ${layers[k]} value ${JSON.stringify(config[k])} applies`, positionIn(file.path, k, 'value')); continue; }
      config[k] = v;
      layers[k] = layer;
    }
    for (const rule of PAIR_RULES) {
      if (rule.ok(config as unknown as HeartbeatConfig)) continue;
      for (const k of rule.fields.filter((f) => layers[f] === layer)) {
        await warn(`heartbeat.${k}`, `${rule.message}; the ${before.layers[k]} value ${JSON.stringify(before.config[k])} applies`, positionIn(file.path, k, 'value'));
        config[k] = before.config[k];
        layers[k] = before.layers[k];
      }
    }
  }
  return { config: config as unknown as HeartbeatConfig, layers, diagnostics };
}

/**
 * HeartbeatService reads an agent's authored wake policy and deletes it with compare-and-delete.
 *
 * Where the policy lives follows the original, where HEARTBEAT.md sits beside the agent's definition and a
 * package agent's policy is its `agent.heartbeat` sidecar:
 * - a package agent (its `agent` record is owned by a bundle.activation) reads only its sidecar record. NOTE:
 *   a workspace file does not override it (it would silently replace what the package ships); such a file is
 *   reported with an `info` diagnostic, and the policy is changed through the activation, so DELETE is a 409.
 * - any other agent reads, first found, `<workspace root>/.svc/agents/<agent>/HEARTBEAT.md` (the workspace's
 *   file wins, as a workspace agent wins over a global one) and `DATA_DIR/agents/<agent>/HEARTBEAT.md`.
 * A missing policy is a valid "no policy" answer (`validation_status: missing`), never an error.
 */
export class HeartbeatService {
  constructor(private readonly o: { store: ResourceStore; settings: Settings; dataDir: string; paths: PathConfinement }) {}

  /** agent finds the agent definition (pickAgent); `scripted` always exists. */
  private async agent(name: string, ws?: Workspace): Promise<RegistryEntry | undefined> {
    const pick = pickAgent(await readRegistry(this.o.store, 'agent'), name, ws?.id);
    if (!pick && name !== SCRIPTED_AGENT) throw new NotFoundError(`agent "${name}" does not exist`, 'agent_not_found', { agent_name: name });
    return pick;
  }

  /** readFile reads a HEARTBEAT.md under the path rule (runtime/security/paths.ts): its text, or why not. */
  private async readFile(file: string): Promise<{ text: string; created_at: string } | { refused: string } | undefined> {
    const read = await this.o.paths.read(file);
    if (read.ok) return { text: read.text, created_at: read.mtime.toISOString() };
    return read.missing ? undefined : { refused: read.reason };
  }

  private async source(name: string, ws: Workspace | undefined, agent: RegistryEntry | undefined): Promise<Source> {
    const dir = agentDirName(name);
    const files = [...(ws ? [path.join(ws.root_dir, '.svc', 'agents', dir, FILE)] : []), path.join(this.o.dataDir, 'agents', dir, FILE)];
    if (agent?.owner.kind === PACKAGE_OWNER) {
      // NOTE: a sidecar belongs to the agent record with the same scope and owner; the highest id wins a tie.
      const sidecar = (await readRegistry(this.o.store, 'agent.heartbeat'))
        .filter((e) => e.spec.agent_resource_id === agent.id && canonicalJson(e.scope) === canonicalJson(agent.scope) && canonicalJson(e.owner) === canonicalJson(agent.owner))
        .pop();
      const shadowed = (await Promise.all(files.map(async (f) => ((await this.readFile(f)) ? f : undefined)))).filter((f): f is string => !!f);
      const base = { kind: 'package' as const, owner: agent.owner, shadowed };
      if (!sidecar) return { ...base, path: `.svc/bundles/${agent.owner.id}/agents/${name}/${FILE}`, created_at: '' };
      const rec = await this.o.store.get('agent.heartbeat', sidecar.id);
      return { ...base, path: sidecar.spec.source_path, text: sidecar.spec.body, created_at: rec?.created_at ?? '' };
    }
    for (const file of files) {
      const found = await this.readFile(file);
      // NOTE: a refused file (a symlink out of the allowed places) still shadows the next one: it is reported, never read.
      if (found && 'refused' in found) return { kind: 'file', path: file, created_at: '', refused: found.refused };
      if (found) return { kind: 'file', path: file, ...found };
    }
    return { kind: 'file', path: files[0], created_at: '' };
  }

  /** get returns the Heartbeat view of an agent, resolved for an optional workspace. */
  async get(name: string, ws?: Workspace): Promise<Record<string, unknown>> {
    const agent = await this.agent(name, ws);
    return this.view(name, await this.source(name, ws, agent), ws);
  }

  /** delete removes a file-backed HEARTBEAT.md when `expectedDigest` is its current digest (compare-and-delete). */
  async delete(name: string, expectedDigest: string, ws?: Workspace): Promise<Record<string, unknown>> {
    const agent = await this.agent(name, ws);
    const src = await this.source(name, ws, agent);
    // NOTE: as in the original, a package agent's policy is read-only here whether or not the package ships one.
    if (src.kind === 'package') {
      throw new ConflictError(`the ${FILE} of package agent "${name}" is owned by ${src.owner.kind} "${src.owner.id}"; change it through the activation`, 'heartbeat_owned', { owner: src.owner });
    }
    if (src.text === undefined) throw new NotFoundError(`agent "${name}" has no ${FILE}`, 'heartbeat_no_policy', { agent_name: name, source_path: src.path });
    const digest = sha(src.text);
    if (expectedDigest !== digest) throw new ConflictError(`expected_digest is stale; the current digest is ${digest}`, 'heartbeat_conflict', { expected_digest: expectedDigest, current_digest: digest });
    // NOTE: re-read right before unlinking so an edit made since the read above is not lost.
    const again = await this.o.paths.read(src.path);
    if (!again.ok || sha(again.text) !== digest) throw new ConflictError(`${FILE} changed while it was being deleted`, 'heartbeat_conflict', { expected_digest: expectedDigest });
    await unlink(src.path);
    return this.view(name, await this.source(name, ws, agent), ws);
  }

  private async view(name: string, src: Source, ws?: Workspace): Promise<Record<string, unknown>> {
    const files = [await this.o.settings.global(), ...(ws ? [await this.o.settings.workspace(ws.root_dir)] : [])];
    const { config, layers, diagnostics: configDiagnostics } = await resolveConfig(files);
    const configDigest = sha(canonicalJson(config));
    // NOTE: the original bounds the frontmatter and the body by max_body_bytes each, so a whole file is at most twice that.
    const limits = { context_projection_bytes: config.context_projection_bytes, max_body_bytes: config.max_body_bytes, max_bytes: config.max_body_bytes * 2 };
    const present = src.text !== undefined;
    const text = src.text ?? '';
    const owner = src.kind === 'package' ? 'agent.heartbeat' : FILE;
    const parsed = parseHeartbeat(text, config, src.path, owner);
    const policyDiagnostics = [...parsed.diagnostics];
    if (Buffer.byteLength(text) > limits.max_bytes) {
      policyDiagnostics.push({ code: 'heartbeat_too_large', column: 1, field: '', line: 1, message: `${FILE} is ${Buffer.byteLength(text)} bytes; the limit is ${limits.max_bytes}`, owner_surface: owner, section: 'file', severity: 'error', source_path: src.path });
    }
    if (src.kind === 'file' && src.refused) {
      policyDiagnostics.push({ code: 'heartbeat_path_not_allowed', column: 1, field: '', line: 1, message: `${FILE} ${src.refused}; it is not read`, owner_surface: FILE, section: 'file', severity: 'error', source_path: src.path });
    }
    const valid = !policyDiagnostics.some((d) => d.severity === 'error');
    const diagnostics = [...configDiagnostics, ...policyDiagnostics];
    for (const file of src.kind === 'package' ? src.shadowed : []) {
      diagnostics.push({ code: 'heartbeat_file_ignored', column: 1, field: '', line: 1, message: `"${name}" is a package agent: its policy comes from the package (${src.path}), so this file is ignored`, owner_surface: FILE, section: 'file', severity: 'info', source_path: file });
    }
    // NOTE: as in the original, `enabled` is the configuration's switch; the file's own switch is frontmatter.enabled.
    const active = present && valid && config.enabled && parsed.frontmatter.enabled;
    const fm = parsed.frontmatter;
    // NOTE: a preference below the configured floor is clamped to it (a diagnostic says so).
    const floor = parseDuration(config.min_interval) ?? 0;
    const minInterval = !fm.preferences.min_interval ? config.default_interval : (parseDuration(fm.preferences.min_interval) ?? 0) < floor ? config.min_interval : fm.preferences.min_interval;
    const preferences = {
      active_hours: config.allow_active_hours_preferences ? fm.preferences.active_hours : [], min_interval: minInterval,
      quiet_windows: fm.preferences.quiet_windows, context: fm.context,
    };
    const digest = present ? sha(text) : sha(`absent\n${name}\n${src.path}\n${configDigest}`);
    const guidance = valid ? parsed.guidance : '';
    return {
      active, agent_name: name, config_digest: configDigest,
      config_provenance: { digest: configDigest, subset: config, layers },
      created_at: src.created_at, diagnostics, digest, enabled: config.enabled,
      frontmatter: { context: fm.context, enabled: fm.enabled, preferences: fm.preferences, summary: fm.summary, version: fm.version },
      guidance_markdown: guidance, limits, preferences, present,
      prompt: projectPrompt({ active, config_digest: configDigest, context: fm.context, diagnostics, digest, guidance_markdown: guidance, max_body_bytes: config.max_body_bytes, max_bytes: config.context_projection_bytes, preferences, source_path: src.path, summary: fm.summary, truncated: false }),
      schema_version: SCHEMA_VERSION, snapshot_id: `hbs_${digest.slice(7, 31)}`, source_path: src.path, summary: fm.summary, valid,
      validation_status: !present ? 'missing' : !valid ? 'invalid' : !active ? 'inactive' : 'valid',
    };
  }
}

/** Prompt is the HeartbeatPrompt projection a wake prompt would carry. */
type Prompt = { guidance_markdown: string; summary: string; diagnostics: HeartbeatDiagnostic[]; context: { include: string[] }; preferences: Record<string, unknown>; max_bytes: number; truncated: boolean } & Record<string, unknown>;

/**
 * projectPrompt fits the projection into `context_projection_bytes` (its JSON size), cutting in the original's
 * order: the guidance to half the budget, diagnostics, context includes, the summary to a quarter, then the guidance.
 */
export function projectPrompt(p: Prompt): Prompt {
  const fits = () => Buffer.byteLength(JSON.stringify(p)) <= p.max_bytes;
  if (fits()) return p;
  const cut = (s: string, bytes: number) => Buffer.from(s, 'utf8').subarray(0, Math.max(0, bytes)).toString('utf8').replace(/\uFFFD$/, '');
  p = { ...p, truncated: true, guidance_markdown: cut(p.guidance_markdown, Math.floor(p.max_bytes / 2)), diagnostics: [...p.diagnostics], context: { include: [...p.context.include] } };
  while (p.diagnostics.length && !fits()) p.diagnostics.pop();
  while (p.context.include.length && !fits()) p.context.include.pop();
  p.preferences = { ...p.preferences, context: p.context };
  if (!fits()) p.summary = cut(p.summary, Math.floor(p.max_bytes / 4));
  if (!fits()) p.guidance_markdown = '';
  return p;
}
