import { realpathSync } from 'node:fs';
import path from 'node:path';

/** within is true when `p` is `root` or lies under it (both absolute, normalized). */
export function within(p: string, root: string): boolean {
  return p === root || p.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}

/**
 * realPath resolves `p` through its symlinks; for a path that does not exist (yet), the nearest existing parent
 * is resolved and the rest appended, so a missing file under a symlinked directory is judged where it would be.
 */
export function realPath(p: string): string {
  const abs = path.resolve(p);
  // NOTE: the native realpath(3), one call, not a JS walk that lstats each component (half the CPU; every session start).
  try { return realpathSync.native(abs); } catch { /* missing: resolve its parent */ }
  const parent = path.dirname(abs);
  return parent === abs ? abs : path.join(realPath(parent), path.basename(abs));
}

/**
 * WorkspaceRoots decides where a workspace's directories may be (WORKSPACE_ROOTS). `/` and the service's own
 * DATA_DIR (its state, token files, scripted agent state) are always refused, except DATA_DIR/workspaces,
 * the default root when callers authenticate.
 */
export class WorkspaceRoots {
  constructor(private readonly roots: readonly string[] | undefined, private readonly dataDir: string) {}

  /** refusal says why a directory (already resolved through its symlinks) may not be a workspace directory. */
  refusal(dir: string): string | undefined {
    if (dir === path.parse(dir).root) return 'must not be the file system root';
    // NOTE: resolved at each check: a root may be created (or re-linked) after the service starts.
    const data = realPath(this.dataDir);
    if (within(dir, data) && !within(dir, path.join(data, 'workspaces'))) return 'must not be inside the service\'s DATA_DIR';
    if (!this.roots) return undefined;
    const roots = this.roots.map(realPath);
    return roots.some((r) => within(dir, r)) ? undefined : `must lie inside WORKSPACE_ROOTS (${roots.join(', ') || 'none'})`;
  }

  /**
   * workspaceRefusal says why a directory may not be a workspace's root_dir or add_dirs entry: refusal's rules, and
   * not a WORKSPACE_ROOTS entry itself. NOTE: a workspace rooted at an entry would see every other workspace under
   * it, so each workspace must be a directory strictly inside an entry.
   */
  workspaceRefusal(dir: string): string | undefined {
    const why = this.refusal(dir);
    if (why || !this.roots) return why;
    return this.roots.map(realPath).includes(dir) ? `must be a directory inside a WORKSPACE_ROOTS entry, not the entry itself (a workspace there sees every other workspace)` : undefined;
  }
}
