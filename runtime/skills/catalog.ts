import { createHash } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { parseDocument } from 'yaml';
import { readRegistry, type RegistryEntry } from '../../controllers/registry-controller.ts';
import { ConflictError, ForbiddenError, InputError, NotFoundError } from '../../store/errors.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { Workspace } from '../../store/workspace-store.ts';
import { pickAgent } from '../agents/resolve-agent.ts';
import { scanContent } from '../security/content-scan.ts';
import type { PathConfinement } from '../security/paths.ts';
import { BUNDLED_DIR } from './bundled-dir.ts';
import { treeHash } from '../marketplace/archive.ts';
import type { InstalledSkills, ShadowEntry, Skill, SkillContext, SkillDiagnostic } from './types.ts';

/** TIERS is the precedence order, lowest first: a later tier shadows an earlier one of the same name. */
export const TIERS = ['bundled', 'marketplace', 'user', 'additional', 'workspace', 'agent-local'] as const;
const tierName = (source: string) => (source === 'agent-local' ? 'agent_local' : source);
const rank = (source: string) => TIERS.indexOf(source as (typeof TIERS)[number]);

const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const PROVENANCE_FILE = '.svc-provenance.json';
/** PATH_NOT_ALLOWED is the diagnostic code of a definition whose file the path rule refuses. */
const PATH_NOT_ALLOWED = 'path_not_allowed';
/** QUARANTINED is the diagnostic code of an install whose files changed since it was installed. */
const QUARANTINED = 'tree_hash_mismatch';

/** IGNORE_PREVIOUS is the content scanner's rule for "ignore previous instructions". */
const IGNORE_PREVIOUS = 'prompt_injection_ignore_previous';

/** Content patterns the verifier warns about: instructions that try to escape the operator's control. */
const SUSPICIOUS: { pattern: RegExp; label: string; message: string }[] = [
  { pattern: /curl[^\n|]*\|\s*(ba)?sh/i, label: 'curl|sh', message: 'pipes a download into a shell' },
  { pattern: /rm\s+-rf\s+\/(\s|$)/, label: 'rm -rf /', message: 'deletes the filesystem root' },
];

/** Candidate is one discovered definition of a skill, valid or not. */
interface Candidate {
  name: string;
  source: string;
  dir: string;
  file: string;
  description: string;
  version: string;
  metadata: Record<string, unknown>;
  enabled: boolean;
  content: string;
  provenance: Partial<Skill['provenance']>;
  diagnostic: SkillDiagnostic;
}

const diag = (name: string, source: string, file: string): SkillDiagnostic => ({
  failure: { actual_hash: '', code: '', expected_hash: '', message: '' }, name, path: file, source, state: 'valid',
  verification_status: 'passed', warnings: [], winning_path: '', winning_source: '',
});

/**
 * parseSkillFile reads a SKILL.md: YAML frontmatter (name, description, version, metadata, enabled) between
 * `---` lines, then the body. A broken file is still a candidate, marked invalid with why, so an operator sees it.
 */
