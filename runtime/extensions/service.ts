import { rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { ExtensionManifest } from '../../codecs/extension-manifest.ts';
import { sha256Hex, type ArtifactStore } from '../../store/artifact-store.ts';
import { ConflictError, InputError, NotFoundError, PayloadTooLargeError, UnavailableError, ValidationError } from '../../store/errors.ts';
import type { EventBus } from '../../store/event-bus.ts';
import type { ExtensionStore } from '../../store/extension-store.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import { ARCHIVE_LIMIT_CODES, ArchiveRefusal, verifyDigest } from '../marketplace/archive.ts';
import { entryTrust, searchView } from '../marketplace/catalog.ts';
import { fetchBounded, SourceError } from '../marketplace/http.ts';
import { compareVersions } from '../marketplace/index-source.ts';
import type { Marketplace } from '../marketplace/marketplace.ts';
import type { MarketLimits, MarketRow } from '../marketplace/types.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { realPath } from '../security/workspace-roots.ts';
import { dirChecksum, findManifest, packDir, parseChecksum, readSkills, type ExtensionCache } from './artifacts.ts';
import { extensionToolId, planChildren } from './children.ts';
import type { ExtensionProjector, Projection } from './projector.ts';
import {
  diagnostic, sameInstall, type DaemonStatus, type Diagnostic, type ExtensionMarketEntry, type ExtensionRecord, type ExtensionRemoval, type ExtensionUpdate,
  type ExtensionView, type Provenance, type Trust,
} from './types.ts';

/** INSTALL_FIELDS are the fields of an install body. */
export const INSTALL_FIELDS = ['path', 'checksum', 'slug', 'version', 'source', 'asset', 'allow_unverified'] as const;
/** UPDATE_FIELDS are the fields of an update body. */
export const UPDATE_FIELDS = ['version', 'check_only', 'allow_unverified'] as const;
/** RESTARTABLE are the daemon states an enable of an enabled extension restarts from (stopped or waiting after failures). */
const RESTARTABLE: ReadonlySet<string> = new Set(['CrashLoop', 'Backoff']);
/** MAX_PATH is the longest `path` an install takes. */
const MAX_PATH = 4096;

/** ExtensionServiceOptions wire the extensions family. */
export interface ExtensionServiceOptions {
  store: ExtensionStore;
  resources: ResourceStore;
  artifacts: ArtifactStore;
  cache: ExtensionCache;
  marketplace: Marketplace;
  projector: ExtensionProjector;
  security: SecurityPolicy;
  bus: EventBus;
  logger: Logger;
}

/** Artifact is a verified archive ready to be installed, with where it came from. */
interface Artifact {
  bytes: Buffer;
  checksumVerified: boolean;
  allowUnverified: boolean;
  installedFrom: string;
  slug: string;
  sourceUrl: string;
  registry: string;
  tier: string;
  /** A directory install's checksum, which the packed tree must still have once unpacked. */
  dirChecksum?: string;
}

type Body = Record<string, unknown>;

const optionalString = (b: Body, f: string, problems: Record<string, string>, max = 256): string | undefined => {
  const v = b[f];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || !v.trim()) { problems[f] = 'must be a non-empty string'; return undefined; }
  if (v.length > max) { problems[f] = `must be at most ${max} characters`; return undefined; }
  return v.trim();
};
const optionalBool = (b: Body, f: string, problems: Record<string, string>): boolean => {
  const v = b[f];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') { problems[f] = 'must be a boolean'; return false; }
  return v;
};
const refuse = (problems: Record<string, string>) => {
  if (Object.keys(problems).length) throw new InputError(Object.entries(problems).map(([k, v]) => `${k} ${v}`).join('; '), 'invalid_body', problems);
};

/**
 * ExtensionService installs, updates, enables, disables and removes extensions, from a
 * local path (a directory or a .tar.gz, with its checksum) or a marketplace `index` source's extension
 * entry (its archive URL and SHA-256). An artifact is verified (checksum, every archive entry inspected, the manifest
 * decoded, its resources decoded and admitted by the security policy) before anything is kept; then it goes into the
 * artifact store (content-addressed, so every replica has it) and the record is compared-and-set in Redis. A refused
 * install changes nothing. Resources and daemons follow the record: ExtensionProjector, ExtensionSupervisor.
 */
