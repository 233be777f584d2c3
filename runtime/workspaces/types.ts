import type { ResourceStore } from '../../store/resource-store.ts';
import type { WorkspaceStore } from '../../store/workspace-store.ts';
import type { SecurityPolicy } from '../security/policy.ts';

export type { Workspace } from '../../store/workspace-store.ts';

/** WorkspaceServiceOptions is what the workspace service works with: its store, the records, the root policy. */
export interface WorkspaceServiceOptions {
  workspaces: WorkspaceStore;
  store: ResourceStore;
  /** Decides where a workspace's directories may be (WORKSPACE_ROOTS). */
  security: SecurityPolicy;
}
