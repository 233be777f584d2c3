import { realpathSync } from 'node:fs';
import path from 'node:path';

/** within is true when `p` is `root` or lies under it (both absolute, normalized). */
export function within(p: string, root: string): boolean {
  return p === root || p.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}

const real = (p: string) => {
  try { return realpathSync(p); } catch { return path.resolve(p); }
};

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
    const data = real(this.dataDir);
    if (within(dir, data) && !within(dir, path.join(data, 'workspaces'))) return 'must not be inside the service\'s DATA_DIR';
    if (!this.roots) return undefined;
    const roots = this.roots.map(real);
    return roots.some((r) => within(dir, r)) ? undefined : `must lie inside WORKSPACE_ROOTS (${roots.join(', ') || 'none'})`;
  }
}