export class ExtensionService {
  constructor(private readonly o: ExtensionServiceOptions) {}

  /** records reads every installed extension. */
  async records(): Promise<Map<string, ExtensionRecord>> {
    const { records } = await this.o.store.all();
    return new Map(Object.entries(records).map(([k, v]) => [k, JSON.parse(v) as ExtensionRecord]));
  }

  private async record(name: string): Promise<ExtensionRecord> {
    const raw = await this.o.store.get(name);
    if (!raw) throw new NotFoundError(`extension "${name}" is not installed`, 'extension_not_found', { name });
    return JSON.parse(raw) as ExtensionRecord;
  }

  /**
   * localSkillDir maps a skill record's `dir` (a path in the cache of the process that projected it) to the same
   * skill in this process's cache, unpacking the extension's artifact (verified) when it is not here yet: an API
   * replica with its own DATA_DIR, or an empty disk, serves the extension's skills all the same.
   */
  async localSkillDir(dir: string, name: string): Promise<string> {
    const m = /[\\/]([0-9a-f]{64})[\\/](.+)$/.exec(dir);
    const r = await this.record(name);
    if (!m || m[1] !== r.sha256) throw new Error(`${dir} is not a skill of extension "${name}" ${r.manifest.version}`);
    return path.join(await this.o.cache.materialize(r), m[2]);
  }

  /** list answers every installed extension's view, by name. */
  async list(): Promise<ExtensionView[]> {
    const [records, { statuses }, projections] = await Promise.all([this.records(), this.o.store.statuses(), this.o.store.projections()]);
    return [...records.values()].sort((a, b) => a.name.localeCompare(b.name))
      .map((r) => this.view(r, parse<DaemonStatus>(statuses[r.name]), parse<Projection>(projections[r.name])));
  }

  /** get answers one extension's view. */
  async get(name: string): Promise<ExtensionView> {
    const r = await this.record(name);
    const [status, projections] = await Promise.all([this.o.store.status(name), this.o.store.projections()]);
    return this.view(r, parse<DaemonStatus>(status), parse<Projection>(projections[name]));
  }

  /** provenance answers where an extension came from and the trust decision taken. */
  async provenance(name: string): Promise<Provenance> {
    return (await this.record(name)).provenance;
  }

  /** install installs from exactly one of `path` (with `checksum`) or a marketplace `slug` (`version?`, `source?`). */
  async install(body: Body, installedBy: string): Promise<ExtensionView> {
    const problems: Record<string, string> = {};
    const p = optionalString(body, 'path', problems, MAX_PATH);
    const slug = optionalString(body, 'slug', problems, 64);
    const checksum = optionalString(body, 'checksum', problems, 80);
    const version = optionalString(body, 'version', problems, 64);
    const source = optionalString(body, 'source', problems, 253);
    const allowUnverified = optionalBool(body, 'allow_unverified', problems);
    if (body.asset !== undefined) problems.asset = 'is not supported: a marketplace extension entry has one artifact';
    refuse(problems);
    if (!p && !slug) throw new InputError('path or slug is required', 'invalid_body', { path: 'path or slug is required' });
    if (p && slug) throw new InputError('path and slug are mutually exclusive', 'invalid_body', { path: 'is mutually exclusive with slug', slug: 'is mutually exclusive with path' });
    const limits = await this.o.marketplace.limits();
    let artifact: Artifact;
    if (p) {
      if (version !== undefined || source !== undefined) throw new InputError('version and source go with slug, not path', 'invalid_body', { ...(version ? { version: 'goes with slug' } : {}), ...(source ? { source: 'goes with slug' } : {}) });
      if (!checksum) throw new InputError('checksum is required with path (the SHA-256 of the archive, or of the directory tree: README "Extensions")', 'invalid_body', { checksum: 'is required with path' });
      artifact = await this.fromPath(p, checksum, allowUnverified, limits);
    } else {
      if (checksum !== undefined) throw new InputError('checksum goes with path; a marketplace entry publishes its own', 'invalid_body', { checksum: 'goes with path' });
      const row = await this.row(slug!, source);
      const existing = await this.o.store.get(row.identity);
      if (existing) throw this.exists(JSON.parse(existing) as ExtensionRecord);
      if (version !== undefined && version !== row.version) throw new NotFoundError(`extension ${slug} has no version ${version} in ${row.source}; it lists ${row.version}`, 'extension_version_not_found', { slug, version, versions: [row.version] });
      artifact = await this.fromMarket(row, allowUnverified, limits);
    }
    return this.commit(artifact, undefined, installedBy, 'extension.installed');
  }

