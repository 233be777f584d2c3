import { createHash, randomBytes } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, readlink, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { setImmediate } from 'node:timers/promises';
import { createGunzip } from 'node:zlib';
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

/**
 * The entry types an installed archive may hold. NOTE: links are refused outright: a chain of links that each
 * seem to stay inside the tree (`b -> ..`, `l1 -> b/..`) resolves outside it once unpacked, and judging a link
 * by its text alone cannot see that. A skill or extension has no need of links.
 */
const ALLOWED = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory']);
const LINKS = new Set(['SymbolicLink', 'Link']);
/** Skill installs scan for these categories only: a skill holds code, so the memory policy rules do not apply. */
export const SKILL_SCAN: readonly ScanCategory[] = ['invisible_unicode', 'prompt_injection', 'exfiltration', 'persistence'];
/** Files larger than this are not scanned (a skill's text files are small; binaries are not text). */
const SCAN_MAX_BYTES = 1024 * 1024;
const MAX_WARNINGS = 50;
/** EXPANSION_FLOOR is what any archive may expand to, whatever its ratio: tar pads even a tiny archive to 10 KiB. */
const EXPANSION_FLOOR = 1024 * 1024;
/** YIELD_MS is how long reading an archive may hold the event loop before it lets other work run. */
const YIELD_MS = 5;
/** CHUNK is the piece of the tar stream handed to the parser at once. */
const CHUNK = 64 * 1024;
/** NESTED are the magic numbers of a compressed stream (gzip, zstd), which tar would decompress again by itself. */
const NESTED = [Buffer.from([0x1f, 0x8b]), Buffer.from([0x28, 0xb5, 0x2f, 0xfd])];

/** Inspection is what a pre-pass over an archive found: its layout (strip) and its size. */
export interface Inspection { strip: 0 | 1; files: number; expandedBytes: number }

/** SkillWarning is one content scan hit, as a SkillDiagnostic warning. */
export interface SkillWarning { message: string; pattern: string; severity: string }

/** ARCHIVE_LIMIT_CODES are the refusals of an archive that is too big: 413 where the others are 422. */
export const ARCHIVE_LIMIT_CODES: readonly string[] = ['too_large', 'too_large_expanded', 'too_many_files', 'expansion_ratio_exceeded'];

/** entryRefusal says why one entry may not be unpacked (as a refusal), or undefined when it may. */
function entryRefusal(e: ReadEntry): ArchiveRefusal | undefined {
  const p = e.path;
  const entry = p.slice(0, 200);
  const refuse = (why: string) => new ArchiveRefusal('entry_refused', `archive entry "${entry}" ${why}`, { entry });
  if (p.includes('\0')) return refuse('has a NUL byte in its path');
  if (path.posix.isAbsolute(p) || /^[A-Za-z]:[\\/]/.test(p) || p.startsWith('\\')) return refuse('has an absolute path');
  if (p.split(/[\\/]/).includes('..')) return refuse('has a ".." path segment');
  if (LINKS.has(e.type)) {
    const kind = e.type === 'Link' ? 'a hard link' : 'a symbolic link';
    const target = (e.linkpath ?? '').slice(0, 200);
    return new ArchiveRefusal('link_refused', `archive entry "${entry}" is ${kind} (to "${target}"): links are refused in installed archives`, { entry, linkpath: target });
  }
  if (!ALLOWED.has(e.type)) return refuse(`is a ${e.type} (only files and directories)`);
  return undefined;
}

/** verifyDigest refuses bytes whose SHA-256 is not the one the source published. */
export function verifyDigest(bytes: Buffer, sha256: string): void {
  const actual = createHash('sha256').update(bytes).digest('hex');
  if (actual !== sha256) throw new ArchiveRefusal('digest_mismatch', `the archive's SHA-256 is ${actual}, not the published ${sha256}`, { expected_sha256: sha256, actual_sha256: actual });
}

/**
 * expansionLimit is how many bytes of tar stream an archive of `size` bytes may expand to: max_expanded_bytes, or
 * less when the expansion ratio binds first; with the refusal of going past it.
 */
