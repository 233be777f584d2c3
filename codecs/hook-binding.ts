import * as yup from 'yup';
import { isPositiveDuration } from './duration.ts';
import { at, check, checkEnv, checkSecretRefs, isObject, Issues, str, strMap, y } from './shared.ts';
import type { Codec, DecodeContext } from './types.ts';

/** HOOK_EVENTS are the 72 hook events, plus the provider events of the model catalog, the loop family's 5 `loop.run.*`, the 5 extension lifecycle events and the 3 skill install events. */
export const HOOK_EVENTS = [
  'session.pre_create', 'session.post_create', 'session.pre_resume', 'session.post_resume', 'session.pre_stop', 'session.post_stop', 'session.message_persisted',
  'sandbox.prepare', 'sandbox.ready', 'sandbox.sync.before', 'sandbox.sync.after', 'sandbox.stop',
  'input.pre_submit', 'prompt.post_assemble', 'event.pre_record', 'event.post_record',
  'automation.job.pre_fire', 'automation.job.post_fire', 'automation.trigger.pre_fire', 'automation.trigger.post_fire', 'automation.run.completed', 'automation.run.failed',
  'agent.pre_start', 'agent.spawned', 'agent.crashed', 'agent.stopped', 'agent.soul.snapshot.resolved', 'agent.soul.mutation.after', 'agent.heartbeat.policy.resolved',
  'agent.heartbeat.wake.before', 'agent.heartbeat.wake.after', 'session.health.update.after', 'turn.start', 'turn.end',
  'message.start', 'message.delta', 'message.end', 'tool.pre_call', 'tool.post_call', 'tool.post_error',
  'permission.request', 'permission.resolved', 'permission.denied', 'context.pre_compact', 'context.post_compact',
  'coordinator.pre_spawn', 'coordinator.spawned', 'coordinator.decision', 'coordinator.stopped', 'coordinator.failed',
  'task.run.enqueued', 'task.run.pre_claim', 'task.run.post_claim', 'task.run.lease_extended', 'task.run.lease_expired', 'task.run.lease_recovered', 'task.run.released', 'task.run.completed', 'task.run.failed',
  'spawn.pre_create', 'spawn.created', 'spawn.parent_stopped', 'spawn.ttl_expired', 'spawn.reaped',
  'network.thread.opened', 'network.direct_room.opened', 'network.message.persisted', 'network.work.opened', 'network.work.transitioned', 'network.work.closed',
  'network.peer.joined', 'network.peer.left',
  // NOTE: beyond the 72 catalog events: the model catalog's provider events, one name on the bus and in hooks.
  'provider.auth_required', 'provider.auth_recovered', 'provider.rate_limited', 'provider.permission_denied', 'provider.unavailable', 'provider.model_catalog_refreshed',
  'loop.run.started', 'loop.run.status_changed', 'loop.run.needs_approval', 'loop.run.completed', 'loop.run.failed',
  // NOTE: extensions publish these on the bus; they are listed so hooks and triggers can name them.
  'extension.installed', 'extension.updated', 'extension.removed', 'extension.enabled', 'extension.disabled',
  // NOTE: marketplace skill installs publish these on the bus, under the same names.
  'skill.installed', 'skill.updated', 'skill.removed',
] as const;

/**
 * isSyncEligible says which events a sync hook may bind. NOTE: our rule is that a hook may block
 * only where the service waits for a decision before acting: the `pre_*` and `*.before` events, and the
 * gatekeeping points tool.pre_call, input.pre_submit, prompt.post_assemble, permission.request, event.pre_record.
 */
export function isSyncEligible(event: string): boolean {
  return /(^|\.)pre_[a-z_]+$/.test(event) || event.endsWith('.before')
    || ['tool.pre_call', 'input.pre_submit', 'prompt.post_assemble', 'permission.request', 'event.pre_record'].includes(event);
}