  /** update brings a marketplace extension to its source's version; `check_only` only says whether it could move. */
  async update(name: string, body: Body, installedBy: string): Promise<ExtensionUpdate> {
    const problems: Record<string, string> = {};
    const version = optionalString(body, 'version', problems, 64);
    const checkOnly = optionalBool(body, 'check_only', problems);
    const allowUnverified = optionalBool(body, 'allow_unverified', problems);
    refuse(problems);
    const cur = await this.record(name);
    const prov = cur.provenance;
    if (!prov.slug) throw new ValidationError(`extension "${name}" was installed from ${prov.installed_from}, not the marketplace; install the new version from its path after removing this one`, 'not_marketplace_extension', { name, installed_from: prov.installed_from });
    const row = await this.row(prov.slug, prov.installed_from.replace(/^marketplace:/, '') || undefined);
    const base: ExtensionUpdate = { current_version: cur.manifest.version, latest_version: row.version, name, path: this.o.cache.dirOf(cur.sha256), registry: row.source, slug: prov.slug, status: '' };
    if (version !== undefined && version !== row.version) throw new NotFoundError(`extension ${prov.slug} has no version ${version}; its source lists ${row.version}`, 'extension_version_not_found', { slug: prov.slug, version, versions: [row.version] });
    if (version === undefined && compareVersions(row.version, cur.manifest.version) <= 0) return { ...base, status: 'already up to date' };
    if (checkOnly) return { ...base, status: 'update available' };
    const artifact = await this.fromMarket(row, allowUnverified || prov.allow_unverified, await this.o.marketplace.limits());
    const view = await this.commit(artifact, cur, installedBy, 'extension.updated');
    return { ...base, path: this.o.cache.dirOf(view.provenance.checksum_sha256), status: 'updated' };
  }

  /**
   * setEnabled enables or disables an extension: its records and daemon follow (a new generation starts afresh).
   * Enabling an enabled extension whose daemon is stopped after failures (CrashLoop) or waiting to restart
   * (Backoff) starts it again at once with a fresh failure count: what an operator who fixed the cause asks for.
   */
  async setEnabled(name: string, enabled: boolean): Promise<ExtensionView> {
    const cur = await this.record(name);
    if (cur.enabled !== enabled || (enabled && cur.manifest.daemon && RESTARTABLE.has((await this.currentStatus(cur))?.state ?? ''))) {
      const next: ExtensionRecord = { ...cur, enabled, generation: cur.generation + 1, updated_at: new Date().toISOString() };
      const put = await this.o.store.put(name, cur.generation, JSON.stringify(next));
      if (!put.ok) throw new ConflictError(`extension "${name}" changed meanwhile; try again`, 'extension_conflict', { name });
      await this.o.projector.enqueue([name]);
      await this.o.bus.publish({
        type: enabled ? 'extension.enabled' : 'extension.disabled', source: 'extensions', outcome: 'info',
        summary: `${enabled ? 'enabled' : 'disabled'} extension ${name} ${cur.manifest.version}`, data: { name, version: cur.manifest.version, generation: next.generation },
      });
    }
    return this.get(name);
  }

  /** currentStatus is the daemon status of a record's install (none when the status is of another). */
  private async currentStatus(r: ExtensionRecord): Promise<DaemonStatus | undefined> {
    const s = parse<DaemonStatus>(await this.o.store.status(r.name));
    return s && sameInstall(s, r) ? s : undefined;
  }

