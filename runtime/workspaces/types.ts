import type { ResourceStore } from '../../store/resource-store.ts';
import type { WorkspaceStore } from '../../store/workspace-store.ts';
import type { SecurityPolicy } from '../security/policy.ts';

import type { Workspace } from '../../store/workspace-store.ts';

export type { Workspace } from '../../store/workspace-store.ts';

/**
 * WorkspaceView is a workspace as `GET /api/workspaces` lists it: with `root_exists`, false when its root
 * directory was removed after it was created (no session can start there; the console's picker skips it).
 */
export type WorkspaceView = Workspace & { root_exists: boolean };

/** WorkspaceServiceOptions is what the workspace service works with: its store, the records, the root policy. */
export interface WorkspaceServiceOptions {
  workspaces: WorkspaceStore;
  store: ResourceStore;
  /** Decides where a workspace's directories may be (WORKSPACE_ROOTS). */
  security: SecurityPolicy;
}
