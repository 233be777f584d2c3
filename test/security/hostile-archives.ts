import { gzipSync } from 'node:zlib';
import { skillMd, tarHeader, tarRaw, type TarEntry } from '../marketplace/fixtures.ts';

/** ZERO_CHUNK is the piece of zeros a bomb repeats: one gzip member of it is about 64 KB. */
const ZERO_CHUNK = 64 * 1024 * 1024;
let zeroMember: Buffer | undefined;

/**
 * zeros is a gzip stream of `n` zero bytes (a multiple of 64 MiB, or less), made of gzip members that each hold up to
 * 64 MiB: gunzip reads the members as one stream, so 2 GiB of zeros cost 2 MB and one compression of 64 MiB.
 */
function zeros(n: number): Buffer {
  if (n < ZERO_CHUNK) return gzipSync(Buffer.alloc(n), { level: 9 });
  if (n % ZERO_CHUNK) throw new Error('zeros: a multiple of 64 MiB');
  zeroMember ??= gzipSync(Buffer.alloc(ZERO_CHUNK), { level: 9 });
  return Buffer.concat(Array.from({ length: n / ZERO_CHUNK }, () => zeroMember!));
}

/**
 * linkChain is a skill (or, with `marker`, an extension) whose links each look inside the tree by their text
 * (`ref/b -> ..`, `ref/l1 -> b/..`, `ref/l2 -> l1/..`, ...) but, once unpacked, climb a level each: `ref/data` is
 * the unpacked tree's fifth parent (DATA_DIR for a skill in DATA_DIR/skills/.market/<sha256>/<name>) and `ref/root`
 * is `/`.
 */
export function linkChain(name: string, marker: TarEntry = { path: `${name}/SKILL.md`, content: skillMd(name) }): Buffer {
  const depth = 24;
  const entries: TarEntry[] = [{ path: `${name}/`, type: 'dir' }, marker, { path: `${name}/ref/`, type: 'dir' }, { path: `${name}/ref/b`, type: 'symlink', linkpath: '..' }];
  for (let i = 1; i <= depth; i++) entries.push({ path: `${name}/ref/l${i}`, type: 'symlink', linkpath: `${i === 1 ? 'b' : `l${i - 1}`}/..` });
  entries.push({ path: `${name}/ref/data`, type: 'symlink', linkpath: 'l4' }, { path: `${name}/ref/root`, type: 'symlink', linkpath: `l${depth}` });
  return gzipSync(tarRaw(entries));
}

/**
 * zeroTail is a valid skill archive followed by `tail` zero bytes (2 zero blocks end a tar; the rest is the tail):
 * 32 MiB of tail is a 32 KB archive, 2 GiB a 2 MB one.
 */
export function zeroTail(name: string, tail: number): Buffer {
  return Buffer.concat([gzipSync(tarRaw([{ path: `${name}/SKILL.md`, content: skillMd(name) }])), zeros(tail)]);
}

/** bomb is a skill archive with one file of `size` zeros (declared in its header, under the expanded limit). */
export function bomb(name: string, size: number): Buffer {
  const head = tarRaw([{ path: `${name}/SKILL.md`, content: skillMd(name) }]);
  const prefix = Buffer.concat([head.subarray(0, head.length - 1024), tarHeader({ path: `${name}/zeros.bin` }, size)]);
  return Buffer.concat([gzipSync(prefix), zeros(size), gzipSync(Buffer.alloc(((512 - (size % 512)) % 512) + 1024))]);
}

/** manyEntries is a skill archive of `n` empty directories beside its SKILL.md. */
export function manyEntries(name: string, n: number): Buffer {
  const entries: TarEntry[] = [{ path: `${name}/SKILL.md`, content: skillMd(name) }];
  for (let i = 0; i < n; i++) entries.push({ path: `${name}/d${i}/`, type: 'dir' });
  return gzipSync(tarRaw(entries), { level: 9 });
}