function expansionLimit(size: number, limits: MarketLimits): { max: number; refusal: () => ArchiveRefusal } {
  const byRatio = Math.max(EXPANSION_FLOOR, size * limits.maxExpansionRatio);
  if (byRatio < limits.maxExpandedBytes) {
    return {
      max: byRatio,
      refusal: () => new ArchiveRefusal('expansion_ratio_exceeded', `the archive (${size} bytes) expands to more than ${limits.maxExpansionRatio} times its size`, { max_expansion_ratio: limits.maxExpansionRatio, archive_bytes: size }),
    };
  }
  return { max: limits.maxExpandedBytes, refusal: () => new ArchiveRefusal('too_large_expanded', `the archive expands to more than ${limits.maxExpandedBytes} bytes`, { max_expanded_bytes: limits.maxExpandedBytes }) };
}

/**
 * tarStream yields an archive's tar stream in pieces: gunzipped on the thread pool (node:zlib's stream, not the
 * event loop) when the bytes are gzip, as they are otherwise. It refuses the archive once the stream passes the
 * expansion limit, once `deadline` passes, and when the stream is compressed again. Between pieces it yields
 * to the event loop at least every YIELD_MS, so the API keeps answering while an archive is read.
 */
async function* tarStream(bytes: Buffer, limits: MarketLimits, deadline: number): AsyncGenerator<Buffer> {
  const limit = expansionLimit(bytes.length, limits);
  const gz = bytes[0] === 0x1f && bytes[1] === 0x8b;
  const source: Readable = gz ? Readable.from([bytes]).pipe(createGunzip({ chunkSize: CHUNK })) : Readable.from(pieces(bytes));
  let total = 0;
  let turn = Date.now();
  try {
    for await (const chunk of source) {
      if (total === 0 && NESTED.some((m) => chunk.subarray(0, m.length).equals(m))) {
        throw new ArchiveRefusal('archive_invalid', 'the archive is compressed twice (a compressed stream inside the gzip): refused');
      }
      total += chunk.length;
      if (total > limit.max) throw limit.refusal();
      if (Date.now() > deadline) throw timedOut(limits);
      yield chunk;
      if (Date.now() - turn >= YIELD_MS) {
        await setImmediate();
        turn = Date.now();
      }
    }
  } catch (err) {
    if (err instanceof ArchiveRefusal) throw err;
    throw new ArchiveRefusal('archive_invalid', `the archive is not a readable gzip or tar: ${(err as Error).message}`);
  } finally {
    source.destroy();
  }
}

function* pieces(bytes: Buffer): Generator<Buffer> {
  for (let i = 0; i < bytes.length; i += CHUNK) yield bytes.subarray(i, i + CHUNK);
}

const timedOut = (limits: MarketLimits) => new ArchiveRefusal('inspection_timeout', `reading the archive took longer than ${limits.inspectTimeoutMs} ms`, { inspect_timeout_ms: limits.inspectTimeoutMs });

/**
 * pour writes an archive's tar stream into a tar Parser (or Unpack) up to the end-of-archive marker, then ends it
 * and waits for `done`. NOTE: what follows the marker is decompressed and counted against the expansion limit
 * (a long zero tail is a compression bomb too) but never handed to the parser: tar ignores it, and the parser
 * would keep it in one buffer it copies whole at each write (quadratic in the tail: seconds for a 32 KB archive).
 * A refusal of the stream ends the parser and waits for it to settle (an Unpack's files in flight are written)
 * before it is thrown, so the caller can remove what was written.
 */
