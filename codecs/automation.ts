import { CronExpressionParser } from 'cron-parser';
import * as yup from 'yup';
import { isPositiveDuration } from './duration.ts';
import { at, check, isObject, Issues, secretRefProblem, str, y } from './shared.ts';
import type { Codec, DecodeContext } from './types.ts';

/** AutomationJobSpec is the canonical spec of an `automation.job` record. */
export type AutomationJobSpec = Record<string, unknown> & { name: string; schedule: { mode: string } };
/** AutomationTriggerSpec is the canonical spec of an `automation.trigger` record. */
export type AutomationTriggerSpec = Record<string, unknown> & { name: string; event: string };

const CHANNEL = /^[a-z0-9][a-z0-9._-]*$/;
const base = {
  id: y.string(), scope: y.oneOf(['global', 'workspace']), workspace_id: y.string(), name: y.string().required('is required'),
  agent_name: y.string(), prompt: y.string(), enabled: y.bool(), source: y.oneOf(['config', 'package', 'dynamic']),
  retry: y.object().shape({ strategy: y.oneOf(['', 'none', 'backoff']), max_retries: yup.number().integer('must be an integer').min(0), base_delay: y.string() }).default(undefined),
  fire_limit: y.object().shape({ max: yup.number().integer('must be an integer'), window: y.string() }).default(undefined),
  history_limit: yup.number().integer('must be an integer'),
  created_at: y.string(), updated_at: y.string(),
};
const jobShape = yup.object({
  ...base,
  schedule: y.object().required('is required').shape({ mode: y.oneOf(['cron', 'every', 'at']).required('is required'), expr: y.string(), interval: y.string(), time: y.string(), timezone: y.string() }),
  task: y.object().shape({ title: y.string(), description: y.string(), owner: y.object(), network_channel: y.string() }).default(undefined),
  concurrency_policy: y.oneOf(['allow', 'forbid', 'replace']), starting_deadline: y.string(),
});
const triggerShape = yup.object({
  ...base,
  agent_name: y.string().required('is required'), prompt: y.string().required('is required'), event: y.string().required('is required'),
  filter: y.stringMap(), webhook_id: y.string(), endpoint_slug: y.string(), webhook_secret_ref: y.string(), include_own_events: y.bool(),
});

/** isCron parses a standard 5-field cron expression with cron-parser. */
export function isCron(expr: string): boolean {
  if (expr.trim().split(/\s+/).length !== 5) return false;
  try {
    CronExpressionParser.parse(expr);
    return true;
  } catch {
    return false;
  }
}

