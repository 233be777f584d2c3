import { readdir, mkdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { ArtifactStore } from '../../store/artifact-store.ts';
import { ConflictError, NotFoundError, PayloadTooLargeError, ServiceError, UnavailableError, ValidationError, InputError } from '../../store/errors.ts';
import type { EventBus } from '../../store/event-bus.ts';
import type { MarketplaceStore } from '../../store/marketplace-store.ts';
import { ARCHIVE_LIMIT_CODES, ArchiveRefusal, holdsLinks, inspectArchive, scanTree, treeHash, unpackArchive, verifyDigest, type SkillWarning } from '../marketplace/archive.ts';
import { fetchBounded, SourceError } from '../marketplace/http.ts';
import { compareVersions, SKILL_SLUG } from '../marketplace/index-source.ts';
import type { MarketLimits, MarketRow } from '../marketplace/types.ts';
import type { EgressPolicy } from '../security/egress.ts';
import { parseSkillFile } from './catalog.ts';
import type { InstalledSkills } from './types.ts';

/** InstallRecord is one marketplace-installed skill, as kept in Redis (the source of truth every replica reads). */
export interface InstallRecord {
  name: string;
  slug: string;
  /** The source id the archive came from. */
  registry: string;
  version: string;
  /** The verified archive's SHA-256: its address in the artifact store. */
  sha256: string;
  /** The unpacked tree's hash (archive.ts treeHash), re-checked whenever the skill is loaded. */
  tree_hash: string;
  installed_at: string;
  size_bytes: number;
  warnings: SkillWarning[];
}

/** LoadedInstall is an install unpacked in this process's cache, or why it could not be; `warning` what is off beside it. */
export interface LoadedInstall { record: InstallRecord; dir: string; error?: string; warning?: string }

/** SkillSource is what installs read of the marketplace: a skill entry by slug, and the download limits. */
export interface SkillSource {
  /** skill returns the merged row of a slug (undefined when no source lists it); 503 when no source serves skills. */
  skill(slug: string): Promise<MarketRow | undefined>;
  limits(): Promise<MarketLimits>;
  /** installedLimits unpack what is installed: the settings' limits, or the defaults and why while they are broken. */
  installedLimits(): Promise<{ limits: MarketLimits; problem?: string }>;
}

export interface InstallResult { hash: string; name: string; path: string; registry: string; slug: string; status: 'installed'; version: string }
/**
 * UpdateResult is one skill's update outcome. `failed` (update all only: one skill's refusal does not stop the
 * others) carries the refusal as `error` (its status, code and message), and the previous version stays.
 */
export interface UpdateResult {
  current_version: string; latest_version: string; name: string; path: string; slug: string;
  status: 'already up to date' | 'update available' | 'updated' | 'failed';
  error?: { status: number; code: string; message: string; evidence: Record<string, unknown> };
}
export interface RemovalResult { name: string; path: string; slug: string; status: 'removed' }

/** SkillInstallsOptions wire the installer. */
export interface SkillInstallsOptions {
  store: MarketplaceStore;
  artifacts: ArtifactStore;
  source: SkillSource;
  dataDir: string;
  bus: EventBus;
  logger: Logger;
  /** The egress rule every archive download passes (runtime/security/egress.ts). */
  egress: EgressPolicy;
}

/**
 * SkillInstalls installs, updates and removes marketplace skills. An archive is downloaded within the
 * limits, its SHA-256 checked against the source's before anything is unpacked, its entries inspected (no absolute
 * paths, `..`, escaping links or devices), unpacked, parsed and scanned; only then is it kept in the artifact store
 * and the install record switched in Redis, so a refused archive changes nothing and the previous version keeps
 * working. Each process unpacks an install into its own cache (`DATA_DIR/skills/.market/<sha256>/<name>`) on
 * first use, verifying the digest again, so a skill installed through one replica is served by every replica.
 */
export class SkillInstalls implements InstalledSkills {
  readonly cacheRoot: string;
  private readonly unpacking = new Map<string, Promise<string>>();
  private pruned = -1;

  constructor(private readonly o: SkillInstallsOptions) {
    this.cacheRoot = path.join(o.dataDir, 'skills', '.market');
  }

  /** dirOf is where an install is unpacked in this process. */
  dirOf(r: Pick<InstallRecord, 'sha256' | 'name'>): string {
    return path.join(this.cacheRoot, r.sha256, r.name);
  }

  /** records reads every install (name → record) and the skills revision. */
  async records(): Promise<{ revision: number; byName: Map<string, InstallRecord> }> {
    const { revision, installs } = await this.o.store.installs();
    return { revision, byName: new Map(Object.entries(installs).map(([k, v]) => [k, JSON.parse(v) as InstallRecord])) };
  }

  /** disabled lists the skill names turned off through `POST /api/skills/{name}/disable`. */
  disabled(): Promise<Set<string>> {
    return this.o.store.disabled();
  }

  /** setEnabled turns a skill on or off for every agent (any tier; the API checks the skill exists). */
  async setEnabled(name: string, enabled: boolean): Promise<void> {
    await this.o.store.setDisabled(name, !enabled);
  }

  /**
   * loaded unpacks (when needed) every install into this process's cache and returns them for the catalog; an
   * install whose archive is gone from Redis comes back with why. A broken `marketplace` section does not stop
   * them: each comes back with the problem as its warning.
   */
  async loaded(): Promise<LoadedInstall[]> {
    const { revision, byName } = await this.records();
    const { limits, problem } = byName.size ? await this.o.source.installedLimits() : { limits: undefined, problem: undefined };
    const warning = problem ? { warning: problem } : {};
    const out = await Promise.all([...byName.values()].map(async (record) => {
      try {
        return { record, dir: await this.materialize(record, limits), ...warning };
      } catch (err) {
        return { record, dir: this.dirOf(record), error: (err as Error).message, ...warning };
      }
    }));
    if (revision !== this.pruned) {
      this.pruned = revision;
      await this.prune(new Set([...byName.values()].map((r) => r.sha256))).catch((err) => this.o.logger.warn({ err: (err as Error).message }, 'skill cache prune failed'));
    }
    return out;
  }

  /**
   * materialize unpacks an install's archive from the artifact store into this process's cache, once, within
   * `limits` (default: installedLimits').
   */
  async materialize(record: InstallRecord, limits?: MarketLimits): Promise<string> {
    const dir = this.dirOf(record);
    if (await stat(path.join(dir, 'SKILL.md')).then(() => true, () => false)) {
      if (!(await holdsLinks(dir))) return dir;
      await rm(path.dirname(dir), { recursive: true, force: true });
    }
    let p = this.unpacking.get(record.sha256);
    if (!p) {
      p = (async () => {
        // NOTE: ArtifactStore.get verifies the digest of what it read; a missing or altered blob is undefined.
        const bytes = await this.o.artifacts.get(record.sha256);
        if (!bytes) throw new Error(`the archive ${record.sha256} of skill "${record.name}" is not in the artifact store`);
        const within = limits ?? (await this.o.source.installedLimits()).limits;
        const inspection = await inspectArchive(bytes, within);
        await mkdir(path.dirname(dir), { recursive: true });
        try {
          await unpackArchive(bytes, dir, inspection, within);
        } catch (err) {
          // NOTE: nothing half-made stays in the cache (the tree of another install is under another digest).
          await rm(path.dirname(dir), { recursive: true, force: true });
          throw err;
        }
        return dir;
      })().finally(() => this.unpacking.delete(record.sha256));
      this.unpacking.set(record.sha256, p);
    }
    return p;
  }

  /** prune removes cached trees no install refers to any more (an update's or a removal's leftovers). */
  private async prune(keep: Set<string>): Promise<void> {
    for (const d of await readdir(this.cacheRoot).catch(() => [] as string[])) {
      if (/^[0-9a-f]{64}$/.test(d) && !keep.has(d) && !this.unpacking.has(d)) await rm(path.join(this.cacheRoot, d), { recursive: true, force: true });
    }
  }

  private async row(slug: string): Promise<MarketRow> {
    if (!SKILL_SLUG.test(slug)) throw new InputError(`slug "${slug}" must be @author/name`, 'invalid_slug', { slug: 'must match ^@[^/\\s]+/[^/\\s]+$ (a skill name after the /)' });
    const row = await this.o.source.skill(slug);
    if (!row) throw new NotFoundError(`no marketplace source lists skill ${slug}`, 'skill_not_found', { slug });
    return row;
  }

  /**
   * fetchVerified downloads one version's archive and refuses it unless its SHA-256 is the published one and every
   * entry passes inspection; then unpacks, parses and scans it into this process's cache.
   */
  private async fetchVerified(row: MarketRow, version: string): Promise<{ record: InstallRecord; bytes: Buffer; dir: string }> {
    const v = row.versions?.find((x) => x.version === version);
    if (!v) throw new NotFoundError(`skill ${row.identity} has no version ${version}`, 'skill_version_not_found', { slug: row.identity, version, versions: row.versions?.map((x) => x.version) ?? [] });
    const limits = await this.o.source.limits();
    let bytes: Buffer;
    try {
      ({ body: bytes } = await fetchBounded(v.url, { timeoutMs: limits.downloadTimeoutMs, maxBytes: limits.maxArchiveBytes, egress: this.o.egress }));
    } catch (err) {
      if (err instanceof SourceError && err.errorClass === 'too_large') throw new PayloadTooLargeError(`${err.message}: nothing was installed`, 'archive_too_large', { max_archive_bytes: limits.maxArchiveBytes });
      const cls = err instanceof SourceError ? err.errorClass : 'unreachable';
      throw new UnavailableError(`the archive of ${row.identity} ${version} could not be downloaded (${cls}): ${(err as Error).message}; nothing was installed`, 'archive_download_failed', { error_class: cls, slug: row.identity, version });
    }
    const name = SKILL_SLUG.exec(row.identity)![2];
    let dir = '';
    try {
      verifyDigest(bytes, v.sha256);
      const inspection = await inspectArchive(bytes, limits);
      dir = this.dirOf({ sha256: v.sha256, name });
      await mkdir(path.dirname(dir), { recursive: true });
      await unpackArchive(bytes, dir, inspection, limits);
      const file = path.join(dir, 'SKILL.md');
      const parsed = parseSkillFile(await readFile(file, 'utf8'), 'marketplace', dir, file);
      if (parsed.diagnostic.state !== 'valid') {
        throw new ArchiveRefusal('skill_invalid', `the archive's SKILL.md is not valid: ${parsed.diagnostic.failure.message}`, { code: parsed.diagnostic.failure.code });
      }
      const record: InstallRecord = {
        name, slug: row.identity, registry: row.source, version, sha256: v.sha256, tree_hash: await treeHash(dir),
        installed_at: new Date().toISOString(), size_bytes: bytes.length, warnings: await scanTree(dir),
      };
      return { record, bytes, dir };
    } catch (err) {
      // NOTE: a refused archive leaves nothing behind (a tree another install uses is under another digest).
      if (dir && !(await this.inUse(v.sha256))) await rm(path.dirname(dir), { recursive: true, force: true });
      if (err instanceof ArchiveRefusal) {
        const status = ARCHIVE_LIMIT_CODES.includes(err.code) ? PayloadTooLargeError : ValidationError;
        throw new status(`${err.message}; nothing was installed`, err.code, { slug: row.identity, version, ...err.evidence });
      }
      throw err;
    }
  }

  private async inUse(sha256: string): Promise<boolean> {
    return [...(await this.records()).byName.values()].some((r) => r.sha256 === sha256);
  }

  /** commit keeps the archive, switches the install record (compared on `expected`), and drops what it replaced. */
  private async commit(record: InstallRecord, bytes: Buffer, expected: InstallRecord | undefined, event: 'skill.installed' | 'skill.updated'): Promise<void> {
    await this.o.artifacts.put(bytes, 0);
    const put = await this.o.store.putInstall(record.name, expected?.sha256 ?? '', JSON.stringify(record));
    if (!put.ok) {
      if (!(await this.inUse(record.sha256))) await this.o.artifacts.delete(record.sha256);
      const other = put.current ? (JSON.parse(put.current) as InstallRecord) : undefined;
      throw new ConflictError(other ? `skill "${record.name}" is installed (${other.slug} ${other.version}); update it or remove it first` : `skill "${record.name}" was removed meanwhile`, 'skill_install_conflict', { name: record.name, installed_slug: other?.slug ?? '', installed_version: other?.version ?? '' });
    }
    if (expected && expected.sha256 !== record.sha256 && !(await this.inUse(expected.sha256))) await this.o.artifacts.delete(expected.sha256);
    await this.o.bus.publish({
      type: event, source: 'skills', outcome: 'success', summary: `${event === 'skill.installed' ? 'installed' : 'updated'} skill ${record.name} ${record.version} from ${record.registry}`,
      data: { name: record.name, slug: record.slug, version: record.version, previous_version: expected?.version ?? '', registry: record.registry, hash: record.tree_hash, sha256: record.sha256, warnings: record.warnings.length },
    });
    this.o.logger.info({ name: record.name, slug: record.slug, version: record.version }, event);
  }

  /** install installs `{slug, version?}` (latest by default): 409 when a skill of that name is installed already. */
  async install(body: { slug?: unknown; version?: unknown }): Promise<InstallResult> {
    // NOTE: the skills marketplace answers a bad body 400, as its contract says (not the 422 of other families).
    if (typeof body.slug !== 'string' || !body.slug) throw new InputError('slug is required', 'invalid_body', { slug: 'is required' });
    if (body.version !== undefined && (typeof body.version !== 'string' || !body.version.trim())) throw new InputError('version must be a non-empty string', 'invalid_body', { version: 'must be a non-empty string' });
    const row = await this.row(body.slug.trim());
    const name = SKILL_SLUG.exec(row.identity)![2];
    const existing = (await this.records()).byName.get(name);
    if (existing) {
      throw new ConflictError(`skill "${name}" is installed (${existing.slug} ${existing.version}); use update`, 'skill_already_installed', { name, installed_slug: existing.slug, installed_version: existing.version });
    }
    const { record, bytes, dir } = await this.fetchVerified(row, (body.version as string | undefined)?.trim() ?? row.version);
    await this.commit(record, bytes, undefined, 'skill.installed');
    return { hash: record.tree_hash, name, path: dir, registry: record.registry, slug: record.slug, status: 'installed', version: record.version };
  }

  /** update brings `name` (or every marketplace skill) to its latest version; `check_only` only says which could move. */
  async update(body: { name?: unknown; all?: unknown; check_only?: unknown }): Promise<UpdateResult[]> {
    const problems: Record<string, string> = {};
    if (body.name !== undefined && (typeof body.name !== 'string' || !body.name)) problems.name = 'must be a non-empty string';
    if (body.all !== undefined && typeof body.all !== 'boolean') problems.all = 'must be a boolean';
    if (body.check_only !== undefined && typeof body.check_only !== 'boolean') problems.check_only = 'must be a boolean';
    if (body.name !== undefined && body.all === true) problems.all = 'must not be given with name';
    if (Object.keys(problems).length) throw new InputError(Object.entries(problems).map(([k, v]) => `${k} ${v}`).join('; '), 'invalid_body', problems);
    const { byName } = await this.records();
    let targets = [...byName.values()].sort((a, b) => a.name.localeCompare(b.name));
    if (typeof body.name === 'string') {
      const one = byName.get(body.name);
      if (!one) throw new NotFoundError(`skill "${body.name}" was not installed from the marketplace`, 'skill_not_installed', { name: body.name });
      targets = [one];
    }
    const out: UpdateResult[] = [];
    for (const cur of targets) {
      const row = await this.o.source.skill(cur.slug);
      const base = { current_version: cur.version, latest_version: row?.version ?? '', name: cur.name, path: this.dirOf(cur), slug: cur.slug };
      if (!row || compareVersions(row.version, cur.version) <= 0) { out.push({ ...base, status: 'already up to date' }); continue; }
      if (body.check_only === true) { out.push({ ...base, status: 'update available' }); continue; }
      try {
        const { record, bytes, dir } = await this.fetchVerified(row, row.version);
        await this.commit(record, bytes, cur, 'skill.updated');
        out.push({ ...base, path: dir, status: 'updated' });
      } catch (err) {
        // NOTE: one named skill answers its refusal as the call's; updating all reports each and goes on.
        if (typeof body.name === 'string' || !(err instanceof ServiceError)) throw err;
        out.push({ ...base, status: 'failed', error: { status: err.status, code: err.code, message: err.message, evidence: err.evidence } });
        this.o.logger.warn({ name: cur.name, slug: cur.slug, version: row.version, code: err.code }, 'skill update refused');
      }
    }
    return out;
  }

  /** remove uninstalls a marketplace skill; `exists` tells a skill of another tier (422) from none (404). */
  async remove(name: string, exists: (name: string) => Promise<boolean>): Promise<RemovalResult> {
    const cur = (await this.records()).byName.get(name);
    if (!cur) {
      if (await exists(name)) throw new ValidationError(`skill "${name}" was not installed from the marketplace; only marketplace skills can be removed here`, 'not_marketplace_skill', { name });
      throw new NotFoundError(`skill "${name}" does not exist`, 'skill_not_found', { name });
    }
    const put = await this.o.store.putInstall(name, cur.sha256, '');
    if (!put.ok) throw new ConflictError(`skill "${name}" changed meanwhile; try again`, 'skill_install_conflict', { name });
    if (!(await this.inUse(cur.sha256))) await this.o.artifacts.delete(cur.sha256);
    const dir = this.dirOf(cur);
    await rm(path.dirname(dir), { recursive: true, force: true });
    await this.o.bus.publish({
      type: 'skill.removed', source: 'skills', outcome: 'info', summary: `removed skill ${name} (${cur.slug} ${cur.version})`,
      data: { name, slug: cur.slug, version: cur.version, registry: cur.registry },
    });
    return { name, path: dir, slug: cur.slug, status: 'removed' };
  }
}
