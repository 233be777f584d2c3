import { parse as parseYaml } from 'yaml';
import * as yup from 'yup';
import { formatDuration, parseDuration } from './duration.ts';
import { decodeSpec } from './index.ts';
import { MAX_SLUG_LENGTH } from './limits.ts';
import { at, check, checkEnv, ENV_KEY, isObject, Issues, str, strs, y } from './shared.ts';
import type { FieldError } from './types.ts';

/** MANIFEST_FILES are the names an extension's manifest may have, in the order they are looked for. */
export const MANIFEST_FILES = ['extension.json', 'extension.yaml', 'extension.yml'] as const;
/** MANIFEST_MAX_BYTES bounds a manifest file. */
export const MANIFEST_MAX_BYTES = 256 * 1024;
/**
 * EXTENSION_NAME is an extension's name: lower case, a letter first, dashes between words, at most MAX_SLUG_LENGTH.
 * NOTE: no `_`, because marketplace bundle entry ids are `<extension>_<bundle>`; no `.`, so a name is one tool id segment.
 */
export const EXTENSION_NAME = new RegExp(`^[a-z](?:[a-z0-9]|-(?=[a-z0-9])){0,${MAX_SLUG_LENGTH - 1}}$`);
/** TOOL_NAME is a daemon tool's name: one tool id segment. */
export const TOOL_NAME = /^[a-z](?:[a-z0-9]|_(?=[a-z0-9])){0,47}$/;
/** PERMISSION is the grammar of a requested security capability (`network`, `tools.publish`, `vault:read`). */
const PERMISSION = /^[a-z][a-z0-9_.:-]{0,63}$/;
/** RESOURCE_KINDS are the resource sections a manifest may ship and the record kind each becomes. */
export const RESOURCE_KINDS = { agents: 'agent', bundles: 'bundle', hooks: 'hook.binding', mcp_servers: 'mcp_server' } as const;
const MAX_LIST = 64;

/** DaemonTool is one tool a daemon serves through `tools/call`. */
export interface DaemonTool {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
  read_only: boolean;
}

/** DaemonSpec is how an extension's daemon is run and supervised. */
export interface DaemonSpec {
  command: string;
  args: string[];
  env: Record<string, string>;
  /** Variable name → `vault:`/`env:` ref, resolved when the daemon starts (never stored resolved). */
  secret_env: Record<string, string>;
  /** How often `health` is called (canonical duration, e.g. `10s`). */
  health_interval: string;
  /** How long a stop waits after SIGTERM before SIGKILL (canonical duration). */
  shutdown_timeout: string;
  tools: DaemonTool[];
}

/** ExtensionManifest is a decoded, canonical `extension.json`/`extension.yaml`. */
export interface ExtensionManifest {
  name: string;
  version: string;
  description: string;
  type: string;
  /** Variables the daemon needs; each must be given by `daemon.env` or a `daemon.secret_env` ref that resolves. */
  requires_env: string[];
  /** Capabilities the extension provides (names, for discovery). */
  provides: string[];
  /** Security capabilities it asks for; granted at install by the admin who installs it, and sent in `initialize`. */
  permissions: string[];
  daemon: DaemonSpec | null;
  resources: {
    /** Directories (relative to the extension root) holding a SKILL.md each. */
    skills: string[];
    agents: Record<string, unknown>[];
    bundles: Record<string, unknown>[];
    hooks: Record<string, unknown>[];
    mcp_servers: Record<string, unknown>[];
  };
}

const toolShape = yup.object({
  name: y.string().required('is required'), description: y.string(), input_schema: y.object(), read_only: y.bool(),
});
const daemonShape = yup.object({
  command: y.string().required('is required'), args: y.stringList(), env: y.stringMap(), secret_env: y.stringMap(),
  health_interval: y.string(), shutdown_timeout: y.string(), tools: yup.array(toolShape).max(MAX_LIST, `must have at most ${MAX_LIST} entries`),
});
const shape = yup.object({
  name: y.string().required('is required'), version: y.string().required('is required'), description: y.string(), type: y.string(),
  requires_env: y.stringList(), provides: y.stringList(), permissions: y.stringList(),
  daemon: daemonShape.default(undefined),
  resources: yup.object({
    skills: y.stringList().max(MAX_LIST, `must have at most ${MAX_LIST} entries`),
    agents: yup.array().max(MAX_LIST, `must have at most ${MAX_LIST} entries`),
    bundles: yup.array().max(MAX_LIST, `must have at most ${MAX_LIST} entries`),
    hooks: yup.array().max(MAX_LIST, `must have at most ${MAX_LIST} entries`),
    mcp_servers: yup.array().max(MAX_LIST, `must have at most ${MAX_LIST} entries`),
  }).default(undefined),
});