export function parseSkillFile(text: string, source: string, dir: string, file: string, provenance?: Record<string, unknown>): Candidate {
  const dirName = path.basename(dir);
  const c: Candidate = {
    name: dirName, source, dir, file, description: '', version: '', metadata: {}, enabled: true, content: text, provenance: {},
    diagnostic: diag(dirName, source, file),
  };
  const fail = (code: string, message: string) => {
    c.diagnostic.state = 'invalid';
    c.diagnostic.verification_status = 'failed';
    c.diagnostic.failure = { ...c.diagnostic.failure, code, message };
    return c;
  };
  const m = /^---\r?\n([\s\S]*?)\r?\n---(?:\r?\n|$)/.exec(text);
  if (!m) return fail('frontmatter_missing', 'SKILL.md must start with YAML frontmatter between --- lines');
  const doc = parseDocument(m[1]);
  if (doc.errors.length) return fail('frontmatter_invalid', doc.errors[0].message);
  const fm = doc.toJS() as Record<string, unknown> | null;
  if (!fm || typeof fm !== 'object' || Array.isArray(fm)) return fail('frontmatter_invalid', 'frontmatter must be a YAML mapping');
  if (typeof fm.name !== 'string' || !fm.name.trim()) return fail('name_missing', 'frontmatter needs a name');
  c.name = fm.name.trim();
  c.diagnostic.name = c.name;
  if (!NAME.test(c.name)) return fail('name_invalid', 'name must be lower case letters, digits, ".", "_" or "-" (at most 64)');
  if (c.name !== dirName) return fail('name_mismatch', `name "${c.name}" must match its directory "${dirName}"`);
  if (typeof fm.description !== 'string' || !fm.description.trim()) return fail('description_missing', 'frontmatter needs a description');
  c.description = fm.description.trim();
  c.version = typeof fm.version === 'string' || typeof fm.version === 'number' ? String(fm.version) : '';
  c.metadata = fm.metadata && typeof fm.metadata === 'object' && !Array.isArray(fm.metadata) ? (fm.metadata as Record<string, unknown>) : {};
  if (fm.enabled === false) c.enabled = false;
  for (const s of SUSPICIOUS) {
    if (s.pattern.test(text)) c.diagnostic.warnings.push({ message: s.message, pattern: s.label, severity: 'warning' });
  }
  // NOTE: instruction overrides are the one content scanner's rule (the memory family's, and skill installs' scan).
  for (const f of scanContent(text, ['prompt_injection']).filter((x) => x.rule === IGNORE_PREVIOUS)) {
    c.diagnostic.warnings.push({ message: `${f.message} ("${f.excerpt}")`, pattern: f.rule, severity: 'warning' });
  }
  if (c.diagnostic.warnings.length) c.diagnostic.verification_status = 'warning';
  if (provenance) {
    // NOTE: an installed skill records the hash it was installed with; a changed file no longer matches it.
    c.provenance = Object.fromEntries(['registry', 'slug', 'version', 'installed_at'].map((k) => [k, String(provenance[k] ?? '')]));
    const expected = String(provenance.hash ?? '');
    const actual = `sha256:${createHash('sha256').update(text).digest('hex')}`;
    if (expected && expected !== actual) {
      c.diagnostic.state = 'verification_failed';
      c.diagnostic.verification_status = 'failed';
      c.diagnostic.failure = { actual_hash: actual, code: 'hash_mismatch', expected_hash: expected, message: 'SKILL.md does not match the hash recorded when it was installed' };
    }
  }
  return c;
}

/**
 * refusedCandidate stands for a definition whose file the path rule refuses (runtime/security/paths.ts): listed
 * as invalid with why, so an operator sees it, and with no content, so its bytes are never served.
 */
function refusedCandidate(name: string, source: string, dir: string, file: string, message: string): Candidate {
  const d = diag(name, source, file);
  return {
    name, source, dir, file, description: '', version: '', metadata: {}, enabled: false, content: '', provenance: {},
    diagnostic: { ...d, state: 'invalid', verification_status: 'failed', failure: { ...d.failure, code: PATH_NOT_ALLOWED, message } },
  };
}

/** scanDir reads every `<dir>/<name>/SKILL.md` of one skill directory; a missing directory has none. */
async function scanDir(root: string, source: string, paths: PathConfinement): Promise<Candidate[]> {
  const entries = await readdir(root, { withFileTypes: true }).catch(() => []);
  const out: Candidate[] = [];
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    // NOTE: dot directories are the service's own (DATA_DIR/skills/.market holds the marketplace tier's cache).
    if (!e.isDirectory() || e.name.startsWith('.')) continue;
    const dir = path.join(root, e.name);
    const file = path.join(dir, 'SKILL.md');
    const read = await paths.read(file);
    if (!read.ok) {
      if (!read.missing) out.push(refusedCandidate(e.name, source, dir, file, `SKILL.md ${read.reason}`));
      continue;
    }
    const prov = await paths.read(path.join(dir, PROVENANCE_FILE)).then((r) => (r.ok ? JSON.parse(r.text) as Record<string, unknown> : undefined)).catch(() => undefined);
    out.push(parseSkillFile(read.text, source, dir, file, prov));
  }
  return out;
}

