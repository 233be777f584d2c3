import { constants } from 'node:fs';
import { open, readlink, stat } from 'node:fs/promises';
import path from 'node:path';
import { ValidationError } from '../../store/errors.ts';
import { BUNDLED_DIR } from '../skills/bundled-dir.ts';
import { fieldsNamed } from './spec-fields.ts';
import type { SecurityConfig } from './types.ts';
import { realPath, within, WorkspaceRoots } from './workspace-roots.ts';

/**
 * PATH_FIELDS are the spec fields, at any depth, that name a file or directory the service opens: a skill's
 * `file_path` and `dir` (read as `<dir>/SKILL.md`) and a hook's `working_dir` (the cwd of its process).
 * NOTE: `source_path` (agent.soul, agent.heartbeat, bundle profiles) and a bundle agent's `path` are labels: the
 * content travels in the record's `body` and the service never opens them.
 */
export const PATH_FIELDS = ['file_path', 'dir', 'working_dir'] as const;

/** SYSTEM_DIRS are never readable: the kernel's views of the service's own process and devices, mounted secrets. */
const SYSTEM_DIRS = ['/proc', '/sys', '/dev', '/run/secrets', '/var/run/secrets'];

/** OWN_DIRS are the directories of DATA_DIR that hold what records and names point at; the rest is internal. */
const OWN_DIRS = ['skills', 'agents', 'workspaces', 'extensions'];

/** ConfinedRead is a confined read's outcome: the text, or why there is none (`missing`: nothing is there). */
export type ConfinedRead = { ok: true; text: string; mtime: Date } | { ok: false; missing: boolean; reason: string };
/** ConfinedBytes is a confined read of bytes: them, or why there are none (`tooLarge`: past the caller's bound). */
export type ConfinedBytes = { ok: true; bytes: Buffer; mtime: Date } | { ok: false; missing: boolean; tooLarge?: boolean; reason: string };

/** pathFieldsOf lists every non-empty path field of a spec (PATH_FIELDS) with its dotted path. */
export function pathFieldsOf(spec: unknown): { path: string; value: string }[] {
  return PATH_FIELDS.flatMap((k) => fieldsNamed(spec, k))
    .filter((f): f is { path: string; value: string } => typeof f.value === 'string' && f.value.trim() !== '');
}

/**
 * PathConfinement is the one rule for every path a record or a name makes the service open. After its symlinks
 * are resolved, a path must lie where a workspace may (WorkspaceRoots: inside WORKSPACE_ROOTS when set; with
 * them unset, as with AUTH_MODE=none, anywhere but `/` and DATA_DIR) or in the service's own skill and agent
 * directories (the bundled skills, DATA_DIR/skills, DATA_DIR/agents, DATA_DIR/workspaces); and never under
 * /proc, /sys, /dev or mounted secrets, in the rest of DATA_DIR, nor be one of the service's secret files
 * (AUTH_TOKENS_FILE, SVC_CONFIG_FILE, KUBECONFIG). NOTE: with WORKSPACE_ROOTS unset any caller may register a
 * workspace anywhere but `/` and DATA_DIR, so "inside a registered workspace" would bound nothing one more
 * request could not widen; the rule is therefore where a workspace may be, which needs no store read.
 * It is checked when a record is written (`admit`) and again at each read (`read`, `refusal`), since a file
 * can be replaced by a symlink at any time.
 */
export class PathConfinement {
  private readonly roots: WorkspaceRoots;

  constructor(private readonly config: SecurityConfig, private readonly bundledDir = BUNDLED_DIR) {
    this.roots = new WorkspaceRoots(config.workspaceRoots, config.dataDir);
  }

  /** refusal says why the service may not open `p`, or undefined when it may. */
  refusal(p: string): string | undefined {
    if (!path.isAbsolute(p)) return 'must be an absolute path';
    const real = realPath(p);
    // NOTE: each place is resolved at each check, as WorkspaceRoots does: any of them may be re-linked at run time.
    const system = SYSTEM_DIRS.find((d) => within(real, realPath(d)));
    if (system) return `must not be under ${system}`;
    if (this.config.secretFiles.some((f) => real === realPath(f))) return 'must not be one of the service\'s secret files';
    const data = realPath(this.config.dataDir);
    if (within(real, data)) {
      return OWN_DIRS.some((d) => within(real, path.join(data, d))) ? undefined : `must not be inside DATA_DIR, but for its ${OWN_DIRS.join(', ')} directories`;
    }
    if (within(real, realPath(this.bundledDir))) return undefined;
    return this.roots.refusal(real);
  }

  /** admit refuses a spec whose path fields name a place the service may not open: 422 naming each `spec.` field. */
  admit(spec: unknown): void {
    const problems: Record<string, string> = {};
    for (const f of pathFieldsOf(spec)) {
      const why = this.refusal(f.value);
      if (why) problems[`spec.${f.path}`] = why;
    }
    if (Object.keys(problems).length) {
      throw new ValidationError(`path not allowed: ${Object.entries(problems).map(([k, v]) => `${k}: ${v}`).join('; ')}`, 'path_not_allowed', problems);
    }
  }

  /**
   * read reads a text file under the rule. NOTE: the file is opened without following a final symlink and its
   * opened location is judged again (Linux's /proc/self/fd), so a link swapped in between check and open is
   * not followed; only a regular file is read (a FIFO or device would block or stream).
   */
  async read(p: string): Promise<ConfinedRead> {
    const r = await this.readBytes(p, Infinity);
    return r.ok ? { ok: true, text: r.bytes.toString('utf8'), mtime: r.mtime } : r;
  }

  /**
   * readBytes reads a file's bytes under the rule, as `read` does; a file larger than `maxBytes` is not read
   * (`tooLarge`), and with `under` (a resolved directory) the opened file must also lie inside it.
   */
  async readBytes(p: string, maxBytes: number, under?: string): Promise<ConfinedBytes> {
    const why = this.refusal(p);
    if (why) return { ok: false, missing: false, reason: why };
    const fh = await open(realPath(p), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch((err: NodeJS.ErrnoException) => err);
    if (!('fd' in fh)) return { ok: false, missing: fh.code === 'ENOENT' || fh.code === 'ENOTDIR', reason: `cannot be read (${fh.code})` };
    try {
      const st = await fh.stat();
      if (!st.isFile()) return { ok: false, missing: false, reason: 'is not a regular file' };
      const opened = await readlink(`/proc/self/fd/${fh.fd}`).catch(() => undefined);
      const again = opened && (this.refusal(opened) ?? (under && !within(opened, under) ? `must lie inside ${under}` : undefined));
      if (again) return { ok: false, missing: false, reason: again };
      if (await this.isSecretFile(st)) return { ok: false, missing: false, reason: 'must not be one of the service\'s secret files' };
      if (st.size > maxBytes) return { ok: false, missing: false, tooLarge: true, reason: `is larger than ${maxBytes} bytes` };
      return { ok: true, bytes: await fh.readFile(), mtime: st.mtime };
    } finally {
      await fh.close();
    }
  }

  /** isSecretFile catches a hard link to a secret file, which no path comparison can. */
  private async isSecretFile(st: { dev: number; ino: number }): Promise<boolean> {
    const secrets = await Promise.all(this.config.secretFiles.map((f) => stat(f).catch(() => undefined)));
    return secrets.some((s) => s && s.dev === st.dev && s.ino === st.ino);
  }
}