/** isTimeZone is true for an IANA time zone name the runtime knows (`UTC`, `Europe/Paris`). */
export function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** isRestrictedTemplate accepts text whose `{{ }}` blocks are only field references like `{{ .data.id }}`. */
export function isRestrictedTemplate(t: string): boolean {
  const stripped = t.replace(/\{\{\s*\.[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\s*\}\}/g, '');
  return !stripped.includes('{{') && !stripped.includes('}}');
}

interface Options { applyDefaults: boolean; scope?: DecodeContext['scope'] }

/** MAX_HISTORY is the most runs a job's or trigger's history keeps (the store's per-owner retention). */
export const MAX_HISTORY = 1000;

/** decodeCommon handles the fields jobs and triggers share: scope binding, retry, fire_limit, source, times. */
function decodeCommon(s: Record<string, any>, p: string, issues: Issues, o: Options): Record<string, unknown> {
  const out: Record<string, unknown> = { id: str(s.id), name: str(s.name), agent_name: str(s.agent_name), prompt: str(s.prompt), enabled: Boolean(s.enabled) };
  if (!out.name) issues.add(at(p, 'name'), 'is required');
  if (o.scope) {
    const kind = o.scope.kind;
    if (s.scope && s.scope !== kind) issues.add(at(p, 'scope'), `must match the record scope "${kind}"`);
    const ws = str(s.workspace_id);
    if (kind === 'global' && ws) issues.add(at(p, 'workspace_id'), 'must be empty for a global scope');
    if (kind === 'workspace' && ws && ws !== o.scope.id) issues.add(at(p, 'workspace_id'), `must be the scope's workspace "${o.scope.id}"`);
    out.scope = kind;
    out.workspace_id = kind === 'workspace' ? o.scope.id : '';
  }
  let retry = isObject(s.retry) ? { strategy: str(s.retry.strategy), max_retries: s.retry.max_retries ?? 0, base_delay: str(s.retry.base_delay) } : undefined;
  if (o.applyDefaults && (!retry || !retry.strategy)) retry = { strategy: 'none', max_retries: retry?.max_retries ?? 0, base_delay: retry?.base_delay ?? '' };
  if (retry) {
    if (retry.strategy === 'none' && (retry.max_retries !== 0 || retry.base_delay)) issues.add(at(p, 'retry'), 'strategy none needs max_retries 0 and no base_delay');
    if (retry.strategy === 'backoff') {
      if (!(retry.max_retries > 0)) issues.add(at(p, 'retry.max_retries'), 'must be > 0 for backoff');
      if (!isPositiveDuration(retry.base_delay)) issues.add(at(p, 'retry.base_delay'), 'must be a positive duration for backoff');
    }
    out.retry = retry;
  }
  let fire = isObject(s.fire_limit) ? { max: s.fire_limit.max ?? 0, window: str(s.fire_limit.window) } : undefined;
  if (o.applyDefaults && (!fire || fire.max === 0 || !fire.window)) fire = { max: 12, window: '1h' };
  if (fire) {
    if (!(fire.max > 0)) issues.add(at(p, 'fire_limit.max'), 'must be > 0');
    if (!isPositiveDuration(fire.window)) issues.add(at(p, 'fire_limit.window'), 'must be a positive duration');
    out.fire_limit = fire;
  }
  // NOTE: as CronJob's history limits; kept only when given, so existing records' canonical specs are unchanged.
  if (s.history_limit !== undefined) {
    if (!(s.history_limit >= 1 && s.history_limit <= MAX_HISTORY)) issues.add(at(p, 'history_limit'), `must be from 1 to ${MAX_HISTORY}`);
    else out.history_limit = s.history_limit;
  }
  out.source = s.source ?? 'dynamic';
  for (const f of ['created_at', 'updated_at']) {
    if (s[f] === undefined || s[f] === '') continue;
    const t = Date.parse(s[f]);
    if (Number.isNaN(t)) issues.add(at(p, f), 'must be an RFC 3339 time');
    else out[f] = new Date(t).toISOString();
  }
  return out;
}

/** decodeJob validates a job at `p`; bundles pass `applyDefaults: false`. */
export function decodeJob(v: unknown, p: string, issues: Issues, o: Options): AutomationJobSpec | undefined {
  if (!check(jobShape, v, issues, p)) return undefined;
  const s = v as Record<string, any>;
  const out = decodeCommon(s, p, issues, o) as AutomationJobSpec;
  if (!s.task && (!out.agent_name || !out.prompt)) {
    if (!out.agent_name) issues.add(at(p, 'agent_name'), 'is required unless task is set');
    if (!out.prompt) issues.add(at(p, 'prompt'), 'is required unless task is set');
  }
  const sc = s.schedule;
  const schedule: Record<string, string> = { mode: sc.mode };
  if (sc.mode === 'cron') {
    if (!str(sc.expr)) issues.add(at(p, 'schedule.expr'), 'is required for cron');
    else if (!isCron(str(sc.expr))) issues.add(at(p, 'schedule.expr'), 'must be a valid 5-field cron expression');
    if (sc.interval || sc.time) issues.add(at(p, 'schedule'), 'cron forbids interval and time');
    schedule.expr = str(sc.expr);
    // NOTE: an addition to the original: the zone cron fields are read in; absent means UTC. Kept only
    // when given, so the canonical spec of every existing cron job stays what it was.
    const tz = str(sc.timezone);
    if (tz && !isTimeZone(tz)) issues.add(at(p, 'schedule.timezone'), 'must be an IANA time zone such as UTC or Europe/Paris');
    if (tz) schedule.timezone = tz;
  } else if (sc.mode === 'every') {
    if (str(sc.timezone)) issues.add(at(p, 'schedule.timezone'), 'is only allowed for cron');
    if (!isPositiveDuration(sc.interval)) issues.add(at(p, 'schedule.interval'), 'must be a positive duration for every');
    schedule.interval = str(sc.interval);
  } else {
    if (str(sc.timezone)) issues.add(at(p, 'schedule.timezone'), 'is only allowed for cron');
    if (Number.isNaN(Date.parse(str(sc.time))) || !/^\d{4}-\d\d-\d\dT/.test(str(sc.time))) issues.add(at(p, 'schedule.time'), 'must be an RFC 3339 time for at');
    schedule.time = str(sc.time);
  }
  out.schedule = schedule as AutomationJobSpec['schedule'];
  // NOTE: Kubernetes CronJob's controls, kept only when they differ from the default (allow; no deadline), so the
  // canonical spec of every job written before they existed is unchanged.
  if (s.concurrency_policy && s.concurrency_policy !== 'allow') out.concurrency_policy = s.concurrency_policy;
  if (s.starting_deadline !== undefined) {
    if (!isPositiveDuration(s.starting_deadline)) issues.add(at(p, 'starting_deadline'), 'must be a positive duration, such as 30s or 5m');
    else out.starting_deadline = str(s.starting_deadline);
  }
  if (isObject(s.task)) {
    const task = { title: str(s.task.title), description: str(s.task.description), owner: s.task.owner ?? {}, network_channel: str(s.task.network_channel) };
    if (!task.title) issues.add(at(p, 'task.title'), 'is required');
    if (task.network_channel && !CHANNEL.test(task.network_channel)) issues.add(at(p, 'task.network_channel'), 'must be a channel name (a-z0-9._-)');
    // NOTE: the ownership check of the original needs a task service; an owner must at least be {kind, ref}.
    if (isObject(s.task.owner) && Object.keys(s.task.owner).length && (!str(s.task.owner.kind) || !str(s.task.owner.ref))) issues.add(at(p, 'task.owner'), 'must have kind and ref');
    if (out.retry && (out.retry as { strategy: string }).strategy !== 'none') issues.add(at(p, 'retry'), 'must be none when task is set');
    out.task = task;
  }
  return issues.ok ? out : undefined;
}

const FILTER_KEY = /^(kind|scope|workspace_id|source|session_id|agent_name|origin|data(\.[^.\s]+)+)$/;

/** decodeTrigger validates a trigger at `p`. */
export function decodeTrigger(v: unknown, p: string, issues: Issues, o: Options): AutomationTriggerSpec | undefined {
  if (!check(triggerShape, v, issues, p)) return undefined;
  const s = v as Record<string, any>;
  const out = decodeCommon(s, p, issues, o) as AutomationTriggerSpec;
  out.event = str(s.event);
  if (!out.agent_name) issues.add(at(p, 'agent_name'), 'is required');
  if (!out.prompt) issues.add(at(p, 'prompt'), 'is required');
  if (!out.event) issues.add(at(p, 'event'), 'is required');
  const filter: Record<string, string> = {};
  for (const [k, x] of Object.entries((s.filter ?? {}) as Record<string, string>)) {
    if (!FILTER_KEY.test(k)) issues.add(at(at(p, 'filter'), k), 'must be kind, scope, workspace_id, source, session_id, agent_name, origin or data.<path>');
    else if (!x.trim()) issues.add(at(at(p, 'filter'), k), 'must not be empty');
    else filter[k] = x.trim();
  }
  if (Object.keys(filter).length) out.filter = filter;
  // NOTE: omitted unless set, so the canonical spec of every trigger written before the field existed is unchanged.
  if (s.include_own_events === true) out.include_own_events = true;
  if (/\{\{|\}\}/.test(out.prompt as string) && !isRestrictedTemplate(out.prompt as string)) issues.add(at(p, 'prompt'), 'template may only reference fields, like {{ .data.id }}');
  const webhook = { webhook_id: str(s.webhook_id), endpoint_slug: str(s.endpoint_slug), webhook_secret_ref: str(s.webhook_secret_ref) };
  if (out.event === 'webhook') {
    if (!webhook.webhook_id && !webhook.endpoint_slug) issues.add(at(p, 'endpoint_slug'), 'endpoint_slug or webhook_id is required for webhook triggers');
    if (webhook.webhook_id && !webhook.webhook_id.startsWith('wbh_')) issues.add(at(p, 'webhook_id'), 'must start with wbh_');
    const refProblem = secretRefProblem(webhook.webhook_secret_ref, 'automation');
    if (refProblem) issues.add(at(p, 'webhook_secret_ref'), refProblem);
    Object.assign(out, webhook);
  } else {
    for (const [k, x] of Object.entries(webhook)) if (x) issues.add(at(p, k), 'is only allowed for webhook triggers');
  }
  return issues.ok ? out : undefined;
}

function codec<S>(kind: string, decode: typeof decodeJob | typeof decodeTrigger): Codec<S> {
  return {
    kind,
    maxBytes: 256 * 1024,
    decode(input, ctx) {
      const issues = new Issues(ctx.unknownFields);
      if (!isObject(input)) return { ok: false, errors: [{ path: 'spec', message: 'must be a JSON object' }] };
      const spec = decode(input, '', issues, { applyDefaults: true, scope: ctx.scope });
      return spec && issues.ok ? { ok: true, spec: spec as S } : { ok: false, errors: issues.list };
    },
  };
}

/** automationJobCodec validates `automation.job`. */
export const automationJobCodec = codec<AutomationJobSpec>('automation.job', decodeJob);
/** automationTriggerCodec validates `automation.trigger`. */
export const automationTriggerCodec = codec<AutomationTriggerSpec>('automation.trigger', decodeTrigger);