/** ExtensionSkillDir maps an extension's skill `dir` to this process's unpacked copy (ExtensionService.localSkillDir). */
export type ExtensionSkillDir = (dir: string, extension: string) => Promise<string>;

/** recordCandidate turns a `skill` record into a candidate; its file, if named, readable and allowed, is its content. */
async function recordCandidate(e: RegistryEntry, paths: PathConfinement, extensionDir?: ExtensionSkillDir): Promise<Candidate> {
  let s = e.spec;
  // NOTE: an extension's skill names a tree in the cache of the process that projected it; this process reads its own.
  if (e.source.kind === 'extension' && s.dir && extensionDir) {
    try {
      s = { ...s, dir: await extensionDir(s.dir, e.source.id) };
    } catch (err) {
      return refusedCandidate(s.name, s.source, s.dir, path.join(s.dir, 'SKILL.md'), `dir: ${(err as Error).message}`);
    }
  }
  const file = s.file_path || (s.dir ? path.join(s.dir, 'SKILL.md') : `record:${e.id}`);
  let content = '';
  if (s.file_path || s.dir) {
    const read = await paths.read(file);
    // NOTE: checked again at every read: the record may predate the rule, or its file may since be a symlink.
    if (!read.ok && !read.missing) return refusedCandidate(s.name, s.source, s.dir ?? '', file, `${s.file_path ? 'file_path' : 'dir'}: ${read.reason}`);
    if (read.ok) content = read.text;
  }
  const p = s.provenance ?? {};
  return {
    name: s.name, source: s.source, dir: s.dir ?? '', file, description: s.description, version: s.version ?? '', metadata: s.metadata ?? {},
    enabled: s.enabled === true, content: content || `---\nname: ${s.name}\ndescription: ${JSON.stringify(s.description)}\n---\n`,
    provenance: {
      registry: p.registry ?? '', slug: p.slug ?? '', version: p.version ?? '', installed_at: p.installed_at ?? '',
      installed_from_bundle: s.installed_from_bundle || (e.owner.kind === 'bundle.activation' ? e.owner.id : ''),
      installed_from_extension: s.installed_from_extension || (e.source.kind === 'extension' ? e.source.id : ''),
    },
    diagnostic: diag(s.name, s.source, file),
  };
}

/**
 * installedCandidates are the marketplace tier: each install unpacked in this process's cache, its tree hash
 * compared with the one recorded at install (a changed tree is quarantined: verification_failed, never a winner),
 * and the install's content scan warnings attached.
 */