const COMMON_MATCHERS = ['agent_name', 'agent_type', 'workspace_id', 'workspace_root', 'session_type', 'turn_id', 'channel', 'surface', 'kind', 'direction'];
/** FAMILY_MATCHERS: the matcher keys of each event family; these follow each key's meaning. */
const FAMILY_MATCHERS: Record<string, string[]> = {
  tool: ['tool_id', 'tool_name', 'tool_read_only', 'decision_class'],
  permission: ['tool_id', 'tool_name', 'decision_class'],
  sandbox: ['sandbox_id', 'sandbox_backend', 'sandbox_profile', 'sync_direction'],
  input: ['input_class'], prompt: ['input_class'], event: ['acp_event_type'],
  message: ['message_role', 'message_delta_type'], context: ['compaction_reason', 'compaction_strategy'],
  coordinator: ['autonomy', 'work_state'], task: ['autonomy', 'work_state'], spawn: ['autonomy'], network: ['work_state'],
};
const MATCHER_KEYS = [...new Set([...COMMON_MATCHERS, ...Object.values(FAMILY_MATCHERS).flat(), 'sandbox_id'])];
const AUTONOMY_KEYS = ['task_id', 'run_id', 'workflow_id', 'coordination_channel_id', 'coordinator_session_id', 'parent_session_id', 'root_session_id', 'child_session_id', 'spawn_role', 'release_reason'];

/** isValidGlob checks a `path.Match`-style pattern: character classes must be closed and non-empty. */
export function isValidGlob(p: string): boolean {
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '\\') { i++; if (i >= p.length) return false; continue; }
    if (p[i] === ']') return false;
    if (p[i] !== '[') continue;
    let j = i + 1;
    if (p[j] === '^') j++;
    const start = j;
    while (j < p.length && p[j] !== ']') { if (p[j] === '\\') j++; j++; }
    if (j >= p.length || j === start) return false;
    i = j;
  }
  return true;
}

const SOURCES = ['native', 'config', 'agent_definition', 'skill'] as const;

/**
 * NATIVE_BUILTINS are the built-ins a `native` executor runs, chosen by `metadata.builtin` (default `record`):
 * `record` keeps the event in the run record, `log` writes it to the service log, `deny` denies with
 * `metadata.reason` (runtime/hooks/executors.ts).
 */
export const NATIVE_BUILTINS = ['record', 'log', 'deny'] as const;
const PRIORITY: Record<string, number> = { native: 1000, config: 500, agent_definition: 100, skill: 0 };

/** hookShape is the yup shape shared by hook.binding specs and the HookDecl entries of agents and skills. */
export const hookShape = yup.object({
  name: y.string().required('is required'), event: y.oneOf(HOOK_EVENTS).required('is required'),
  source: y.oneOf(SOURCES), mode: y.oneOf(['sync', 'async']), required: y.bool(), priority: y.int32(), priority_set: y.bool(),
  timeout: y.string(), matcher: y.object(), executor_kind: y.oneOf(['native', 'subprocess', 'wasm']),
  command: y.string(), args: y.stringList(), working_dir: y.string(), env: y.stringMap(), secret_env: y.stringMap(), metadata: y.stringMap(),
  skill_source: y.oneOf(['bundled', 'marketplace', 'user', 'additional', 'workspace']), enabled: y.bool(),
});

/**
 * decodeHook validates one hook (binding or declaration) at `base` and returns its canonical form.
 * `scope` applies the hook.binding scope binding of matcher.workspace_id; declarations pass none.
 */