async function pour(bytes: Buffer, limits: MarketLimits, sink: Parser, done: 'end' | 'close', failure: () => Error | undefined): Promise<void> {
  const deadline = Date.now() + limits.inspectTimeoutMs;
  let eof = false;
  sink.on('eof', () => { eof = true; });
  const settled = new Promise<void>((resolve) => sink.on(done, () => resolve()));
  let refusal: Error | undefined;
  try {
    for await (const chunk of tarStream(bytes, limits, deadline)) {
      if (failure()) break;
      if (eof) continue;
      if (!sink.write(chunk)) await Promise.race([new Promise((r) => sink.once('drain', r)), settled]);
    }
  } catch (err) {
    refusal = err as Error;
  }
  sink.end();
  await Promise.race([settled, new Promise<void>((resolve) => {
    // NOTE: an aborted parser never ends; a refusal it raised is reported at once.
    const check = () => (failure() ? resolve() : undefined);
    check();
    sink.on('error', check);
    sink.on('abort', check);
  })]);
  const err = refusal ?? failure();
  if (err) throw err;
}

/**
 * inspectArchive reads every entry header of a (gzipped) tar without writing anything, streaming it (bounded in
 * bytes, entries, expansion ratio and time; see tarStream), and refuses the whole archive on the first entry with
 * an absolute path, a `..` segment, a link, or a type other than file or directory, and when its entries or
 * expanded size pass the limits. The skill's SKILL.md (or another of `markers`, such as an extension's manifest)
 * must sit at the root or under one top-level directory (then stripped).
 */
export async function inspectArchive(bytes: Buffer, limits: MarketLimits, markers: readonly string[] = ['SKILL.md']): Promise<Inspection> {
  let entries = 0;
  let files = 0;
  let expanded = 0;
  const limit = expansionLimit(bytes.length, limits);
  const paths: string[] = [];
  let refusal: ArchiveRefusal | undefined;
  let broken: Error | undefined;
  const parser = new Parser({
    strict: true,
    onReadEntry: (e) => {
      entries++;
      files += e.type === 'Directory' ? 0 : 1;
      expanded += e.size ?? 0;
      if (!refusal) refusal = entryRefusal(e);
      if (!refusal && entries > limits.maxFiles) refusal = new ArchiveRefusal('too_many_files', `the archive holds more than ${limits.maxFiles} entries (files and directories)`, { max_files: limits.maxFiles });
      if (!refusal && expanded > limit.max) refusal = limit.refusal();
      if (refusal) parser.abort(refusal);
      paths.push(path.posix.normalize(e.path).replace(/\/$/, ''));
      e.resume();
    },
  });
  parser.on('error', (err: Error) => { broken ??= err; });
  await pour(bytes, limits, parser, 'end', () => refusal ?? (broken && new ArchiveRefusal('archive_invalid', `the archive is not a readable tar: ${broken.message}`)));
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
 * directory, renamed into place only when every entry was written, so a reader sees a whole tree or none; a
 * refusal removes the temporary directory. The tar stream is read as inspectArchive reads it (bounded, off the
 * event loop). NOTE: tar's own guards stay on (no absolute paths, no `..`, no writing through links) behind the
 * inspection, and what they catch is a refusal (`unpack_refused`), never a server error.
 */
export async function unpackArchive(bytes: Buffer, dir: string, inspection: Inspection, limits: MarketLimits): Promise<void> {
  const tmp = `${dir}.tmp-${randomBytes(6).toString('hex')}`;
  await mkdir(tmp, { recursive: true, mode: 0o755 });
  try {
    let broken: Error | undefined;
    const unpack = new Unpack({
      cwd: tmp, strip: inspection.strip, strict: true, preservePaths: false, preserveOwner: false,
      filter: (_p, e) => ALLOWED.has((e as ReadEntry).type),
    });
    unpack.on('error', (err: Error) => { broken ??= err; });
    await pour(bytes, limits, unpack, 'close', () => broken && (broken instanceof ArchiveRefusal ? broken : new ArchiveRefusal('unpack_refused', `the archive could not be unpacked safely: ${broken.message}`)));
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
 * holdsLinks says whether an unpacked tree holds a symbolic link (one unpacked before links were refused, or put
 * there since): such a tree is removed and unpacked again from its archive, whose inspection then refuses it.
 */
export async function holdsLinks(root: string): Promise<boolean> {
  return (await walk(root)).some((e) => e.kind === 'link');
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
