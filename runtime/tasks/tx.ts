import type { BusEventInput } from '../../store/event-bus.ts';
import { NotFoundError } from '../../store/errors.ts';
import type { CommitPlan, TaskSnapshot, TaskStore } from '../../store/task-store.ts';
import { queueScope, queueScore, runFields, runFrom, taskFields, taskFrom } from './records.ts';
import { deriveStatus } from './status.ts';
import { LEASED, type RunStatus, type Task, type TaskRun } from './types.ts';

/**
 * HOOK_EVENTS maps the public run events to the hook catalog's `task.run.*` names:
 * both go on the bus, so notification presets match the first and hook bindings the second.
 */
export const HOOK_EVENTS: Record<string, string> = {
  'task.run_enqueued': 'task.run.enqueued', 'task.run_claimed': 'task.run.post_claim', 'task.run_lease_extended': 'task.run.lease_extended',
  'task.run_lease_expired': 'task.run.lease_expired', 'task.run_recovered': 'task.run.lease_recovered', 'task.run_released': 'task.run.released',
  'task.run_completed': 'task.run.completed', 'task.run_failed': 'task.run.failed',
};

/** withHookEvent is an event and, for a run event the hook catalog names, its hook twin. */
export function withHookEvent(e: BusEventInput): BusEventInput[] {
  const hook = HOOK_EVENTS[e.type];
  return hook ? [e, { ...e, type: hook, summary: e.summary?.replace(e.type, hook) }] : [e];
}

/** Loaded is one task read in a transaction, with its revision (checked at commit) and its runs. */
export interface Loaded {
  task: Task;
  rev: number;
  runs: Map<string, TaskRun>;
  /**
   * the task's and its runs' hash fields as read (absent for a task this transaction creates): which leases and
   * queues a write leaves, and which fields a commit writes (those that differ)
   */
  stored?: { task: Record<string, string>; runs: Map<string, Record<string, string>> };
  status0: string;
  dirty: boolean;
  /** the tasks that depend on this one, as read with it (absent for a task this transaction creates) */
  dependents?: string[];
}

/**
 * Tx is one optimistic transaction of the task family: it reads tasks (with their runs and revisions), lets the
 * caller change them in memory, recomputes every touched task's status and its dependents', and
 * commits everything in one script that refuses if any task read changed meanwhile (then the whole step reruns).
 */
export class Tx {
  readonly loaded = new Map<string, Loaded | null>();
  readonly events: BusEventInput[] = [];
  readonly wakes = new Set<string>();
  readonly extra: CommitPlan = { checks: [], absent: [], set: [], sadd: [], srem: [], del: [] };
  readonly newTasks = new Set<string>();
  readonly now = new Date();

  constructor(readonly store: TaskStore) {}

  get nowIso() { return this.now.toISOString(); }
  get nowMs() { return this.now.getTime(); }

  /** find loads a task (null when absent). */
  async find(id: string): Promise<Loaded | null> {
    if (this.loaded.has(id)) return this.loaded.get(id)!;
    return this.adopt((await this.store.load({ taskId: id }))!);
  }

  /**
   * findByRun loads the task of a run (undefined when the run does not exist, null when its task does not), in the
   * same one read: a lease route names only the run. `known` is the task as read before (the claim's answer), taken
   * instead of a read: the commit checks its revision, so a task changed since makes the whole step rerun.
   */
  async findByRun(runId: string, known?: TaskSnapshot): Promise<Loaded | null | undefined> {
    for (const l of this.loaded.values()) if (l?.runs.has(runId)) return l;
    const snap = known ?? await this.store.load({ runId });
    if (!snap) return undefined;
    return this.loaded.has(snap.taskId) ? this.loaded.get(snap.taskId)! : this.adopt(snap);
  }

  private adopt(snap: TaskSnapshot): Loaded | null {
    const id = snap.taskId;
    if (!snap.fields) {
      this.loaded.set(id, null);
      this.extra.checks.push([id, snap.rev]);
      return null;
    }
    const task = taskFrom(snap.fields);
    const runs = new Map<string, TaskRun>();
    const storedRuns = new Map<string, Record<string, string>>();
    for (const h of snap.runs) {
      runs.set(h.id, runFrom(h));
      storedRuns.set(h.id, h);
    }
    const l: Loaded = { task, rev: snap.rev, runs, stored: { task: snap.fields, runs: storedRuns }, status0: task.status, dirty: false, dependents: snap.dependents };
    this.loaded.set(id, l);
    return l;
  }

  async load(id: string): Promise<Loaded> {
    const l = await this.find(id);
    if (!l) throw new NotFoundError(`task "${id}" not found`, 'task_not_found', { task_id: id });
    return l;
  }

  /** add stores a new task in this transaction (its id must not exist: revision 0). */
  add(task: Task): Loaded {
    const l: Loaded = { task, rev: 0, runs: new Map(), status0: '', dirty: true };
    this.loaded.set(task.id, l);
    this.newTasks.add(task.id);
    return l;
  }

  touch(l: Loaded) { l.dirty = true; l.task.updated_at = this.nowIso; }