  /** remove uninstalls an extension: 409 while a bundle activation uses one of its bundles. */
  async remove(name: string): Promise<ExtensionRemoval> {
    const cur = await this.record(name);
    const users = (await this.o.resources.list({ kind: 'bundle.activation' }))
      .filter((a) => String((a.spec as { extension_name?: string }).extension_name ?? '').toLowerCase() === name.toLowerCase());
    if (users.length) {
      throw new ConflictError(`extension "${name}" has active bundles: bundle.activation ${users.map((u) => `"${u.id}"`).join(', ')}; deactivate them first`, 'extension_has_active_bundles', { name, activations: users.map((u) => u.id) });
    }
    const put = await this.o.store.put(name, cur.generation, '');
    if (!put.ok) throw new ConflictError(`extension "${name}" changed meanwhile; try again`, 'extension_conflict', { name });
    await this.o.projector.enqueue([name]);
    await this.o.store.forget(name);
    if (!(await this.inUse(cur.sha256))) {
      await this.o.artifacts.delete(cur.sha256);
      await this.o.cache.drop(cur.sha256);
    }
    await this.o.bus.publish({
      type: 'extension.removed', source: 'extensions', outcome: 'info', summary: `removed extension ${name} ${cur.manifest.version}`,
      data: { name, version: cur.manifest.version, installed_from: cur.provenance.installed_from },
    });
    this.o.logger.info({ extension: name }, 'extension.removed');
    return { name, path: this.o.cache.dirOf(cur.sha256), status: 'removed' };
  }

  /** marketplace lists the extension entries of the marketplace's sources (`q`, `source`, `limit`). */
  async marketplace(q: string, source: string | undefined, limit: number): Promise<ExtensionMarketEntry[]> {
    const s = await this.o.marketplace.settings();
    // NOTE: no source serving extensions is an empty listing (a page of the marketplace says the same), not an error.
    const views = await this.o.marketplace.catalog.views(s.sources.filter((src) => src.kinds.includes('extension')));
    return searchView(views.get('extension'), q).filter((r) => !source || r.source === source).slice(0, limit).map((r) => ({
      author: r.author, description: r.description, downloads: r.downloads, name: r.identity, slug: r.install_slug, source: r.source,
      trust: entryTrust(r),
      type: r.transport || 'plugin', version: r.version,
    }));
  }

  /** installedVersions maps installed extension names to their versions (the marketplace's installed-state). */
  async installedVersions(): Promise<Map<string, string>> {
    return new Map([...(await this.records()).values()].map((r) => [r.name, r.manifest.version]));
  }

  private async row(slug: string, source: string | undefined): Promise<MarketRow> {
    const s = await this.o.marketplace.configured('extension');
    const view = (await this.o.marketplace.catalog.views(s.sources)).get('extension');
    const row = view?.rows.find((r) => r.identity === slug && (!source || r.source === source));
    if (!row) throw new NotFoundError(`no marketplace source${source ? ` "${source}"` : ''} lists extension "${slug}"`, 'extension_not_in_marketplace', { slug, source: source ?? '' });
    return row;
  }

  private exists(r: ExtensionRecord): ConflictError {
    return new ConflictError(`extension "${r.name}" is installed (${r.manifest.version} from ${r.provenance.installed_from}); update or remove it first`, 'extension_exists', { name: r.name, installed_version: r.manifest.version });
  }

