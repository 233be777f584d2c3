import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import type { SecurityPolicy } from '../security/policy.ts';
import { within } from '../security/workspace-roots.ts';
import { NotFoundError, ValidationError } from '../../store/errors.ts';
import type { WorkspaceServiceOptions, WorkspaceView } from './types.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { Workspace, WorkspaceStore } from '../../store/workspace-store.ts';
import { tooLong } from '../../codecs/limits.ts';
import { isNonEmptyString } from '../../codecs/shared.ts';
import { resolveAgent } from '../agents/resolve-agent.ts';

/** PATCHABLE are the fields PATCH /api/workspaces/{id} may change. */
const PATCHABLE = ['name', 'add_dirs', 'default_agent', 'sandbox_ref'];
/** WORKSPACE_FIELDS are the fields of a workspace create body; PATCH takes the same (root_dir is refused with why). */
export const WORKSPACE_FIELDS = ['root_dir', ...PATCHABLE];

/**
 * directory resolves a path that must be an existing directory the workspace-root policy allows; otherwise a
 * 422 naming the field. NOTE: the policy judges the path after its symlinks are resolved, so a link inside an
 * allowed root that points to /etc is refused as /etc.
 */
async function directory(field: string, value: unknown, security: SecurityPolicy): Promise<string> {
  if (!isNonEmptyString(value)) throw new ValidationError(`${field} must be a non-empty path`, 'invalid_workspace', { [field]: 'must be a non-empty path' });
  const abs = path.resolve(value.trim());
  let real: string | undefined;
  try {
    if ((await stat(abs)).isDirectory()) real = await realpath(abs);
  } catch { /* reported below */ }
  if (!real) throw new ValidationError(`${field} "${value}" is not an existing directory`, 'invalid_workspace', { [field]: 'must be an existing directory' });
  const why = security.workspaceRoots.workspaceRefusal(real);
  if (why) throw new ValidationError(`${field} "${value}" ${real === abs ? '' : `(${real}) `}is not allowed: ${why}`, 'workspace_dir_not_allowed', { [field]: why });
  return real;
}

function optionalString(body: Record<string, unknown>, field: string): string | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new ValidationError(`${field} must be a string`, 'invalid_workspace', { [field]: 'must be a string' });
  const long = tooLong(field, v);
  if (long) throw new ValidationError(`${field} ${long}`, 'invalid_workspace', { [field]: long });
  return v.trim();
}

async function addDirs(v: unknown, security: SecurityPolicy): Promise<string[] | undefined> {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw new ValidationError('add_dirs must be an array of directories', 'invalid_workspace', { add_dirs: 'must be an array' });
  const dirs = await Promise.all(v.map((d, i) => directory(`add_dirs[${i}]`, d, security)));
  return [...new Set(dirs)].sort();
}

/**
 * WorkspaceService manages workspaces: roots are existing directories the workspace-root policy allows
 * (WORKSPACE_ROOTS; never `/` or the service's own DATA_DIR), addressed by id, name or path; deleting a
 * workspace deletes its workspace-scoped records.
 */
export class WorkspaceService {
  private readonly workspaces: WorkspaceStore;
  private readonly store: ResourceStore;
  private readonly security: SecurityPolicy;

  constructor(o: WorkspaceServiceOptions) {
    this.workspaces = o.workspaces;
    this.store = o.store;
    this.security = o.security;
    // NOTE: with authentication on, the default root is DATA_DIR/workspaces; it is created here so a fresh
    // service has somewhere to put workspaces. Roots an operator configured elsewhere are not created: a typo
    // in WORKSPACE_ROOTS should show as "no such directory", not as a new empty tree.
    const own = path.join(o.security.config.dataDir, 'workspaces');
    if (o.security.config.workspaceRoots?.includes(own)) mkdirSync(own, { recursive: true });
  }

  /** create stores a new workspace on an allowed, existing root_dir (and add_dirs). */
  async create(body: Record<string, unknown>): Promise<Workspace> {
    const root = await directory('root_dir', body.root_dir, this.security);
    const now = new Date().toISOString();
    const ws: Workspace = {
      id: `ws-${randomBytes(8).toString('hex')}`,
      name: optionalString(body, 'name') || path.basename(root) || 'root',
      root_dir: root, add_dirs: (await addDirs(body.add_dirs, this.security)) ?? [],
      default_agent: optionalString(body, 'default_agent') ?? '', sandbox_ref: optionalString(body, 'sandbox_ref') ?? '',
      created_at: now, updated_at: now,
    };
    await this.checkDefaultAgent(ws.default_agent, ws.id);
    return this.workspaces.save(ws, 'create');
  }

