/**
 * Event names a preset may name, the names this service publishes on
 * its bus today, and the pattern rules. Presets match the bus event `type` as published.
 */

const expand = (family: string, leaves: string[]) => leaves.map((l) => `${family}${l}`);

/** PUBLIC_EVENT_NAMES are the spec's public notification event names. */
export const PUBLIC_EVENT_NAMES: readonly string[] = [
  ...expand('session.', ['unhealthy', 'hung', 'recovered']),
  ...expand('task.', ['created', 'updated', 'published', 'approved', 'rejected', 'canceled', 'child_created', 'dependency_added',
    'dependency_removed', 'paused', 'resumed', 'execution_profile_updated', 'execution_profile_deleted']),
  ...expand('task.run_', ['enqueued', 'claimed', 'starting', 'session_bound', 'started', 'completed', 'failed', 'canceled', 'force_stopped',
    'recovered', 'rejected', 'lease_extended', 'lease_expired', 'released', 'operator_forced_fail', 'operator_retry', 'recovered_from_attention',
    'starved', 'needs_attention', 'review_requested', 'review_bound', 'review_recorded', 'review_approved', 'review_rejected', 'review_blocked',
    'review_error', 'review_timeout', 'review_invalid_output', 'review_retry_enqueued']),
  ...expand('provider.', ['auth_required', 'auth_recovered', 'rate_limited', 'permission_denied', 'unavailable', 'model_catalog_refreshed']),
  ...expand('extension.', ['installed', 'updated', 'removed', 'enabled', 'disabled']),
  ...expand('tool.', ['call_started', 'call_completed', 'call_failed', 'call_denied', 'result_truncated']),
  ...expand('memory.write.', ['committed', 'rejected', 'shadowed', 'reindex', 'reverted']),
  ...expand('memory.dream.run.', ['started', 'promoted', 'failed']),
  ...expand('memory.extractor.', ['started', 'completed', 'failed', 'coalesced', 'dropped']),
  ...expand('memory.daily.', ['rotated', 'archived', 'restored', 'purged', 'archive_purged']),
  ...expand('memory.provider.', ['enabled', 'disabled', 'collision']),
  ...expand('memory.recall.', ['executed', 'skipped', 'signal_dropped', 'signal_update_failed']),
  ...expand('memory.decisions.', ['audit_summarized', 'pruned']),
  ...expand('memory.workspace.', ['relocated', 'recovered']),
  'memory.agent.purged', 'memory.migration.applied',
  ...expand('scheduler.', ['paused', 'resumed', 'drain_started', 'drain_completed']),
  'settings.changed', 'skill.shadowed', 'skills.load_failed', 'hook.dispatch.start', 'hook.dispatch.complete',
  'network.peer.joined', 'network.peer.left', 'notification.preset_created', 'notification.preset_updated',
  'bridge_notification_suppressed', 'transcript_marker.created', 'transcript_marker.redacted',
];

/**
 * EMITTED_EVENT_NAMES are the bus event types this service publishes today (store/event-bus.ts publishers:
 * the change relay, the session host, this family). NOTE: a family that starts publishing adds its names here
 * so presets may name them exactly; `family.*` patterns need no entry.
 */
export const EMITTED_EVENT_NAMES: readonly string[] = [
  'resource.applied', 'resource.deleted',
  'session.post_create', 'session.post_resume', 'session.post_stop', 'agent.crashed',
  'turn.start', 'turn.end', 'tool.post_call', 'tool.post_error',
  'permission.request', 'permission.resolved', 'permission.denied',
  'notification.preset_created', 'notification.preset_updated',
  // tasks (runtime/tasks/)
  'task.created', 'task.updated', 'task.published', 'task.approved', 'task.rejected', 'task.canceled', 'task.child_created',
  'task.dependency_added', 'task.paused', 'task.resumed', 'task.run_enqueued', 'task.run_claimed', 'task.run_lease_extended',
  'task.run_completed', 'task.run_failed', 'task.run_canceled', 'task.run_released', 'task.run_recovered', 'task.run_lease_expired',
  'task.run_operator_forced_fail', 'task.run_operator_retry', 'scheduler.paused', 'scheduler.resumed', 'scheduler.drain_started', 'scheduler.drain_completed',
  // model catalog (runtime/models/refresher.ts)
  'provider.auth_required', 'provider.auth_recovered', 'provider.rate_limited', 'provider.permission_denied', 'provider.unavailable', 'provider.model_catalog_refreshed',
  // memory (runtime/memory/)
  'memory.write.committed', 'memory.write.rejected', 'memory.write.reverted', 'memory.recall.executed',
  // memory dreams and ledgers (runtime/memory/dream-service.ts, ledger-service.ts); the hook catalog has no memory events
  'memory.dream.run.started', 'memory.dream.run.promoted', 'memory.dream.run.failed', 'memory.dream.run.skipped', 'memory.ledger.corrupt',
  // extensions (runtime/extensions/)
  'extension.installed', 'extension.updated', 'extension.removed', 'extension.enabled', 'extension.disabled',
  // marketplace skill installs (runtime/skills/installs.ts)
  'skill.installed', 'skill.updated', 'skill.removed',
  // loops (runtime/loops/bus-events.ts)
  'loop.run.started', 'loop.run.status_changed', 'loop.run.needs_approval', 'loop.run.completed', 'loop.run.failed',
];

const KNOWN = new Set([...PUBLIC_EVENT_NAMES, ...EMITTED_EVENT_NAMES]);
const PREFIX_PATTERN = /^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*\.[a-z0-9_]*\*$/;

/** eventPatternProblem says why a preset event pattern is refused, or undefined when it is valid. */
export function eventPatternProblem(pattern: string): string | undefined {
  if (pattern.endsWith('*')) {
    if (pattern.startsWith('task_run.')) return 'the task_run.* family is not an event family; use task.run_*';
    if (!PREFIX_PATTERN.test(pattern)) return 'a pattern is a prefix containing "." followed by a single trailing "*" (e.g. session.*, task.run_*)';
    return undefined;
  }
  return KNOWN.has(pattern) ? undefined : `unknown event name "${pattern}"; name a public event or use a prefix pattern such as ${pattern.split('.')[0]}.*`;
}

/** matchesEventPattern reports whether an event type matches one preset pattern (exact, or prefix + "*"). */
export function matchesEventPattern(pattern: string, type: string): boolean {
  return pattern.endsWith('*') ? type.startsWith(pattern.slice(0, -1)) : pattern === type;
}
