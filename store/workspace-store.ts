import type { Redis } from 'ioredis';
import { ConflictError, NotFoundError } from './errors.ts';
import type { Keys } from './keys.ts';
import type { ScriptCommands } from './scripts.ts';

/** Workspace is a project directory with a default agent, extra directories and a sandbox reference. */
export interface Workspace {
  id: string;
  name: string;
  root_dir: string;
  add_dirs: string[];
  default_agent: string;
  sandbox_ref: string;
  created_at: string;
  updated_at: string;
}

/** WorkspaceStore keeps workspaces in Redis, unique by id, root_dir and name (scripts put/delete-workspace). */
export class WorkspaceStore {
  constructor(private readonly redis: Redis & ScriptCommands, private readonly keys: Keys) {}

  /** save creates or updates a workspace. */
  async save(ws: Workspace, mode: 'create' | 'update'): Promise<Workspace> {
    const code = await this.redis.putWorkspace(
      this.keys.workspaces, this.keys.workspaceRoots, this.keys.workspaceNames,
      ws.id, JSON.stringify(ws), ws.root_dir, ws.name, mode,
    );
    if (code === -1) throw new ConflictError(`root_dir "${ws.root_dir}" already belongs to another workspace`, 'workspace_root_taken', { root_dir: ws.root_dir });
    if (code === -2) throw new ConflictError(`name "${ws.name}" already belongs to another workspace`, 'workspace_name_taken', { name: ws.name });
    if (code === -3) throw new NotFoundError(`workspace "${ws.id}" does not exist`, 'workspace_not_found', { id: ws.id });
    return ws;
  }

  /** get returns a workspace by id. */
  async get(id: string): Promise<Workspace | undefined> {
    const json = await this.redis.hget(this.keys.workspaces, id);
    return json ? JSON.parse(json) : undefined;
  }

  /** find returns a workspace by id, name or root_dir, in that order. */
  async find(ref: string): Promise<Workspace | undefined> {
    const byId = await this.get(ref);
    if (byId) return byId;
    const id = (await this.redis.hget(this.keys.workspaceNames, ref)) ?? (await this.redis.hget(this.keys.workspaceRoots, ref));
    return id ? this.get(id) : undefined;
  }

  /** list returns every workspace ordered by name. */
  async list(): Promise<Workspace[]> {
    const all = Object.values(await this.redis.hgetall(this.keys.workspaces)).map((j) => JSON.parse(j) as Workspace);
    return all.sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
  }

  /** delete removes a workspace; false when it did not exist. */
  async delete(id: string): Promise<boolean> {
    const code = await this.redis.deleteWorkspace(this.keys.workspaces, this.keys.workspaceRoots, this.keys.workspaceNames, id);
    return code === 1;
  }
}