  /** update changes a workspace's name, add_dirs (each checked as root_dir is), default agent or sandbox. */
  async update(ref: string, body: Record<string, unknown>): Promise<Workspace> {
    const cur = await this.get(ref);
    // NOTE: a field PATCH would ignore is refused, so a caller never reads 200 for a change that did not happen.
    const unknown = Object.keys(body).filter((k) => !PATCHABLE.includes(k));
    if (unknown.length) {
      const why = (k: string) => (k === 'root_dir' ? 'cannot change; create a workspace at the new root instead' : `is not a workspace field (${PATCHABLE.join(', ')})`);
      throw new ValidationError(`cannot patch ${unknown.join(', ')}`, 'invalid_workspace', Object.fromEntries(unknown.map((k) => [k, why(k)])));
    }
    const name = optionalString(body, 'name');
    if (name === '') throw new ValidationError('name must not be empty', 'invalid_workspace', { name: 'must not be empty' });
    const next: Workspace = {
      ...cur,
      name: name ?? cur.name,
      add_dirs: (await addDirs(body.add_dirs, this.security)) ?? cur.add_dirs,
      default_agent: optionalString(body, 'default_agent') ?? cur.default_agent,
      sandbox_ref: optionalString(body, 'sandbox_ref') ?? cur.sandbox_ref,
      updated_at: new Date().toISOString(),
    };
    await this.checkDefaultAgent(next.default_agent, cur.id);
    return this.workspaces.save(next, 'update');
  }

  /** checkDefaultAgent refuses a default_agent no definition (or built-in) provides: sessions would fail on it. */
  private async checkDefaultAgent(name: string, workspaceId: string): Promise<void> {
    if (name && !(await resolveAgent(this.store, name, workspaceId))) {
      throw new ValidationError(`default_agent "${name}" is not an agent here`, 'agent_not_available', { default_agent: `no agent named "${name}" in this workspace or globally` });
    }
  }

  /** get finds a workspace by id, name or root path, or throws 404. */
  async get(ref: string): Promise<Workspace> {
    const ws = (await this.workspaces.find(ref)) ?? (path.isAbsolute(ref) ? await this.workspaces.find(path.resolve(ref)) : undefined);
    if (!ws) throw new NotFoundError(`workspace "${ref}" does not exist`, 'workspace_not_found', { workspace: ref });
    return ws;
  }

  /** views returns every workspace with whether its root directory still exists. */
  async views(): Promise<WorkspaceView[]> {
    return Promise.all((await this.workspaces.list()).map(async (ws) => ({ ...ws, root_exists: await stat(ws.root_dir).then((s) => s.isDirectory(), () => false) })));
  }

  /** list returns every workspace. */
  list(): Promise<Workspace[]> {
    return this.workspaces.list();
  }

  /** resolve finds the workspace whose root (deepest first) contains the path. */
  async resolve(p: unknown): Promise<Workspace> {
    if (!isNonEmptyString(p) || !path.isAbsolute(p.trim())) throw new ValidationError('path must be an absolute path', 'invalid_path', { path: 'must be an absolute path' });
    let target = path.resolve(p.trim());
    try { target = await realpath(target); } catch { /* a path that does not exist yet still resolves by prefix */ }
    const best = (await this.workspaces.list()).filter((w) => within(target, w.root_dir)).sort((a, b) => b.root_dir.length - a.root_dir.length)[0];
    if (!best) throw new NotFoundError(`no workspace contains "${p}"`, 'workspace_not_found', { path: p });
    return best;
  }

  /** delete removes the workspace, then each of its workspace-scoped records (each through the change log). */
  async delete(ref: string): Promise<Workspace> {
    const ws = await this.get(ref);
    await this.workspaces.delete(ws.id);
    const records = await this.store.list({ scope: { kind: 'workspace', id: ws.id } });
    // NOTE: activations go first, so a deleted child does not wake an activation that would re-create it.
    records.sort((a, b) => Number(b.kind === 'bundle.activation') - Number(a.kind === 'bundle.activation'));
    for (const rec of records) {
      try {
        await this.store.delete(rec.kind, rec.id, rec.version);
      } catch (err) {
        // NOTE: a record already deleted (404) is fine; an owned child goes with its activation.
        if ((err as { status?: number }).status !== 404 && (err as { status?: number }).status !== 409) throw err;
      }
    }
    return ws;
  }
}
