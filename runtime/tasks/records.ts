import type { Identity, Priority, Task, TaskRun } from './types.ts';
import { LEASED, PRIORITY_RANK } from './types.ts';

const TASK_JSON = ['owner', 'created_by', 'origin', 'metadata', 'required_capabilities', 'preferred_capabilities', 'depends_on'] as const;
const TASK_NUM = ['max_attempts', 'depth', 'latest_event_seq'] as const;
const TASK_BOOL = ['auto_enqueue_on_ready', 'paused'] as const;
const RUN_JSON = ['claimed_by', 'origin', 'metadata', 'result'] as const;
const RUN_NUM = ['attempt', 'queued_ms', 'lease_until_ms', 'lease_ms'] as const;

/** FieldKinds says how each non-string field of a hash decodes: JSON, number or boolean. */
type FieldKinds = ReadonlyMap<string, 'json' | 'num' | 'bool'>;
const kinds = (json: readonly string[], num: readonly string[], bool: readonly string[]): FieldKinds =>
  new Map([...json.map((k) => [k, 'json'] as const), ...num.map((k) => [k, 'num'] as const), ...bool.map((k) => [k, 'bool'] as const)]);
const TASK_KINDS = kinds(TASK_JSON, TASK_NUM, TASK_BOOL);
const RUN_KINDS = kinds(RUN_JSON, RUN_NUM, []);

/** toFields flattens a task or run into Redis hash fields (JSON for objects, '1'/'0' for booleans). */
export function toFields(o: Record<string, unknown>, kind: FieldKinds): string[] {
  const out: string[] = [];
  for (const k in o) {
    const v = o[k];
    out.push(k, kind.get(k) === 'json' ? JSON.stringify(v ?? null) : typeof v === 'boolean' ? (v ? '1' : '0') : v === undefined || v === null ? '' : String(v));
  }
  return out;
}

export const taskFields = (t: Task) => toFields(t as unknown as Record<string, unknown>, TASK_KINDS);
export const runFields = (r: TaskRun) => toFields(r as unknown as Record<string, unknown>, RUN_KINDS);

// NOTE: the claim and complete paths decode and shape a run several times per request: a kind lookup per field
// and a plain copy (not rest destructuring) take a third of the time there.
function parse(h: Record<string, string>, kind: FieldKinds): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (const k in h) {
    const v = h[k];
    const t = kind.get(k);
    o[k] = t === undefined ? v : t === 'json' ? (v === '' ? null : JSON.parse(v)) : t === 'num' ? Number(v || 0) : v === '1';
  }
  return o;
}

export const taskFrom = (h: Record<string, string>) => parse(h, TASK_KINDS) as unknown as Task;
export const runFrom = (h: Record<string, string>) => parse(h, RUN_KINDS) as unknown as TaskRun;

/** queueScope is the queue a task's runs wait in: one per workspace for workspace tasks, one for global tasks. */
export const queueScope = (t: Pick<Task, 'scope' | 'workspace_id'>) => (t.scope === 'workspace' ? `ws:${t.workspace_id}` : 'global');

/** BAND_WIDTH separates priority bands in a queue score: band * 1e13 + queued_at ms (ms stay below 1e13 until 2286). */
export const BAND_WIDTH = 1e13;
export const band = (p: Priority) => (40 - PRIORITY_RANK[p]) / 10;
export const queueScore = (p: Priority, queuedMs: number) => band(p) * BAND_WIDTH + queuedMs;
/** maxScoreFor is the highest queue score whose priority rank is ≥ min. */
export function maxScoreFor(min: number | undefined): string {
  if (!min || min <= 10) return '+inf';
  if (min > 40) return '-1';
  const maxBand = Math.floor((40 - min) / 10);
  return String((maxBand + 1) * BAND_WIDTH - 1);
}

/** runView is a run as the API shows it: the lease deadline as a time, internal counters left out. */
export function runView(r: TaskRun): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k in r) if (!INTERNAL_RUN_FIELDS.has(k)) out[k] = r[k as keyof TaskRun];
  out.lease_until = LEASED.includes(r.status) && r.lease_until_ms ? new Date(r.lease_until_ms).toISOString() : '';
  return out;
}
const INTERNAL_RUN_FIELDS = new Set(['queued_ms', 'lease_until_ms', 'lease_ms']);

/** leaseView is the `lease` object of the agent routes. */
export function leaseView(r: TaskRun): Record<string, unknown> {
  const v = runView(r);
  return {
    task_id: r.task_id, run_id: r.id, status: r.status, session_id: r.session_id || undefined, claimed_by: r.claimed_by ?? undefined,
    claim_token_hash: r.claim_token_hash || undefined, lease_until: v.lease_until || undefined, heartbeat_at: r.heartbeat_at || undefined,
  };
}

export const identity = (kind: string, ref: string): Identity => ({ kind, ref });