/** ManifestResult is a decode's outcome: the canonical manifest, or every failing field. */
export type ManifestResult = { ok: true; manifest: ExtensionManifest } | { ok: false; errors: FieldError[] };

const duration = (v: unknown, field: string, dflt: number, min: number, max: number, issues: Issues): string => {
  if (v === undefined || v === null || v === '') return formatDuration(dflt);
  const ms = parseDuration(String(v));
  if (ms === undefined || ms < min || ms > max) {
    issues.add(field, `must be a duration from ${formatDuration(min)} to ${formatDuration(max)}`);
    return formatDuration(dflt);
  }
  return formatDuration(ms);
};

/** daemonTimings reads a daemon's canonical durations in ms. */
export const daemonTimings = (d: DaemonSpec) => ({ healthIntervalMs: parseDuration(d.health_interval)!, shutdownTimeoutMs: parseDuration(d.shutdown_timeout)! });

/** relativeDir checks a resource path: relative, inside the extension root, no `..`. */
function relativeDir(p: string): string | undefined {
  const parts = p.replace(/\/+$/, '').split('/');
  if (!p || p.startsWith('/') || parts.some((s) => s === '..' || s === '' || s === '.')) return undefined;
  return parts.join('/');
}

/**
 * decodeManifest validates an extension manifest (object form) and returns its canonical form: strings trimmed,
 * set-like lists sorted and deduplicated, durations in ms, and each shipped resource decoded by its kind's codec
 * (at global scope) so a manifest that would project an invalid record is refused at install, naming the field
 * (`resources.agents[0].name`). `decode(decode(x))` equals `decode(x)`.
 */
