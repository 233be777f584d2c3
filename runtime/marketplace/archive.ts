import { createHash, randomBytes } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, readlink, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { Parser, Unpack, type ReadEntry } from 'tar';
import { scanContent, type ScanCategory } from '../security/content-scan.ts';
import type { MarketLimits } from './types.ts';

/** ArchiveRefusal is an archive this service will not unpack: a digest mismatch, a dangerous entry, a limit. */
export class ArchiveRefusal extends Error {
  constructor(readonly code: string, message: string, readonly evidence: Record<string, unknown> = {}) {
    super(message);
    this.name = 'ArchiveRefusal';
  }
}

/** The entry types a skill archive may hold; devices, FIFOs and the rest are refused. */
const ALLOWED = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link']);
/** Skill installs scan for these categories only: a skill holds code, so the memory policy rules do not apply. */
export const SKILL_SCAN: readonly ScanCategory[] = ['invisible_unicode', 'prompt_injection', 'exfiltration', 'persistence'];
/** Files larger than this are not scanned (a skill's text files are small; binaries are not text). */
const SCAN_MAX_BYTES = 1024 * 1024;
const MAX_WARNINGS = 50;

/** Inspection is what a pre-pass over an archive found: its layout (strip) and its size. */
export interface Inspection { strip: 0 | 1; files: number; expandedBytes: number }

/** SkillWarning is one content scan hit, as a SkillDiagnostic warning. */
export interface SkillWarning { message: string; pattern: string; severity: string }

/** escapes says whether a relative archive path leaves the archive root. */
function escapes(p: string): boolean {
  const n = path.posix.normalize(p);
  return n === '..' || n.startsWith('../') || path.posix.isAbsolute(n);
}

/** entryRefusal says why one entry may not be unpacked, or undefined when it may. */
function entryRefusal(e: ReadEntry): string | undefined {
  const p = e.path;
  if (p.includes('\0')) return 'has a NUL byte in its path';
  if (path.posix.isAbsolute(p) || /^[A-Za-z]:[\\/]/.test(p) || p.startsWith('\\')) return 'has an absolute path';
  if (p.split(/[\\/]/).includes('..')) return 'has a ".." path segment';
  if (!ALLOWED.has(e.type)) return `is a ${e.type} (only files, directories and links inside the archive)`;
  if (e.type === 'SymbolicLink') {
    const target = e.linkpath ?? '';
    if (path.posix.isAbsolute(target) || escapes(path.posix.join(path.posix.dirname(p), target))) return `is a symbolic link to "${target}", outside the archive`;
  }
  if (e.type === 'Link' && escapes(e.linkpath ?? '')) return `is a hard link to "${e.linkpath}", outside the archive`;
  return undefined;
}

/** verifyDigest refuses bytes whose SHA-256 is not the one the source published. */
export function verifyDigest(bytes: Buffer, sha256: string): void {
  const actual = createHash('sha256').update(bytes).digest('hex');
  if (actual !== sha256) throw new ArchiveRefusal('digest_mismatch', `the archive's SHA-256 is ${actual}, not the published ${sha256}`, { expected_sha256: sha256, actual_sha256: actual });
}

/**
 * inspectArchive reads every entry header of a (gzipped) tar without writing anything, and refuses the whole
 * archive on the first entry with an absolute path, a `..` segment, a link that leaves the archive, or a type
 * other than file, directory or link, and when its files or expanded size pass the limits. The skill's SKILL.md
 * (or another of `markers`, such as an extension's manifest) must sit at the root or under one top-level directory
 * (then stripped).
 */