async function installedCandidates(installs: InstalledSkills, paths: PathConfinement): Promise<Candidate[]> {
  return Promise.all((await installs.loaded()).map(async ({ record: r, dir, error, warning }) => {
    const file = path.join(dir, 'SKILL.md');
    const provenance = { registry: r.registry, slug: r.slug, version: r.version, installed_at: r.installed_at };
    const read = error ? undefined : await paths.read(file);
    if (!read?.ok) {
      const c = refusedCandidate(r.name, 'marketplace', dir, file, error ?? `SKILL.md ${read && !read.ok ? read.reason : 'cannot be read'}`);
      c.diagnostic.failure.code = 'install_unavailable';
      return { ...c, provenance };
    }
    const actual = await treeHash(dir).catch(() => '');
    if (actual !== r.tree_hash) {
      // NOTE: nothing of a changed tree is served, not even its frontmatter: only the record's name and provenance.
      const q = refusedCandidate(r.name, 'marketplace', dir, file, '');
      q.diagnostic = {
        ...q.diagnostic, state: 'verification_failed', verification_status: 'failed',
        failure: { actual_hash: actual, code: QUARANTINED, expected_hash: r.tree_hash, message: `the installed files changed since the install: quarantined (remove it with DELETE /api/skills/marketplace/${r.name}, then install it again)` },
      };
      return { ...q, provenance };
    }
    const c = parseSkillFile(read.text, 'marketplace', dir, file);
    c.provenance = provenance;
    if (c.diagnostic.state === 'valid' && r.warnings.length) {
      // NOTE: a SKILL.md hit of the install's scan is the one parsing already reported (same rule, same file).
      const seen = new Set(c.diagnostic.warnings.map((w) => w.pattern));
      c.diagnostic.warnings.push(...r.warnings.filter((w) => !(w.message.startsWith('SKILL.md: ') && seen.has(w.pattern))));
      c.diagnostic.verification_status = 'warning';
    }
    if (c.diagnostic.state === 'valid' && warning) {
      c.diagnostic.warnings.push({ message: warning, pattern: 'marketplace_config_invalid', severity: 'warning' });
      c.diagnostic.verification_status = 'warning';
    }
    return c;
  }));
}

/** agentDirName returns an agent name usable as a directory under `.svc/agents`; others are a 400, never a path. */
export function agentDirName(name: string): string {
  if (name === '.' || name === '..' || /[/\\\0]/.test(name)) {
    throw new InputError(`agent name "${name}" must not be "." or ".." nor contain "/" or "\\"`, 'invalid_query', { for_agent: name });
  }
  return name;
}

/**
 * SkillCatalog discovers skills for a context: the bundled directory, the user's (`DATA_DIR/skills`), the
 * workspace's (`<root>/.svc/skills`), the agent's (`<root>/.svc/agents/<agent>/skills`) and `skill` records.
 * The highest precedence tier wins each name; the others are listed in its `provenance.shadowed_by` and its
 * diagnostics. Files are read on every call: they can change at any time and the directories are small.
 */
export class SkillCatalog {
  constructor(private readonly o: { store: ResourceStore; dataDir: string; paths: PathConfinement; bundledDir?: string; installs?: InstalledSkills; extensionDir?: ExtensionSkillDir }) {}

  private async candidates(ctx: SkillContext): Promise<Candidate[]> {
    const ws = ctx.workspace;
    const dirs: [string, string][] = [[this.o.bundledDir ?? BUNDLED_DIR, 'bundled'], [path.join(this.o.dataDir, 'skills'), 'user']];
    if (ws) dirs.push([path.join(ws.root_dir, '.svc', 'skills'), 'workspace']);
    if (ws && ctx.agentName) dirs.push([path.join(ws.root_dir, '.svc', 'agents', agentDirName(ctx.agentName), 'skills'), 'agent-local']);
    // NOTE: within a tier the first candidate wins, so records come before files, the workspace's records before
    // global ones, and a higher id before a lower one (as agents resolve).
    const entries = (await readRegistry(this.o.store, 'skill')).reverse();
    const records = [...entries.filter((e) => e.scope.kind === 'workspace' && e.scope.id === ws?.id), ...entries.filter((e) => e.scope.kind === 'global')];
    const found = await Promise.all([
      Promise.all(records.map((r) => recordCandidate(r, this.o.paths, this.o.extensionDir))), ...dirs.map(([d, s]) => scanDir(d, s, this.o.paths)),
      this.o.installs ? installedCandidates(this.o.installs, this.o.paths) : [],
    ]);
    return found.flat();
  }

  /** disabled is the agent's `skills.disabled` list (a workspace definition wins over a global one). */
  private async disabled(ctx: SkillContext): Promise<string[]> {
    // NOTE: names turned off through POST /api/skills/{name}/disable apply to every agent.
    const off = this.o.installs ? [...(await this.o.installs.disabled())] : [];
    if (!ctx.agentName) return off;
    const pick = pickAgent(await readRegistry(this.o.store, 'agent'), ctx.agentName, ctx.workspace?.id);
    return [...off, ...(pick?.spec.skills?.disabled ?? [])];
  }

