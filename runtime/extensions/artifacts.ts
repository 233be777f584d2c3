import { createHash } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { create as createTar } from 'tar';
import { MANIFEST_FILES, parseManifestFile, type ExtensionManifest, type ManifestResult } from '../../codecs/extension-manifest.ts';
import type { ArtifactStore } from '../../store/artifact-store.ts';
import { ArchiveRefusal, holdsLinks, inspectArchive, treeHash, unpackArchive } from '../marketplace/archive.ts';
import type { MarketLimits } from '../marketplace/types.ts';
import { parseSkillFile } from '../skills/catalog.ts';

/** CHECKSUM is how a checksum may be written: 64 hex, optionally after `sha256:`, in any case (Get-FileHash prints upper case). */
const CHECKSUM = /^(?:sha256:)?([0-9a-f]{64})$/i;

/** parseChecksum reads a `checksum` field (lower-case hex), or undefined when it is not one. */
export function parseChecksum(raw: string): string | undefined {
  return CHECKSUM.exec(raw.trim())?.[1].toLowerCase();
}

/** filesOf lists a directory's regular files (relative, `/`-separated), refusing links and special files. */
async function filesOf(root: string, rel = '', out: string[] = []): Promise<string[]> {
  for (const e of await readdir(path.join(root, rel), { withFileTypes: true })) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (/[\n\\]/.test(e.name)) throw new ArchiveRefusal('entry_refused', `"${r}" has a newline or backslash in its name`, { entry: r });
    if (e.isDirectory()) await filesOf(root, r, out);
    else if (e.isFile()) out.push(r);
    else throw new ArchiveRefusal('entry_refused', `"${r}" is not a regular file or directory (links and devices are refused in a path install)`, { entry: r });
  }
  return out;
}

/**
 * dirChecksum is the checksum of an extension directory: the SHA-256 of the lines `<sha256 of the file>  ./<path>`,
 * one per regular file, sorted by path bytewise; exactly what this shell line prints:
 * `find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum` (run inside the directory).
 * NOTE: a definition a user can compute without this service; links and special files are refused, so the files
 * hashed are all the tree holds.
 */
export async function dirChecksum(root: string, maxFiles: number, o: DirRead = {}): Promise<string> {
  const files = (await filesOf(root)).map((f) => `./${f}`);
  if (files.length > maxFiles) throw new ArchiveRefusal('too_many_files', `the directory holds more than ${maxFiles} files`, { max_files: maxFiles });
  files.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const h = createHash('sha256');
  const maxBytes = o.maxBytes ?? Infinity;
  let total = 0;
  for (const f of files) {
    const bytes = o.read ? await o.read(path.join(root, f), maxBytes - total) : await readFile(path.join(root, f));
    total += bytes.length;
    if (total > maxBytes) throw new ArchiveRefusal('too_large_expanded', `the directory's files are larger than ${maxBytes} bytes`, { max_expanded_bytes: maxBytes });
    h.update(`${createHash('sha256').update(bytes).digest('hex')}  ${f}\n`);
  }
  return h.digest('hex');
}

/** DirRead is how dirChecksum reads: a reader given the bytes still allowed (a confined one), and the bytes in all. */
export interface DirRead { read?: (file: string, maxBytes: number) => Promise<Buffer>; maxBytes?: number }

/** packDir packs a directory's files into a gzipped tar (portable: no owners, no mtimes' meaning), for the artifact store. */
export async function packDir(root: string, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  const entries = (await readdir(root)).sort();
  const stream = createTar({ gzip: true, cwd: root, portable: true, follow: false, noDirRecurse: false }, entries);
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new ArchiveRefusal('too_large', `the packed directory is larger than ${maxBytes} bytes`, { max_archive_bytes: maxBytes });
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks, size);
}

/** findManifest reads an extension root's manifest (the first of MANIFEST_FILES there), decoded. */
export async function findManifest(root: string): Promise<ManifestResult & { file: string }> {
  for (const f of MANIFEST_FILES) {
    const file = path.join(root, f);
    const st = await lstat(file).catch(() => undefined);
    if (!st) continue;
    if (!st.isFile()) return { ok: false, errors: [{ path: 'manifest', message: `${f} is not a regular file` }], file: f };
    return { ...parseManifestFile(f, await readFile(file, 'utf8')), file: f };
  }
  return { ok: false, errors: [{ path: 'manifest', message: `the extension has no ${MANIFEST_FILES.join(' or ')}` }], file: '' };
}