  /** fromPath reads a path install: a directory (checksum over its tree) or an archive file (checksum of its bytes). */
  private async fromPath(p: string, checksum: string, allowUnverified: boolean, limits: MarketLimits): Promise<Artifact> {
    if (!path.isAbsolute(p)) throw new InputError('path must be absolute', 'invalid_path', { path: 'must be an absolute path' });
    const why = this.o.security.paths.refusal(p);
    if (why) throw new ValidationError(`path not allowed: ${why}`, 'path_not_allowed', { path: why });
    const want = parseChecksum(checksum);
    if (!want) throw new InputError('checksum must be 64 hex characters (optionally after sha256:)', 'invalid_checksum', { checksum: 'must be sha256:<64 hex>' });
    const st = await stat(p).catch(() => undefined);
    if (!st) throw new InputError(`path ${p} does not exist`, 'path_not_found', { path: 'does not exist' });
    // NOTE: every file is read through the path rule (no link followed, its opened location judged again, inside
    // the directory given), and a mismatch never echoes what was computed: a checksum answer must not be a way
    // to learn the digest of a file the caller cannot read.
    const paths = this.o.security.paths;
    const root = realPath(p);
    const readConfined = async (file: string, maxBytes: number, code: string): Promise<Buffer> => {
      const r = await paths.readBytes(file, maxBytes, st.isDirectory() ? root : undefined);
      if (r.ok) return r.bytes;
      const rel = st.isDirectory() ? `"${path.relative(root, file)}" ` : '';
      if (r.tooLarge) throw new PayloadTooLargeError(`${rel}${r.reason}; nothing was installed`, code, code === 'archive_too_large' ? { max_archive_bytes: maxBytes } : { max_expanded_bytes: limits.maxExpandedBytes });
      throw new ValidationError(`path not allowed: ${rel}${r.reason}; nothing was installed`, 'path_not_allowed', { path: `${rel}${r.reason}` });
    };
    let bytes: Buffer;
    try {
      if (st.isDirectory()) {
        const got = await dirChecksum(root, limits.maxFiles, { maxBytes: limits.maxExpandedBytes, read: (file, max) => readConfined(file, max, 'too_large_expanded') });
        if (got !== want) throw new InputError(`checksum mismatch: the directory's checksum is not sha256:${want}; nothing was installed`, 'checksum_mismatch', { checksum: 'does not match the directory\'s checksum (README "Extensions", Checksum)', expected: want });
        bytes = await packDir(root, limits.maxArchiveBytes);
      } else if (st.isFile()) {
        bytes = await readConfined(root, limits.maxArchiveBytes, 'archive_too_large');
        if (sha256Hex(bytes) !== want) throw new InputError(`checksum mismatch: the archive's SHA-256 is not ${want}; nothing was installed`, 'checksum_mismatch', { checksum: 'does not match the SHA-256 of the archive\'s bytes', expected: want });
      } else {
        throw new InputError(`path ${p} is neither a directory nor a file`, 'invalid_path', { path: 'must be a directory or a .tar.gz file' });
      }
    } catch (err) {
      throw refusal(err);
    }
    return { bytes, checksumVerified: true, allowUnverified, installedFrom: `path:${p}`, slug: '', sourceUrl: '', registry: '', tier: 'local', dirChecksum: st.isDirectory() ? want : undefined };
  }

  /** fromMarket downloads an entry's archive within the limits and checks its published SHA-256 (or needs allow_unverified). */
  private async fromMarket(row: MarketRow, allowUnverified: boolean, limits: MarketLimits): Promise<Artifact> {
    const e = row.detail.extension;
    if (!e?.artifact_url) throw new ValidationError(`extension ${row.identity} in ${row.source} has no artifact_url to install from`, 'extension_not_installable', { slug: row.identity });
    if (!e.digest_sha256 && !allowUnverified) {
      throw new ValidationError(`extension ${row.identity} in ${row.source} publishes no SHA-256, so its archive cannot be verified; install it with allow_unverified: true to accept that`, 'checksum_unverified', { allow_unverified: 'must be true to install an entry without a published sha256', slug: row.identity });
    }
    let bytes: Buffer;
    try {
      ({ body: bytes } = await fetchBounded(e.artifact_url, { timeoutMs: limits.downloadTimeoutMs, maxBytes: limits.maxArchiveBytes, egress: this.o.security.egress }));
    } catch (err) {
      if (err instanceof SourceError && err.errorClass === 'too_large') throw new PayloadTooLargeError(`${err.message}: nothing was installed`, 'archive_too_large', { max_archive_bytes: limits.maxArchiveBytes });
      const cls = err instanceof SourceError ? err.errorClass : 'unreachable';
      throw new UnavailableError(`the archive of ${row.identity} could not be downloaded (${cls}): ${(err as Error).message}; nothing was installed`, 'archive_download_failed', { error_class: cls, slug: row.identity });
    }
    try {
      if (e.digest_sha256) verifyDigest(bytes, e.digest_sha256);
    } catch (err) {
      throw refusal(err);
    }
    return {
      bytes, checksumVerified: Boolean(e.digest_sha256), allowUnverified, installedFrom: `marketplace:${row.source}`, slug: row.identity,
      sourceUrl: safeUrl(e.artifact_url), registry: row.source, tier: row.tier,
    };
  }