  emit(type: string, t: Task, run?: TaskRun, data: Record<string, unknown> = {}, outcome: BusEventInput['outcome'] = 'info') {
    t.latest_event_seq = (t.latest_event_seq || 0) + 1;
    this.events.push(...withHookEvent({
      type, source: 'tasks', workspace_id: t.workspace_id || undefined, session_id: run?.session_id || undefined, agent_name: run?.agent_name || undefined, outcome,
      summary: `${type} ${t.id}${run ? ` run ${run.id}` : ''}`,
      data: { task_id: t.id, ...(run ? { run_id: run.id, run_status: run.status, attempt: run.attempt } : {}), task_status: t.status, ...data },
    }));
  }

  /** blocked says whether a task is runnable-blocked: an unresolved dependency, or manual approval not approved. */
  async blocked(t: Task): Promise<boolean> {
    if (t.approval_policy === 'manual' && t.approval_state !== 'approved') return true;
    for (const dep of t.depends_on ?? []) {
      const d = await this.find(dep);
      if (d && d.task.status !== 'completed') return true;
    }
    return false;
  }

  /** reconcile recomputes the status of every touched task, then of the dependents of those whose status moved. */
  async reconcile(): Promise<void> {
    const done = new Set<string>();
    for (let round = 0; round < 16; round++) {
      let moved = false;
      for (const [id, l] of [...this.loaded]) {
        if (!l || !l.dirty || done.has(id)) continue;
        done.add(id);
        const t = l.task;
        const prev = t.status;
        if (t.status === 'pending') t.status = 'ready';
        t.status = deriveStatus({ current: t.status, runs: [...l.runs.values()], max_attempts: t.max_attempts, blocked: await this.blocked(t) });
        if (t.status !== l.status0) {
          if (t.status === 'ready') this.wakes.add(queueScope(t));
          for (const dep of l.dependents ?? await this.store.members(this.store.keys.dependents(id))) {
            const d = await this.find(dep);
            if (d && !done.has(dep)) { d.dirty = true; moved = true; }
          }
        }
        if (prev !== t.status) l.dirty = true;
      }
      if (!moved) break;
    }
  }

  /** plan builds the commit: every loaded task is checked; dirty tasks and changed runs are written. */
  plan(): CommitPlan {
    const k = this.store.keys;
    const p: CommitPlan = { open: this.extra.open, checks: [...this.extra.checks], absent: [...this.extra.absent!], hset: [], set: [...this.extra.set!], zadd: [], zrem: [], sadd: [...this.extra.sadd!], srem: [...this.extra.srem!], del: [...this.extra.del!], delif: [], enqueue: [] };
    for (const [id, l] of this.loaded) {
      if (!l) continue;
      p.checks.push([id, l.rev]);
      if (!l.dirty) continue;
      const t = l.task;
      const scope = queueScope(t);
      const taskChanges = changedFields(taskFields(t), l.stored?.task);
      if (taskChanges.length) p.hset!.push([k.task(id), taskChanges]);
      if (this.newTasks.has(id)) p.zadd!.push([k.tasks, Date.parse(t.created_at), id]);
      for (const r of l.runs.values()) {
        // NOTE: the run's hash as read: its status and session_id are stored as they are (plain strings).
        const b = l.stored?.runs.get(r.id);
        const runChanges = changedFields(runFields(r), b);
        if (runChanges.length) p.hset!.push([k.run(r.id), runChanges]);
        if (!b) {
          p.zadd!.push([k.runs(id), r.queued_ms, r.id]);
          p.enqueue!.push([id, r.id, r.attempt, t.max_attempts]);
        }
        if (r.status === 'queued') {
          // NOTE: re-added on every write of the task, so a priority change re-orders its queued runs.
          p.zadd!.push([k.queue(scope), queueScore(t.priority, r.queued_ms), r.id]);
          p.sadd!.push([k.queues, scope]);
          if (!b || b.status !== 'queued') this.wakes.add(scope);
        } else if (b?.status === 'queued') p.zrem!.push([k.queue(scope), r.id]);
        if (LEASED.includes(r.status)) {
          p.zadd!.push([k.leases, r.lease_until_ms, r.id]);
        } else if (b && LEASED.includes(b.status as RunStatus)) {
          p.zrem!.push([k.leases, r.id]);
          if (b.session_id) p.delif!.push([k.sessionLease(b.session_id), r.id]);
        }
      }
    }
    return p;
  }
}

/**
 * changedFields keeps the (field, value) pairs of `fields` that differ from the hash as read (all of them for a
 * record not read: a new task or run). NOTE: the commit checks the task's revision, so the hash is still as read
 * when the pairs are written; a claim and a completion change a few of a record's thirty fields, and writing the
 * rest again cost the commit script a third of its time.
 */
function changedFields(fields: string[], stored: Record<string, string> | undefined): string[] {
  if (!stored) return fields;
  const out: string[] = [];
  for (let i = 0; i < fields.length; i += 2) if (stored[fields[i]] !== fields[i + 1]) out.push(fields[i], fields[i + 1]);
  return out;
}