  /** list resolves every skill name to its winner, sorted by name. */
  async list(ctx: SkillContext): Promise<Skill[]> {
    const [all, disabled] = await Promise.all([this.candidates(ctx), this.disabled(ctx)]);
    const now = new Date().toISOString();
    const byName = new Map<string, Candidate[]>();
    for (const c of all) byName.set(c.name, [...(byName.get(c.name) ?? []), c]);
    const skills: Skill[] = [];
    for (const [name, cands] of byName) {
      // NOTE: only a definition that parsed and verified can win; when none did, the best broken one is listed,
      // disabled, so its diagnostics stay visible to the operator.
      const ordered = [...cands].sort((a, b) => rank(b.source) - rank(a.source));
      const winner = ordered.find((c) => c.diagnostic.state === 'valid') ?? ordered[0];
      const usable = winner.diagnostic.state === 'valid';
      const others = ordered.filter((c) => c !== winner);
      for (const o of others) {
        if (o.diagnostic.state === 'valid') o.diagnostic.state = 'shadowed';
        o.diagnostic.winning_path = winner.file;
        o.diagnostic.winning_source = winner.source;
      }
      skills.push({
        name, description: winner.description, version: winner.version, metadata: winner.metadata, dir: winner.dir, source: winner.source,
        enabled: usable && winner.enabled && !disabled.includes(name),
        diagnostics: [winner.diagnostic, ...others.map((o) => o.diagnostic)],
        provenance: {
          installed_at: '', installed_from_bundle: '', installed_from_extension: '', registry: '', slug: '', version: '', ...winner.provenance,
          precedence_tier: tierName(winner.source),
          // NOTE: as in the original's API, only the valid definitions the winner hides; broken ones are in diagnostics.
          shadowed_by: others.filter((c) => c.diagnostic.state === 'shadowed').map((c) => ({ detected_at: now, path: c.file, resolved_to_winner: false, tier: tierName(c.source) })),
        },
      });
    }
    return skills.sort((a, b) => a.name.localeCompare(b.name));
  }

  async get(name: string, ctx: SkillContext): Promise<Skill> {
    const skill = (await this.list(ctx)).find((s) => s.name === name);
    if (!skill) throw new NotFoundError(`skill "${name}" does not exist in this context`, 'skill_not_found', { name });
    return skill;
  }

  /**
   * content returns the winning definition's SKILL.md text; a 403 when the path rule refuses its file, a 409
   * `skill_quarantined` when it is an install whose files changed since (agents read skills through this too).
   */
  async content(name: string, ctx: SkillContext): Promise<string> {
    const skill = await this.get(name, ctx);
    const failure = skill.diagnostics[0].failure;
    if (failure.code === PATH_NOT_ALLOWED) throw new ForbiddenError(`skill "${name}": ${failure.message}`, PATH_NOT_ALLOWED, { name, reason: failure.message });
    if (failure.code === QUARANTINED) {
      throw new ConflictError(`skill "${name}" is quarantined: ${failure.message}`, 'skill_quarantined', { name, expected_hash: failure.expected_hash, actual_hash: failure.actual_hash });
    }
    const all = await this.candidates(ctx);
    const winner = all.find((c) => c.name === name && c.file === skill.diagnostics[0].path);
    return winner?.content ?? '';
  }

  /** refs are the workspace snapshot's SkillRefs: the enabled winners of that workspace. */
  async refs(workspace: Workspace): Promise<{ dir: string; name: string; source: string }[]> {
    return (await this.list({ workspace })).filter((s) => s.enabled).map((s) => ({ dir: s.dir, name: s.name, source: s.source }));
  }
}