export async function inspectArchive(bytes: Buffer, limits: MarketLimits, markers: readonly string[] = ['SKILL.md']): Promise<Inspection> {
  let files = 0;
  let expanded = 0;
  const paths: string[] = [];
  let refusal: ArchiveRefusal | undefined;
  const parser = new Parser({
    strict: true,
    onReadEntry: (e) => {
      const why = refusal ? undefined : entryRefusal(e);
      if (why) refusal = new ArchiveRefusal('entry_refused', `archive entry "${e.path.slice(0, 200)}" ${why}`, { entry: e.path.slice(0, 200) });
      files += e.type === 'Directory' ? 0 : 1;
      expanded += e.size ?? 0;
      if (!refusal && files > limits.maxFiles) refusal = new ArchiveRefusal('too_many_files', `the archive holds more than ${limits.maxFiles} files`, { max_files: limits.maxFiles });
      if (!refusal && expanded > limits.maxExpandedBytes) refusal = new ArchiveRefusal('too_large_expanded', `the archive expands to more than ${limits.maxExpandedBytes} bytes`, { max_expanded_bytes: limits.maxExpandedBytes });
      if (refusal) parser.abort(refusal);
      paths.push(path.posix.normalize(e.path).replace(/\/$/, ''));
      e.resume();
    },
  });
  await new Promise<void>((resolve, reject) => {
    parser.on('error', (err: Error) => reject(refusal ?? new ArchiveRefusal('archive_invalid', `the archive is not a readable tar: ${err.message}`)));
    parser.on('abort', () => reject(refusal));
    parser.on('end', () => resolve());
    parser.end(bytes);
  });
  if (refusal) throw refusal;
  // NOTE: `./x` (tar of a directory's `.`) normalizes to `x`, so both layouts are found.
  if (markers.some((m) => paths.includes(m))) return { strip: 0, files, expandedBytes: expanded };
  const tops = new Set(paths.map((p) => p.split('/')[0]).filter((p) => p && p !== '.'));
  if (tops.size === 1 && markers.some((m) => paths.includes(`${[...tops][0]}/${m}`))) return { strip: 1, files, expandedBytes: expanded };
  // NOTE: the skill code is kept as it was; other markers (an extension's manifest) answer `marker_missing`.
  const code = markers.length === 1 && markers[0] === 'SKILL.md' ? 'skill_md_missing' : 'marker_missing';
  throw new ArchiveRefusal(code, `the archive has no ${markers.join(' or ')} at its root or under one top-level directory`);
}

/**
 * unpackArchive unpacks an inspected archive into `dir` (which must not exist): first into a sibling temporary
 * directory, renamed into place only when every entry was written, so a reader sees a whole tree or none.
 * NOTE: tar's own guards stay on (no absolute paths, no `..`, no writing through links) behind the inspection.
 */
export async function unpackArchive(bytes: Buffer, dir: string, inspection: Inspection): Promise<void> {
  const tmp = `${dir}.tmp-${randomBytes(6).toString('hex')}`;
  await mkdir(tmp, { recursive: true, mode: 0o755 });
  try {
    const unpack = new Unpack({ cwd: tmp, strip: inspection.strip, strict: true, preservePaths: false, preserveOwner: false, filter: (_p, e) => ALLOWED.has((e as ReadEntry).type) });
    await new Promise<void>((resolve, reject) => {
      unpack.on('error', reject);
      unpack.on('close', () => resolve());
      unpack.end(bytes);
    });
    await rename(tmp, dir).catch(async (err: NodeJS.ErrnoException) => {
      // NOTE: another request or process unpacked the same digest first: the same bytes, so theirs is as good.
      if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
    });
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** walk lists a tree's entries (relative paths, sorted), without following links. */
async function walk(root: string, rel = ''): Promise<{ rel: string; kind: 'file' | 'link' | 'dir' }[]> {
  const out: { rel: string; kind: 'file' | 'link' | 'dir' }[] = [];
  const entries = await readdir(path.join(root, rel), { withFileTypes: true });
  for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isSymbolicLink()) out.push({ rel: r, kind: 'link' });
    else if (e.isDirectory()) out.push({ rel: r, kind: 'dir' }, ...(await walk(root, r)));
    else out.push({ rel: r, kind: 'file' });
  }
  return out;
}

/**
 * treeHash is `sha256:<hex>` over a tree: each file's relative path and SHA-256, each link's target, each
 * directory's name, in sorted order. Recorded at install and compared when the skill is loaded, so an added,
 * removed or changed file (or mode of entry) is seen.
 */
export async function treeHash(root: string): Promise<string> {
  const h = createHash('sha256');
  for (const e of await walk(root)) {
    if (e.kind === 'dir') h.update(`d ${e.rel}\n`);
    else if (e.kind === 'link') h.update(`l ${e.rel} ${await readlink(path.join(root, e.rel))}\n`);
    else h.update(`f ${e.rel} ${createHash('sha256').update(await readFile(path.join(root, e.rel))).digest('hex')}\n`);
  }
  return `sha256:${h.digest('hex')}`;
}

/** scanTree runs the one content scanner (runtime/security/content-scan.ts) over a tree's text files: one warning per hit. */
export async function scanTree(root: string): Promise<SkillWarning[]> {
  const out: SkillWarning[] = [];
  for (const e of await walk(root)) {
    if (e.kind !== 'file' || out.length >= MAX_WARNINGS) continue;
    const file = path.join(root, e.rel);
    if ((await lstat(file)).size > SCAN_MAX_BYTES) continue;
    const bytes = await readFile(file);
    if (bytes.includes(0)) continue;
    for (const f of scanContent(bytes.toString('utf8'), SKILL_SCAN)) out.push({ message: `${e.rel}: ${f.message} ("${f.excerpt}")`, pattern: f.rule, severity: 'warning' });
  }
  return out.slice(0, MAX_WARNINGS);
}