  /**
   * commit unpacks and checks a verified artifact (manifest, skills, every record it would project admitted by the
   * security policy, the daemon's command allowed), keeps it in the artifact store and switches the record
   * (compared on the generation it replaces). Anything refused leaves nothing behind.
   */
  private async commit(a: Artifact, cur: ExtensionRecord | undefined, installedBy: string, event: 'extension.installed' | 'extension.updated'): Promise<ExtensionView> {
    const sha256 = sha256Hex(a.bytes);
    const dir = this.o.cache.dirOf(sha256);
    const fresh = !(await stat(dir).then(() => true, () => false));
    let record: ExtensionRecord;
    try {
      const tree = await this.o.cache.unpackVerified(a.bytes, sha256).catch((err) => { throw refusal(err); });
      // NOTE: the directory is read twice (checksum, then pack); a file changed in between is not installed.
      if (a.dirChecksum && (await dirChecksum(dir, Infinity)) !== a.dirChecksum) {
        throw new InputError('checksum mismatch: the directory changed while it was read; nothing was installed', 'checksum_mismatch', { checksum: 'the directory changed while it was read', expected: a.dirChecksum });
      }
      const found = await findManifest(dir);
      if (!found.ok) {
        const fields = Object.fromEntries(found.errors.map((e) => [e.path, e.message]));
        throw new InputError(`the extension manifest is invalid: ${found.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}; nothing was installed`, 'manifest_invalid', fields);
      }
      const m = found.manifest;
      if (cur && m.name !== cur.name) throw new InputError(`the new version's manifest names "${m.name}", not "${cur.name}"`, 'manifest_incompatible', { name: `must stay "${cur.name}"` });
      if (a.slug && m.name !== a.slug) throw new InputError(`the archive's manifest names "${m.name}", not the entry's "${a.slug}"`, 'manifest_incompatible', { name: `must be "${a.slug}"` });
      if (!cur) {
        const other = await this.o.store.get(m.name);
        if (other) throw this.exists(JSON.parse(other) as ExtensionRecord);
      }
      const skills = await readSkills(dir, m);
      if (Object.keys(skills.problems).length) throw new InputError(`the extension's skills are invalid: ${Object.entries(skills.problems).map(([k, v]) => `${k}: ${v}`).join('; ')}`, 'manifest_invalid', skills.problems);
      const now = new Date().toISOString();
      const trust: Trust = {
        allow_unverified: a.allowUnverified, checksum_verified: a.checksumVerified, decision: a.checksumVerified ? 'verified' : 'allowed_unverified', registry_tier: a.tier,
        warnings: a.checksumVerified ? [] : [diagnostic({ code: 'checksum_unverified', message: 'the artifact was installed without a checksum to verify it against (allow_unverified)' })],
      };
      record = {
        name: m.name, generation: (cur?.generation ?? 0) + 1, enabled: cur?.enabled ?? true, manifest: m, sha256, tree_hash: tree, skills: skills.skills,
        provenance: {
          allow_unverified: a.allowUnverified, checksum_sha256: sha256, checksum_verified: a.checksumVerified, installed_at: now, installed_by: installedBy,
          installed_from: a.installedFrom, permissions: m.permissions, registry_tier: a.tier, slug: a.slug, source_url: a.sourceUrl, trust, warnings: trust.warnings,
        },
        updated_at: now,
      };
      this.admit(record, dir);
      await this.serverNamesFree(record);
    } catch (err) {
      if (fresh && !(await this.inUse(sha256))) await rm(dir, { recursive: true, force: true });
      throw err;
    }
    await this.o.artifacts.put(a.bytes, 0);
    const put = await this.o.store.put(record.name, cur?.generation ?? 0, JSON.stringify(record));
    if (!put.ok) {
      if (!(await this.inUse(sha256))) await this.o.artifacts.delete(sha256);
      const other = put.current ? (JSON.parse(put.current) as ExtensionRecord) : undefined;
      throw other && !cur ? this.exists(other) : new ConflictError(`extension "${record.name}" changed meanwhile; try again`, 'extension_conflict', { name: record.name });
    }
    if (cur && cur.sha256 !== sha256 && !(await this.inUse(cur.sha256))) {
      await this.o.artifacts.delete(cur.sha256);
      await this.o.cache.drop(cur.sha256);
    }
    await this.o.projector.enqueue([record.name]);
    await this.o.bus.publish({
      type: event, source: 'extensions', outcome: 'success',
      summary: `${event === 'extension.installed' ? 'installed' : 'updated'} extension ${record.name} ${record.manifest.version} from ${a.installedFrom}`,
      data: { name: record.name, version: record.manifest.version, previous_version: cur?.manifest.version ?? '', installed_from: a.installedFrom, sha256, checksum_verified: a.checksumVerified, generation: record.generation },
    });
    this.o.logger.info({ extension: record.name, version: record.manifest.version, from: a.installedFrom }, event);
    return this.get(record.name);
  }