export function decodeManifest(input: unknown): ManifestResult {
  const unknown: string[] = [];
  const issues = new Issues(unknown);
  const shaped = check(shape, input, issues);
  // NOTE: strict, as every body here is: a misspelt field (`deamon`) is named, never read as absent.
  for (const p of unknown) if (!/^resources\.(agents|bundles|hooks|mcp_servers)\[/.test(p) && !/^daemon\.tools\[\d+\]\.input_schema\./.test(p)) issues.add(p, 'is not a manifest field');
  if (!shaped || !issues.ok) return { ok: false, errors: issues.list };
  const m = input as Record<string, any>;
  const name = str(m.name);
  if (!EXTENSION_NAME.test(name)) issues.add('name', `must match ${EXTENSION_NAME.source} (lower case, a letter first, at most ${MAX_SLUG_LENGTH} characters)`);
  const version = str(m.version);
  if (!version || version.length > 64 || !/^[0-9A-Za-z][0-9A-Za-z.+-]*$/.test(version)) issues.add('version', 'must be a version such as 1.2.0 (at most 64 characters)');
  const description = str(m.description);
  if (description.length > 1024) issues.add('description', 'must be at most 1024 characters');
  const sorted = (v: unknown) => [...new Set(strs(v))].sort();
  const requiresEnv = sorted(m.requires_env);
  requiresEnv.forEach((k, i) => { if (!ENV_KEY.test(k)) issues.add(at('requires_env', i), 'must match ^[A-Za-z_][A-Za-z0-9_]*$'); });
  const permissions = sorted(m.permissions);
  permissions.forEach((p, i) => { if (!PERMISSION.test(p)) issues.add(at('permissions', i), `must match ${PERMISSION.source}`); });
  const provides = sorted(m.provides);
  provides.forEach((p, i) => { if (!PERMISSION.test(p)) issues.add(at('provides', i), `must match ${PERMISSION.source}`); });

  let daemon: DaemonSpec | null = null;
  if (isObject(m.daemon)) {
    const d = m.daemon;
    const env: Record<string, string> = Object.fromEntries(Object.entries(d.env ?? {}).map(([k, v]) => [k.trim(), str(v)]).sort(([a], [b]) => (a < b ? -1 : 1)));
    const secretEnv: Record<string, string> = Object.fromEntries(Object.entries(d.secret_env ?? {}).map(([k, v]) => [k.trim(), str(v)]).sort(([a], [b]) => (a < b ? -1 : 1)));
    checkEnv(env, 'daemon.env', issues);
    for (const [k, ref] of Object.entries(secretEnv)) {
      if (!ENV_KEY.test(k)) issues.add(at('daemon.secret_env', k), 'must match ^[A-Za-z_][A-Za-z0-9_]*$');
      else if (!/^(vault:|env:)/.test(ref)) issues.add(at('daemon.secret_env', k), 'must be a vault:<namespace>/<path> or env:NAME ref');
    }
    const tools: DaemonTool[] = [];
    const seen = new Set<string>();
    (d.tools ?? []).forEach((t: Record<string, any>, i: number) => {
      const tn = str(t.name);
      if (!TOOL_NAME.test(tn)) issues.add(at(at('daemon.tools', i), 'name'), `must match ${TOOL_NAME.source}`);
      else if (seen.has(tn)) issues.add(at(at('daemon.tools', i), 'name'), `"${tn}" is declared twice`);
      seen.add(tn);
      const schema = isObject(t.input_schema) ? t.input_schema : { type: 'object' };
      tools.push({ name: tn, description: str(t.description), input_schema: schema, read_only: t.read_only === true });
    });
    tools.sort((a, b) => (a.name < b.name ? -1 : 1));
    daemon = {
      command: str(d.command), args: (d.args ?? []).map((a: string) => a), env, secret_env: secretEnv,
      health_interval: duration(d.health_interval, 'daemon.health_interval', 10_000, 100, 3_600_000, issues),
      shutdown_timeout: duration(d.shutdown_timeout, 'daemon.shutdown_timeout', 5_000, 100, 300_000, issues),
      tools,
    };
    if (!daemon.command) issues.add('daemon.command', 'is required');
  }
  for (const k of requiresEnv) {
    if (!daemon || !(k in daemon.env || k in daemon.secret_env)) issues.add('requires_env', `${k} must be given by daemon.env or daemon.secret_env`);
  }

  const r = isObject(m.resources) ? m.resources : {};
  const skills: string[] = [];
  strs(r.skills).forEach((p, i) => {
    const rel = relativeDir(p);
    if (!rel) issues.add(at('resources.skills', i), 'must be a relative directory inside the extension (no "..")');
    else if (!skills.includes(rel)) skills.push(rel);
  });
  skills.sort();
  const resources: ExtensionManifest['resources'] = { skills, agents: [], bundles: [], hooks: [], mcp_servers: [] };
  for (const [section, kind] of Object.entries(RESOURCE_KINDS) as [keyof typeof RESOURCE_KINDS, string][]) {
    const names = new Set<string>();
    (Array.isArray(r[section]) ? r[section] : []).forEach((raw: unknown, i: number) => {
      const base = at(`resources.${section}`, i);
      // NOTE: a bundle names its extension itself: it is always this one (`bundle.extension_name`).
      const spec = section === 'bundles' ? { extension_name: name, bundle: raw } : raw;
      const unknownHere: string[] = [];
      const d = decodeSpec(kind, spec, { scope: { kind: 'global' }, unknownFields: unknownHere });
      for (const p of unknownHere) issues.add(`${base}.${section === 'bundles' ? p.replace(/^bundle\.?/, '') : p}`, 'is not a field of this kind');
      if (!d.ok) {
        for (const e of d.errors) issues.add(`${base}.${section === 'bundles' ? e.path.replace(/^bundle\.?/, '') : e.path}`.replace(/\.$/, ''), e.message);
        return;
      }
      const s = d.spec as Record<string, any>;
      const id = String(section === 'bundles' ? s.bundle.name : s.name ?? s.id ?? '').toLowerCase();
      if (names.has(id)) issues.add(`${base}.name`, `"${id}" is declared twice`);
      names.add(id);
      resources[section].push(section === 'bundles' ? s.bundle : s);
    });
  }
  if (!issues.ok) return { ok: false, errors: issues.list };
  return {
    ok: true,
    manifest: { name, version, description, type: str(m.type) || 'plugin', requires_env: requiresEnv, provides, permissions, daemon, resources },
  };
}

/**
 * jsonPlace turns the offset a JSON parse error gives (`at position N`) into the line and column a reader looks
 * for (YAML's errors name them already).
 */
function jsonPlace(text: string, message: string): string {
  const m = / at position (\d+)/.exec(message);
  if (!m) return '';
  const before = text.slice(0, Number(m[1]));
  const line = before.split('\n').length;
  return ` (line ${line}, column ${before.length - before.lastIndexOf('\n')})`;
}

/**
 * parseManifestFile reads a manifest's text by its file name (JSON or YAML) and decodes it; a text that does not
 * parse is one error on `manifest`.
 */
export function parseManifestFile(file: string, text: string): ManifestResult {
  if (Buffer.byteLength(text) > MANIFEST_MAX_BYTES) return { ok: false, errors: [{ path: 'manifest', message: `${file} is larger than ${MANIFEST_MAX_BYTES} bytes` }] };
  let raw: unknown;
  try {
    raw = file.endsWith('.json') ? JSON.parse(text) : parseYaml(text, { maxAliasCount: 0 });
  } catch (err) {
    const message = (err as Error).message.split('\n')[0];
    return { ok: false, errors: [{ path: 'manifest', message: `${file} does not parse: ${message}${jsonPlace(text, message)}` }] };
  }
  if (!isObject(raw)) return { ok: false, errors: [{ path: 'manifest', message: `${file} must hold an object` }] };
  return decodeManifest(raw);
}