export function decodeHook(v: unknown, base: string, issues: Issues, scope?: DecodeContext['scope']): Record<string, unknown> | undefined {
  if (!check(hookShape, v, issues, base)) return undefined;
  const s = v as Record<string, any>;
  const name = str(s.name);
  if (!name) issues.add(at(base, 'name'), 'is required');
  const event: string = s.event;
  const source: string = s.source ?? 'native';
  const mode: string = s.mode ?? 'async';
  const command = str(s.command);
  if (s.required && mode !== 'sync') issues.add(at(base, 'required'), 'required hooks must have mode sync');
  if (mode === 'sync' && !isSyncEligible(event)) issues.add(at(base, 'mode'), `event ${event} does not allow sync hooks`);
  let executor: string | undefined = s.executor_kind ?? (command ? 'subprocess' : source === 'native' ? 'native' : undefined);
  if (!executor) issues.add(at(base, 'executor_kind'), 'cannot be inferred: set command (subprocess) or use source native');
  if (executor === 'native' && source !== 'native') issues.add(at(base, 'executor_kind'), 'a native executor needs source native');
  if (executor === 'subprocess' && !command) issues.add(at(base, 'command'), 'is required for a subprocess executor');
  // NOTE: no wasm runtime is built in this service; refusing at write time beats a binding that never runs.
  if (executor === 'wasm') issues.add(at(base, 'executor_kind'), 'wasm executors are not supported by this service; use subprocess or native');
  const builtin = isObject(s.metadata) ? s.metadata.builtin : undefined;
  if (executor === 'native' && builtin !== undefined && !(NATIVE_BUILTINS as readonly unknown[]).includes(typeof builtin === 'string' ? builtin.trim() : builtin)) {
    issues.add(at(base, 'metadata.builtin'), `must be one of ${NATIVE_BUILTINS.join(', ')}`);
  }
  if (executor !== 'subprocess') {
    for (const f of ['command', 'args', 'env', 'secret_env']) {
      const x = s[f];
      if (x !== undefined && x !== null && !(Array.isArray(x) ? x.length === 0 : isObject(x) ? Object.keys(x).length === 0 : x === '')) issues.add(at(base, f), 'is only allowed with a subprocess executor');
    }
  }
  if (s.timeout !== undefined && s.timeout !== '' && !isPositiveDuration(s.timeout)) issues.add(at(base, 'timeout'), 'must be a positive duration such as 30s');
  if (s.skill_source && source !== 'skill') issues.add(at(base, 'skill_source'), 'is only allowed with source skill');
  const env = strMap(s.env);
  const secretEnv = strMap(s.secret_env);
  checkEnv(env, at(base, 'env'), issues);
  checkSecretRefs(secretEnv, 'hooks', at(base, 'secret_env'), issues);

  const matcher: Record<string, unknown> = {};
  const family = event.split('.')[0];
  const allowed = new Set([...COMMON_MATCHERS, ...(FAMILY_MATCHERS[family] ?? [])]);
  for (const [k, x] of Object.entries(isObject(s.matcher) ? s.matcher : {})) {
    const path = at(at(base, 'matcher'), k);
    if (!MATCHER_KEYS.includes(k)) { issues.add(path, 'is not a matcher key'); continue; }
    if (!allowed.has(k)) { issues.add(path, `is not allowed for event ${event}`); continue; }
    if (k === 'tool_read_only') {
      if (typeof x !== 'boolean') issues.add(path, 'must be a boolean'); else matcher[k] = x;
    } else if (k === 'autonomy') {
      if (!isObject(x)) { issues.add(path, 'must be an object'); continue; }
      const a: Record<string, string> = {};
      for (const [ak, av] of Object.entries(x)) {
        if (!AUTONOMY_KEYS.includes(ak)) issues.add(at(path, ak), 'is not an autonomy matcher key');
        else if (typeof av !== 'string') issues.add(at(path, ak), 'must be a string');
        else if (str(av)) a[ak] = str(av);
      }
      if (Object.keys(a).length) matcher[k] = a;
    } else if (typeof x !== 'string') {
      issues.add(path, 'must be a string');
    } else if (str(x)) {
      if (/[*?[\]]/.test(x) && !isValidGlob(str(x))) issues.add(path, 'is not a valid glob pattern');
      matcher[k] = str(x);
    }
  }
  if (scope?.kind === 'workspace') {
    if (!matcher.workspace_id) matcher.workspace_id = scope.id;
    else if (matcher.workspace_id !== scope.id) issues.add(at(base, 'matcher.workspace_id'), `must be the scope's workspace "${scope.id}"`);
  }
  const priority = s.priority ?? 0;
  const metadata = strMap(s.metadata);
  return {
    name, event, source, mode, required: Boolean(s.required),
    priority: priority === 0 && !s.priority_set ? PRIORITY[source] : priority, priority_set: Boolean(s.priority_set),
    ...(s.timeout ? { timeout: str(s.timeout) } : {}), matcher, ...(executor ? { executor_kind: executor } : {}),
    ...(command ? { command } : {}), ...(Array.isArray(s.args) && s.args.length ? { args: s.args } : {}),
    ...(str(s.working_dir) ? { working_dir: str(s.working_dir) } : {}),
    ...(env ? { env } : {}), ...(secretEnv ? { secret_env: secretEnv } : {}), ...(metadata ? { metadata } : {}),
    ...(s.skill_source ? { skill_source: s.skill_source } : {}), enabled: s.enabled ?? true,
  };
}

/** hookBindingCodec validates a `hook.binding` spec (plus `enabled`). */
export const hookBindingCodec: Codec = {
  kind: 'hook.binding',
  maxBytes: 256 * 1024,
  decode(input, ctx) {
    const issues = new Issues(ctx.unknownFields);
    if (!isObject(input)) return { ok: false, errors: [{ path: 'spec', message: 'must be a JSON object' }] };
    const spec = decodeHook(input, '', issues, ctx.scope);
    return issues.ok && spec ? { ok: true, spec } : { ok: false, errors: issues.list };
  },
};
