import type { SessionFields } from '../../store/session-store.ts';

/** SupervisionConfig is the inactivity supervision of prompts. */
export interface SupervisionConfig {
  warnAfterMs: number;
  timeoutMs: number;
  cancelGraceMs: number;
  /** A prompt the agent has not answered at all (no update, no request) for this long gets one early warning; 0 never. */
  firstActivityMs: number;
}

/** SessionCommand is what the API asks a session's owning runtime to do, through Redis. */
export type SessionCommand =
  | { type: 'prompt'; session_id: string; turn_id: string; text: string; mode: 'queue' | 'interrupt' | 'steer'; /** Counted in the input queue's accounting (queue-prompt-2.lua) with this many bytes. */ queued_bytes?: number }
  | { type: 'cancel'; session_id: string }
  | { type: 'approve'; session_id: string; request_id: string; decision: string }
  | { type: 'stop'; session_id: string; reason: string; detail: string };

/** StartRequest asks any runtime to start (or resume) a session. */
export interface StartRequest {
  session_id: string;
  resume: boolean;
}

/** PermissionPolicy narrows what a (spawned) session may use; an empty list means "no restriction". */
export interface PermissionPolicy {
  mcp_servers: string[];
  network_channels: string[];
  sandbox_profiles: string[];
  skills: string[];
  tools: string[];
  workspace_paths: string[];
}

export const POLICY_FIELDS = ['mcp_servers', 'network_channels', 'sandbox_profiles', 'skills', 'tools', 'workspace_paths'] as const;

/** lineageOf is the lineage columns every event of a session carries. */
export function lineageOf(meta: SessionFields) {
  const l = (meta.lineage ?? {}) as { parent_session_id?: string; root_session_id?: string; spawn_depth?: number };
  return { parent_session_id: l.parent_session_id ?? '', root_session_id: l.root_session_id ?? meta.id, spawn_depth: l.spawn_depth ?? 0 };
}