  /** admit runs the security policy over everything the extension would run or project, as an admin's write. */
  private admit(r: ExtensionRecord, dir: string): void {
    const plan = planChildren(r, dir);
    if (!plan.ok) throw new InputError(`the extension's resources are invalid: ${plan.message}`, 'manifest_invalid', { resources: plan.message });
    const d = r.manifest.daemon;
    if (d) {
      const c = this.o.security.exec.check({ command: d.command, shell: false });
      if (!c.ok) throw new ValidationError(`daemon.command: ${c.reason}; nothing was installed`, 'command_not_allowed', { 'daemon.command': c.reason });
      for (const [k, ref] of Object.entries(d.secret_env)) {
        const why = this.o.security.secrets.refusal(ref);
        if (why) throw new ValidationError(`daemon.secret_env.${k}: ${why}`, 'secret_ref_not_allowed', { [`daemon.secret_env.${k}`]: why });
      }
    }
    for (const c of plan.children) this.o.security.admit(c.kind, c.spec, 'admin');
  }

  /**
   * serverNamesFree refuses MCP servers whose name another `mcp_server` record (not this extension's) already serves:
   * the tool catalog goes by spec.name, so the second one would silently take over or lose the first one's tools
   * (its records are global; a workspace's server of the same name shadows it there by design).
   */
  private async serverNamesFree(r: ExtensionRecord): Promise<void> {
    const servers = r.manifest.resources.mcp_servers as { name?: unknown }[];
    if (!servers.length) return;
    const others = (await this.o.resources.list({ kind: 'mcp_server', scope: { kind: 'global' } }))
      .filter((x) => !(x.owner.kind === 'extension' && x.owner.id === r.name));
    for (const [i, s] of servers.entries()) {
      const holder = others.find((x) => (x.spec as { name?: unknown }).name === s.name);
      if (holder) {
        throw new ConflictError(`mcp_server "${holder.id}" already serves the name "${String(s.name)}" of resources.mcp_servers[${i}]; nothing was installed`, 'mcp_server_name_taken', { [`resources.mcp_servers[${i}].name`]: s.name, id: holder.id });
      }
    }
  }

  private async inUse(sha256: string): Promise<boolean> {
    return [...(await this.records()).values()].some((r) => r.sha256 === sha256);
  }