/** readSkills parses each shipped skill's SKILL.md: its name and description, or the field problems. */
export async function readSkills(root: string, m: ExtensionManifest): Promise<{ skills: Record<string, { name: string; description: string }>; problems: Record<string, string> }> {
  const skills: Record<string, { name: string; description: string }> = {};
  const problems: Record<string, string> = {};
  for (const [i, rel] of m.resources.skills.entries()) {
    const dir = path.join(root, rel);
    const text = await readFile(path.join(dir, 'SKILL.md'), 'utf8').catch(() => undefined);
    if (text === undefined) { problems[`resources.skills[${i}]`] = `${rel}/SKILL.md does not exist`; continue; }
    const c = parseSkillFile(text, 'additional', dir, path.join(dir, 'SKILL.md'));
    if (c.diagnostic.state !== 'valid') { problems[`resources.skills[${i}]`] = `${rel}/SKILL.md is not valid: ${c.diagnostic.failure.message}`; continue; }
    skills[rel] = { name: c.name, description: c.description };
  }
  return { skills, problems };
}

/**
 * ExtensionCache unpacks installed extensions' artifacts into this process's cache (`DATA_DIR/extensions/<sha256>`),
 * from the artifact store, verifying the archive's digest (ArtifactStore.get) and the unpacked tree's hash, so a
 * replica that starts with an empty disk runs and serves the same extensions.
 */
export class ExtensionCache {
  readonly root: string;
  private readonly unpacking = new Map<string, Promise<string>>();

  /**
   * `limits` bound a new install's archive; `installedLimits` (default `limits`) one unpacked again from the artifact
   * store, which passed the install's checks already (a broken marketplace section must not stop it).
   */
  constructor(private readonly o: { dataDir: string; artifacts: ArtifactStore; limits: () => Promise<MarketLimits>; installedLimits?: () => Promise<MarketLimits> }) {
    this.root = path.join(o.dataDir, 'extensions');
  }

  /** dirOf is where an artifact is unpacked in this process. */
  dirOf(sha256: string): string {
    return path.join(this.root, sha256);
  }

  /** materialize returns the unpacked tree of an artifact, unpacking it once (verified) when it is not here yet. */
  async materialize(r: { sha256: string; tree_hash: string; name: string }): Promise<string> {
    const dir = this.dirOf(r.sha256);
    if (await stat(dir).then((s) => s.isDirectory(), () => false)) {
      if (!(await holdsLinks(dir))) return dir;
      await rm(dir, { recursive: true, force: true });
    }
    let p = this.unpacking.get(r.sha256);
    if (!p) {
      p = (async () => {
        const bytes = await this.o.artifacts.get(r.sha256);
        if (!bytes) throw new Error(`the artifact ${r.sha256} of extension "${r.name}" is not in the artifact store`);
        await this.unpackVerified(bytes, r.sha256, r.tree_hash, await (this.o.installedLimits ?? this.o.limits)());
        return dir;
      })().finally(() => this.unpacking.delete(r.sha256));
      this.unpacking.set(r.sha256, p);
    }
    return p;
  }

  /**
   * unpackVerified unpacks archive bytes (already digest-checked) after inspecting every entry, then compares the
   * tree's hash with `treeHashWanted` when given; a mismatch removes the tree. Returns the tree hash. `within` are the
   * limits to read it with (default: a new install's).
   */
  async unpackVerified(bytes: Buffer, sha256: string, treeHashWanted?: string, within?: MarketLimits): Promise<string> {
    const dir = this.dirOf(sha256);
    const limits = within ?? await this.o.limits();
    const inspection = await inspectArchive(bytes, limits, MANIFEST_FILES);
    await mkdir(this.root, { recursive: true });
    await unpackArchive(bytes, dir, inspection, limits);
    const got = await treeHash(dir);
    if (treeHashWanted && got !== treeHashWanted) {
      await rm(dir, { recursive: true, force: true });
      throw new ArchiveRefusal('tree_hash_mismatch', `the unpacked tree's hash is ${got}, not the installed ${treeHashWanted}`, { expected: treeHashWanted, actual: got });
    }
    return got;
  }

  /**
   * prune removes unpacked trees no record refers to (an update's or a removal's leftovers, also those another
   * process made). NOTE: a tree younger than `minAgeMs` stays: an install in this process unpacks before its record
   * is stored, and must not lose its tree in between.
   */
  async prune(keep: Set<string>, minAgeMs = 60_000): Promise<void> {
    for (const d of await readdir(this.root).catch(() => [] as string[])) {
      if (!/^[0-9a-f]{64}$/.test(d) || keep.has(d) || this.unpacking.has(d)) continue;
      const dir = path.join(this.root, d);
      const young = await stat(dir).then((s) => Date.now() - s.mtimeMs < minAgeMs, () => true);
      if (!young) await rm(dir, { recursive: true, force: true });
    }
  }

  /** drop removes one unpacked tree (a removed or replaced version that no record refers to any more). */
  async drop(sha256: string): Promise<void> {
    if (!this.unpacking.has(sha256)) await rm(this.dirOf(sha256), { recursive: true, force: true });
  }
}
