import { HOOK_EVENTS, isSyncEligible } from '../../codecs/hook-binding.ts';

export { HOOK_EVENTS, isSyncEligible };

/**
 * GATED are the sync-eligible points where the service waits for a decision (HookGate.gate) before acting.
 * Each is gated in exactly one place:
 * - tool.pre_call: ToolRuntime.invoke (runtime/tools/runtime.ts), before approval and the backend call
 * - session.pre_create: SessionService.create, before anything is stored
 * - session.pre_resume: SessionService.resume, before the session is marked starting
 * - session.pre_stop: SessionService.stop, before the stop command is sent
 * - input.pre_submit: SessionService.sendPrompt, before the prompt is queued or sent
 * - automation.job.pre_fire, automation.trigger.pre_fire, agent.heartbeat.wake.before: the automation and
 *   heartbeat families call the same gate before a fire / a wake.
 * - task.run.pre_claim: TaskService (runtime/tasks/service.ts), before an agent's claim-next or an operator's
 *   claim/start of a queued run commits (a deny: 403 hook_denied, nothing claimed).
 */
export const GATED: readonly string[] = [
  'tool.pre_call', 'session.pre_create', 'session.pre_resume', 'session.pre_stop', 'input.pre_submit',
  'automation.job.pre_fire', 'automation.trigger.pre_fire', 'agent.heartbeat.wake.before',
  'task.run.pre_claim',
];

/**
 * EMITTED are the catalog events the service publishes on the event bus: the gated points above (the gate
 * publishes them), the session host's lifecycle, turn, tool and permission events (runtime/sessions/bus-events.ts),
 * and the automation and heartbeat families' fire, run and wake events.
 */
export const EMITTED: readonly string[] = [
  ...GATED,
  'session.post_create', 'session.post_resume', 'session.post_stop', 'agent.crashed',
  'turn.start', 'turn.end', 'tool.post_call', 'tool.post_error',
  'permission.request', 'permission.resolved', 'permission.denied',
  'automation.job.post_fire', 'automation.trigger.post_fire', 'automation.run.completed', 'automation.run.failed',
  'agent.heartbeat.wake.after',
  // tasks: published beside the public task.run_* events (runtime/tasks/tx.ts HOOK_EVENTS)
  'task.run.enqueued', 'task.run.post_claim', 'task.run.lease_extended', 'task.run.lease_expired', 'task.run.lease_recovered',
  'task.run.released', 'task.run.completed', 'task.run.failed',
  // model catalog: runtime/models/refresher.ts publishes them under their public names
  'provider.auth_required', 'provider.auth_recovered', 'provider.rate_limited', 'provider.permission_denied', 'provider.unavailable', 'provider.model_catalog_refreshed',
  // loops: runtime/loops/bus-events.ts (one name serves presets and hooks)
  'loop.run.started', 'loop.run.status_changed', 'loop.run.needs_approval', 'loop.run.completed', 'loop.run.failed',
  // extensions (runtime/extensions/service.ts)
  'extension.installed', 'extension.updated', 'extension.removed', 'extension.enabled', 'extension.disabled',
  // marketplace skill installs (runtime/skills/installs.ts)
  'skill.installed', 'skill.updated', 'skill.removed',
];

const emitted = new Set(EMITTED);
const gated = new Set(GATED);

/** NOT_EMITTED are the catalog events nothing publishes yet: a binding on one is accepted but never runs. */
export const NOT_EMITTED: readonly string[] = HOOK_EVENTS.filter((e) => !emitted.has(e));

export const isEmitted = (event: string): boolean => emitted.has(event);
export const isGated = (event: string): boolean => gated.has(event);

/**
 * eventCondition is the `EventEmitted` status condition of a binding: False when its event is never published,
 * or when it is a sync binding on an event that is published but not gated (it would never run inline).
 */
export function eventCondition(event: string, mode: string): { type: 'EventEmitted'; status: 'True' | 'False'; reason: string; message: string } {
  if (!emitted.has(event)) {
    return { type: 'EventEmitted', status: 'False', reason: 'EventNotEmitted', message: `event ${event} is not emitted by this service yet; the binding is stored but never runs` };
  }
  if (mode === 'sync' && !gated.has(event)) {
    return { type: 'EventEmitted', status: 'False', reason: 'SyncPointNotGated', message: `event ${event} is emitted but not gated; a sync binding on it never runs (use mode async)` };
  }
  return { type: 'EventEmitted', status: 'True', reason: 'EventEmitted', message: '' };
}
