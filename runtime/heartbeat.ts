import { createHash } from 'node:crypto';
import { readFile, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { DEFAULT_HEARTBEAT_CONFIG, parseHeartbeat, type HeartbeatConfig, type HeartbeatDiagnostic } from '../codecs/heartbeat.ts';
import { parseDuration } from '../codecs/duration.ts';
import { readRegistry, type RegistryEntry } from '../controllers/registry-controller.ts';
import { canonicalJson } from '../store/canonical.ts';
import { ConflictError, NotFoundError } from '../store/errors.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { Workspace } from '../store/workspace-store.ts';
import { SCRIPTED_AGENT } from './sessions/agents.ts';
import type { Settings, SettingsFile } from './settings.ts';

const SCHEMA_VERSION = 1;
const FILE = 'HEARTBEAT.md';
const sha = (s: string) => `sha256:${createHash('sha256').update(s).digest('hex')}`;

/** Source is where an agent's HEARTBEAT.md came from. */
type Source =
  | { kind: 'file'; path: string; text: string; created_at: string }
  | { kind: 'record'; path: string; text: string; created_at: string; record: RegistryEntry }
  | { kind: 'missing'; path: string };

/** resolveConfig overlays the global and workspace `heartbeat:` sections on the defaults, field by field. */
export function resolveConfig(files: SettingsFile[]): { config: HeartbeatConfig; layers: Record<string, string>; diagnostics: HeartbeatDiagnostic[] } {
  const config = { ...DEFAULT_HEARTBEAT_CONFIG } as Record<string, unknown>;
  const layers: Record<string, string> = Object.fromEntries(Object.keys(config).map((k) => [k, 'builtin']));
  const diagnostics: HeartbeatDiagnostic[] = [];
  for (const [i, file] of files.entries()) {
    const layer = i === 0 ? 'global' : 'workspace';
    const diag = (field: string, message: string, line = 0, column = 0): HeartbeatDiagnostic => ({ code: 'heartbeat_config_invalid', column, field, line, message, owner_surface: 'config', section: 'config', severity: 'warning', source_path: file.path });
    if (file.error) { diagnostics.push(diag('', file.error.message, file.error.line, file.error.column)); continue; }
    const section = file.data.heartbeat;
    if (section === undefined) continue;
    if (!section || typeof section !== 'object') { diagnostics.push(diag('heartbeat', 'heartbeat must be a mapping')); continue; }
    for (const [k, v] of Object.entries(section as Record<string, unknown>)) {
      const dflt = (DEFAULT_HEARTBEAT_CONFIG as unknown as Record<string, unknown>)[k];
      const ok = dflt === undefined ? false
        : typeof dflt === 'boolean' ? typeof v === 'boolean'
        : typeof dflt === 'number' ? Number.isInteger(v) && (v as number) > 0
        : typeof v === 'string' && (parseDuration(v) ?? 0) > 0;
      if (!ok) { diagnostics.push(diag(`heartbeat.${k}`, dflt === undefined ? `heartbeat.${k} is not a heartbeat setting` : `heartbeat.${k} has an invalid value; the ${layers[k]} value applies`)); continue; }
      config[k] = v;
      layers[k] = layer;
    }
  }
  return { config: config as unknown as HeartbeatConfig, layers, diagnostics };
}

/**
 * HeartbeatService reads an agent's authored wake policy. Discovery is first-wins: the workspace's
 * `<root>/.svc/agents/<agent>/HEARTBEAT.md`, then the user's `DATA_DIR/agents/<agent>/HEARTBEAT.md`, then, for a
 * package agent (owned by a bundle.activation), its `agent.heartbeat` record. A missing file is a valid "no
 * policy" answer (`validation_status: missing`), never an error.
 */
export class HeartbeatService {
  constructor(private readonly o: { store: ResourceStore; settings: Settings; dataDir: string }) {}

  /** agent finds the agent definition (a workspace one wins); the built-in `scripted` always exists. */
  private async agent(name: string, ws?: Workspace): Promise<RegistryEntry | undefined> {
    const named = (await readRegistry(this.o.store, 'agent')).filter((e) => e.spec.name === name);
    const pick = named.find((e) => e.scope.kind === 'workspace' && e.scope.id === ws?.id) ?? named.filter((e) => e.scope.kind === 'global').pop();
    if (!pick && name !== SCRIPTED_AGENT) throw new NotFoundError(`agent "${name}" does not exist`, 'agent_not_found', { agent_name: name });
    return pick;
  }

  private async source(name: string, ws: Workspace | undefined, agent: RegistryEntry | undefined): Promise<Source> {
    const files = [...(ws ? [path.join(ws.root_dir, '.svc', 'agents', name, FILE)] : []), path.join(this.o.dataDir, 'agents', name, FILE)];
    for (const file of files) {
      const text = await readFile(file, 'utf8').catch(() => undefined);
      if (text !== undefined) return { kind: 'file', path: file, text, created_at: (await stat(file)).mtime.toISOString() };
    }
    if (agent?.owner.kind === 'bundle.activation') {
      // NOTE: a sidecar belongs to the agent record with the same scope and owner; the highest id wins a tie.
      const sidecar = (await readRegistry(this.o.store, 'agent.heartbeat'))
        .filter((e) => e.spec.agent_resource_id === agent.id && canonicalJson(e.scope) === canonicalJson(agent.scope) && canonicalJson(e.owner) === canonicalJson(agent.owner))
        .pop();
      if (sidecar) {
        const rec = await this.o.store.get('agent.heartbeat', sidecar.id);
        return { kind: 'record', path: sidecar.spec.source_path, text: sidecar.spec.body, created_at: rec?.created_at ?? '', record: sidecar };
      }
    }
    return { kind: 'missing', path: files[0] };
  }

  /** get returns the Heartbeat view of an agent in an optional workspace. */
  async get(name: string, ws?: Workspace): Promise<Record<string, unknown>> {
    const agent = await this.agent(name, ws);
    return this.view(name, await this.source(name, ws, agent), ws);
  }

  /** delete removes a file-backed HEARTBEAT.md when `expected_digest` is current (compare-and-delete). */
  async delete(name: string, expectedDigest: string, ws?: Workspace): Promise<Record<string, unknown>> {
    const agent = await this.agent(name, ws);
    const src = await this.source(name, ws, agent);
    if (src.kind === 'missing') throw new NotFoundError(`agent "${name}" has no ${FILE}`, 'heartbeat_missing', { agent_name: name });
    if (src.kind === 'record') {
      throw new ConflictError(`the ${FILE} of package agent "${name}" is owned by ${src.record.owner.kind} "${src.record.owner.id}"; change it through the activation`, 'heartbeat_owned', { owner: src.record.owner });
    }
    const digest = sha(src.text);
    if (expectedDigest !== digest) throw new ConflictError(`expected_digest is stale; the current digest is ${digest}`, 'heartbeat_conflict', { expected_digest: expectedDigest, current_digest: digest });
    // NOTE: re-check right before unlinking so a concurrent edit between the read and here is not lost.
    if (sha(await readFile(src.path, 'utf8')) !== digest) throw new ConflictError('HEARTBEAT.md changed while it was being deleted', 'heartbeat_conflict', { expected_digest: expectedDigest });
    await unlink(src.path);
    return this.view(name, await this.source(name, ws, agent), ws);
  }

  private async view(name: string, src: Source, ws?: Workspace): Promise<Record<string, unknown>> {
    const files = [await this.o.settings.global(), ...(ws ? [await this.o.settings.workspace(ws.root_dir)] : [])];
    const { config, layers, diagnostics: configDiagnostics } = resolveConfig(files);
    const configDigest = sha(canonicalJson(config));
    const limits = { context_projection_bytes: config.context_projection_bytes, max_body_bytes: config.max_body_bytes, max_bytes: config.max_body_bytes * 2 };
    const present = src.kind !== 'missing';
    const text = present ? src.text : '';
    const owner = src.kind === 'record' ? 'agent.heartbeat' : FILE;
    const parsed = parseHeartbeat(text, config, src.path, owner);
    const diagnostics = [...configDiagnostics, ...parsed.diagnostics];
    if (Buffer.byteLength(text) > limits.max_bytes) {
      diagnostics.push({ code: 'heartbeat_too_large', column: 1, field: '', line: 1, message: `${FILE} is ${Buffer.byteLength(text)} bytes; the limit is ${limits.max_bytes}`, owner_surface: owner, section: 'file', severity: 'error', source_path: src.path });
    }
    const valid = !parsed.diagnostics.some((d) => d.severity === 'error') && !diagnostics.some((d) => d.code === 'heartbeat_too_large');
    const enabled = config.enabled && parsed.frontmatter.enabled;
    const active = present && valid && enabled;
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
      created_at: present ? src.created_at : '', diagnostics, digest, enabled,
      frontmatter: { context: fm.context, enabled: fm.enabled, preferences: fm.preferences, summary: fm.summary, version: fm.version },
      guidance_markdown: guidance, limits, preferences, present,
      prompt: projectPrompt({ active, config_digest: configDigest, context: fm.context, diagnostics, digest, guidance_markdown: guidance, max_body_bytes: config.max_body_bytes, max_bytes: config.context_projection_bytes, preferences, source_path: src.path, summary: fm.summary, truncated: false }),
      schema_version: SCHEMA_VERSION, snapshot_id: `hbs_${digest.slice(7, 31)}`, source_path: src.path, summary: fm.summary, valid: present ? valid : true,
      validation_status: !present ? 'missing' : !valid ? 'invalid' : !enabled ? 'inactive' : 'valid',
    };
  }
}

/** Prompt is the HeartbeatPrompt projection a wake prompt would carry. */
type Prompt = { guidance_markdown: string; summary: string; diagnostics: HeartbeatDiagnostic[]; context: { include: string[] }; preferences: Record<string, unknown>; max_bytes: number; truncated: boolean } & Record<string, unknown>;

/**
 * projectPrompt fits the projection into `context_projection_bytes` (its JSON size), cutting in order: the
 * guidance to half the budget, diagnostics, context includes, the summary to a quarter, then the guidance.
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