  /** view composes the spec's `Extension` from the record, its daemon's status and its last projection. */
  private view(r: ExtensionRecord, s: DaemonStatus | undefined, p: Projection | undefined): ExtensionView {
    const m: ExtensionManifest = r.manifest;
    const current = s && sameInstall(s, r) ? s : undefined;
    const diagnostics: Diagnostic[] = [...r.provenance.warnings];
    let state = 'Ready';
    if (!r.enabled) state = 'Disabled';
    else {
      if (p && p.generation === r.generation && !p.ready) diagnostics.push(diagnostic({ code: p.reason, severity: 'error', message: p.message }));
      if (!p || p.generation !== r.generation) state = 'Pending';
      if (m.daemon) {
        const ds = current?.state ?? 'Starting';
        if (['CrashLoop', 'MissingEnv', 'Refused', 'Backoff'].includes(ds)) {
          diagnostics.push(diagnostic({ code: ds === 'Refused' ? 'CommandNotAllowed' : ds, severity: ds === 'Backoff' ? 'warning' : 'error', message: current!.health_message || current!.last_error, evidence: { last_error: current!.last_error, failures: current!.failures } }));
        } else if (ds === 'Running' && current?.health === 'degraded') {
          // NOTE: the daemon runs and says it is degraded: shown as such, with what its health check said.
          diagnostics.push(diagnostic({ code: 'DaemonDegraded', severity: 'warning', message: current.health_message || 'the daemon\'s health check answered degraded', evidence: { health: current.health, health_message: current.health_message } }));
        } else if (ds !== 'Running' || current?.health !== 'ok') {
          if (state === 'Ready') state = 'Pending';
        }
      }
      if (diagnostics.some((d) => d.severity === 'error' || d.code === 'Backoff' || d.code === 'DaemonDegraded')) state = 'Degraded';
    }
    const running = Boolean(current?.running && r.enabled);
    return {
      actions: r.enabled ? ['disable', 'remove', ...(r.provenance.slug ? ['update'] : [])] : ['enable', 'remove', ...(r.provenance.slug ? ['update'] : [])],
      bundles: m.resources.bundles.map((b: any) => ({ description: String(b.description ?? ''), name: String(b.name), profiles: (b.profiles ?? []).map((x: any) => String(x.name)) })),
      capabilities: m.provides, daemon_running: running, diagnostics, enabled: r.enabled,
      health: r.enabled && m.daemon ? current?.health ?? 'unknown' : '', health_message: current?.health_message ?? '', last_error: current?.last_error ?? '',
      missing_env: current?.missing_env ?? [], name: r.name, pid: running ? current!.pid : 0, provenance: r.provenance, requires_env: m.requires_env,
      source: r.provenance.slug ? 'marketplace' : 'path', state, trust: r.provenance.trust, type: m.type,
      uptime_seconds: running && current!.started_at ? Math.max(0, Math.floor((Date.now() - Date.parse(current!.started_at)) / 1000)) : 0,
      version: m.version,
      resources: p && p.generation === r.generation ? p.children : [],
      tools: (m.daemon?.tools ?? []).map((t) => extensionToolId(m.name, t.name)),
      // NOTE: disabling moves the generation, so no status is current then: its daemon is stopped, not starting.
      daemon: !m.daemon ? null : !r.enabled ? { state: 'Stopped', failures: 0, starts: 0, owner: '', restart_at: '' }
        : { state: current?.state ?? 'Starting', failures: current?.failures ?? 0, starts: current?.starts ?? 0, owner: current?.owner ?? '', restart_at: current?.restart_at ?? '' },
    };
  }
}

function parse<T>(raw: string | undefined): T | undefined {
  return raw ? (JSON.parse(raw) as T) : undefined;
}

/**
 * refusal maps an archive refusal to the install's error (nothing installed): 413 for a limit; 400 for a checksum
 * mismatch or a missing manifest (the original's); 422 naming the rule for the rest (a link, a dangerous entry,
 * an unreadable archive, one too slow to read).
 */
function refusal(err: unknown): unknown {
  if (!(err instanceof ArchiveRefusal)) return err;
  if (ARCHIVE_LIMIT_CODES.includes(err.code)) return new PayloadTooLargeError(`${err.message}; nothing was installed`, err.code, err.evidence);
  const code = err.code === 'digest_mismatch' ? 'checksum_mismatch' : err.code === 'marker_missing' ? 'manifest_missing' : err.code;
  if (code !== 'checksum_mismatch' && code !== 'manifest_missing') return new ValidationError(`${err.message}; nothing was installed`, code, err.evidence);
  return new InputError(`${err.message}; nothing was installed`, code, { ...(code === 'checksum_mismatch' ? { checksum: err.message } : {}), ...err.evidence });
}

function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '';
  }
}
