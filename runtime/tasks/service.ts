import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Gate } from '../hooks/gate.ts';
import { existsSync } from 'node:fs';
import type { Logger } from 'pino';
import type { EventBus } from '../../store/event-bus.ts';
import { ConflictError, ForbiddenError, InputError, NotFoundError, PayloadTooLargeError, ServiceError, UnavailableError, ValidationError } from '../../store/errors.ts';
import type { ClaimArgs, ClaimOutcome, TaskSnapshot, TaskStore } from '../../store/task-store.ts';
import { GoneError, Input, TooManyRequestsError } from './input.ts';
import { identity, leaseView, maxScoreFor, queueScope, runFrom, runView, taskFrom } from './records.ts';
import { Tx, withHookEvent, type Loaded } from './tx.ts';
import { IDENTITY_KINDS, LEASED, LIMITS, LIVE, TASK_STATUSES, PRIORITY_RANK, TERMINAL_RUN, type Identity, type Priority, type Task, type TaskRun } from './types.ts';
import type { ChannelSignals } from '../../store/channel-signals.ts';

/** Caller is an agent session calling the agent routes. */
export interface Caller { session_id: string; workspace_id: string; agent_name: string }

/**
 * Actor is whoever calls an operator route (the authenticated principal's name, or `anonymous`; kind `human`) or
 * creates a task for the service (an automation job: kind `automation`, name the job id); it is a task's created_by.
 */
export interface Actor { name: string; kind?: string }


/** SessionInfo is what attach-session needs of a session (the session store's record). */
export interface SessionInfo { id: string; state?: string; workspace_id?: string; agent_name?: string }

/** TaskDeps are the task family's links to other families, given by the composition root (all optional in tests). */
export interface TaskDeps {
  /** the `task.run.pre_claim` gate: a deny refuses the claim with 403 hook_denied, nothing changed */
  gate?: Gate;
  /** whether any hook is bound to an event; claim-next skips the peek and the gate when none is (no pre_claim event then) */
  gateBound?: (event: string) => Promise<boolean>;
  /**
   * a workspace by id, name or path (undefined: none): a task names an existing one (422 otherwise), the list
   * filter finds by any of the three, and a workspace whose root is gone gives 410 on claims
   */
  workspace?: (ref: string) => Promise<{ id: string; root_dir: string } | undefined>;
  /** a session by id (undefined: none), for attach-session */
  session?: (sessionId: string) => Promise<SessionInfo | undefined>;
}

const ORIGIN = identity('http', 'api');
/** The create fields that cannot change after create: PATCH refuses them with 400 immutable_field. */
const IMMUTABLE = ['scope', 'workspace', 'workspace_id', 'parent_task_id', 'created_by', 'origin', 'id'];
/** The fields PATCH changes; any other is refused with 422 naming it. */
const PATCHABLE = ['title', 'description', 'priority', 'max_attempts', 'auto_enqueue_on_ready', 'approval_policy', 'metadata', 'network_channel', 'owner', 'clear_owner'];
/** TASK_CREATE_FIELDS are the fields of a task create body. */
export const TASK_CREATE_FIELDS = [
  'id', 'identifier', 'title', 'description', 'scope', 'workspace', 'workspace_id', 'priority', 'approval_policy', 'draft', 'auto_enqueue_on_ready',
  'max_attempts', 'metadata', 'network_channel', 'owner', 'required_capabilities', 'preferred_capabilities',
];
/** TASK_PATCH_FIELDS are what a PATCH body may name: the patchable fields, and those it refuses with why (immutable, status). */
export const TASK_PATCH_FIELDS = [...PATCHABLE, ...IMMUTABLE, 'status'];
/** SCHEDULER_FIELDS are the fields of a scheduler pause, resume or drain body. */
export const SCHEDULER_FIELDS = ['reason'];
const SCAN_LIMIT = 500;
/** How long a long-polling claim sleeps at most between attempts: a wake lost to a reconnect costs no more. */
const CLAIM_RECHECK_MS = 5_000;
/** The claimed tasks kept for their lease's next write (TaskService.claimed) hold at most this much text (~8 MB). */
const CLAIMED_CHARS = 8_000_000;

/** leaseExpired is the 409 of a run whose lease deadline has passed. */
const leaseExpired = (runId: string) => new ConflictError(`the lease of run "${runId}" has expired`, 'lease_expired', { run_id: runId });
/** runActive is the 409 of a task that already has a live run (one task, one live run: README "Tasks"). */
const runActive = (taskId: string, runId: string, status: string) => new ConflictError(
  `task "${taskId}" already has a live run "${runId}" (${status}): let it end, or cancel it, before starting another`, 'run_active', { task_id: taskId, run_id: runId, run_status: status });
/** attemptsExhausted is the 409 of a run past its task's max_attempts. */
const attemptsExhausted = (taskId: string, attempt: number, max: number) => new ConflictError(
  `task "${taskId}" has used all ${max} of its attempts (max_attempts); raise max_attempts (at most ${LIMITS.maxAttempts}) to run it again`, 'attempts_exhausted', { task_id: taskId, attempt, max_attempts: max });
/** nextAttempt is the attempt number of a task's next run: one more than any it has had. */
const nextAttempt = (l: Loaded) => Math.max(0, ...[...l.runs.values()].map((r) => r.attempt)) + 1;
/** leaseMsOf is a run's lease length: its own, else the default. */
const leaseMsOf = (r: TaskRun) => r.lease_ms || LIMITS.leaseDefaultS * 1000;

/** snapshotChars is the length of a task snapshot's text: its fields' names and values, its runs' and dependents'. */
function snapshotChars(s: TaskSnapshot): number {
  let n = 0;
  for (const h of [s.fields ?? {}, ...s.runs]) for (const k in h) n += k.length + h[k].length;
  for (const d of s.dependents) n += d.length;
  return n;
}

const newId = (p: string) => `${p}_${Date.now().toString(36)}${randomBytes(6).toString('hex')}`;
/**
 * newClaimTokenHash is a new lease's `claim_token_hash`: the hash of a random claim token, which no response shows.
 * NOTE: randomUUID draws from a cached batch of random bytes; randomBytes asked the system each time (~12 µs here).
 */
const newClaimTokenHash = () => `sha256:${createHash('sha256').update(`svc_claim_${randomUUID()}`).digest('hex')}`;

/**
 * TaskService is the task family's domain logic: tasks and their
 * dependencies, runs and leases, operator force operations and the scheduler. Every write is one optimistic
 * transaction (Tx) committed by one script; the claim is one atomic script over the queues (store/task-store.ts).
 */
export class TaskService {
  constructor(private readonly o: { store: TaskStore; bus?: EventBus; logger?: Logger; claimWakes?: ChannelSignals } & TaskDeps) {}

  get store() { return this.o.store; }

  /** mutate runs `fn` in a transaction and commits it, rerunning the whole step when a task it read changed. */
  async mutate<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const tx = new Tx(this.o.store);
      const out = await fn(tx);
      await tx.reconcile();
      const r = await this.o.store.commit(tx.plan());
      if (r.kind === 'ok') {
        await this.after(tx);
        return out;
      }
      if (r.kind === 'paused') throw new ConflictError('the scheduler is paused or draining: no run can be claimed', 'scheduler_paused');
      if (r.kind === 'live') throw runActive(r.taskId, r.runId, r.status);
      if (r.kind === 'attempts') throw attemptsExhausted(r.taskId, r.attempt, r.maxAttempts);
      if (r.kind === 'attempt_taken') throw new ConflictError(`attempt ${r.attempt} of task "${r.taskId}" is taken by run "${r.runId}"`, 'attempt_taken', { task_id: r.taskId, attempt: r.attempt, run_id: r.runId });
      if (attempt > 200) throw new UnavailableError('the task store is too contended; retry', 'contended');
      await new Promise((res) => setTimeout(res, Math.random() * Math.min(50, attempt * 2)));
    }
  }

  /** after wakes waiting claimers first (their latency is the long-poll's), then publishes the events. */
  private async after(tx: Tx) {
    const wake = tx.wakes.size ? this.o.store.wake([...tx.wakes]) : undefined;
    if (tx.events.length && this.o.bus) await this.o.bus.publishMany(tx.events).catch((err) => this.o.logger?.warn({ err: (err as Error).message }, 'task events not published'));
    await wake;
  }

  // ── tasks ───────────────────────────────────────────────────────────────────────────────────────────────────

  /** create makes a task (optionally a child of `parentId`): `draft` with draft:true, else pending → ready/blocked. */
  async create(body: unknown, actor: Actor, parentId?: string, origin: Identity = ORIGIN): Promise<Task> {
    const i = new Input(body);
    const scope = i.oneOf('scope', ['global', 'workspace'] as const);
    const wsField = i.has('workspace') ? 'workspace' : 'workspace_id';
    const wsRef = i.str(wsField, { max: 200 });
    if (scope === 'workspace' && !wsRef) i.fail('workspace', 'is required for workspace scope', 'required');
    if (scope === 'global' && wsRef) i.fail(wsField, 'must be empty for global scope');
    const title = i.str('title', { required: true, max: 500 });
    const id = i.str('id', { max: 128 }) || newId('task');
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(id)) i.fail('id', 'must match [A-Za-z0-9][A-Za-z0-9_.-]*');
    const draft = i.bool('draft');
    const autoEnqueue = i.bool('auto_enqueue_on_ready');
    const now = new Date().toISOString();
    const task: Task = {
      id, identifier: i.str('identifier', { max: 200 }) || id, title, description: i.str('description', { max: 20_000 }), scope, workspace_id: '',
      parent_task_id: parentId ?? '', priority: i.oneOf('priority', Object.keys(PRIORITY_RANK) as Priority[], 'medium'),
      status: draft ? 'draft' : 'pending', max_attempts: i.int('max_attempts', { min: 1, max: LIMITS.maxAttempts, def: LIMITS.maxAttemptsDefault })!,
      auto_enqueue_on_ready: autoEnqueue, approval_policy: i.oneOf('approval_policy', ['none', 'manual'] as const, 'none'), approval_state: 'not_required',
      paused: false, paused_reason: '', network_channel: i.str('network_channel', { max: 200 }), owner: i.identity('owner', IDENTITY_KINDS) ?? null,
      created_by: identity(actor.kind ?? 'human', actor.name), origin, metadata: i.obj('metadata', LIMITS.metadataBytes) ?? {},
      required_capabilities: i.strings('required_capabilities'), preferred_capabilities: i.strings('preferred_capabilities'), depends_on: [],
      depth: 0, latest_event_seq: 0, created_at: now, updated_at: now,
    };
    if (task.approval_policy === 'manual') task.approval_state = 'pending';
    // NOTE: a task in a workspace that does not exist could never be claimed; it is refused, not stored.
    const workspace = wsRef ? await this.resolveWorkspace(wsField, wsRef) : '';
    task.workspace_id = workspace;
    return this.mutate(async (tx) => {
      if (await tx.find(id)) throw new ConflictError(`task "${id}" already exists`, 'task_exists', { id });
      if (parentId) {
        const p = await tx.load(parentId);
        if (p.task.depth + 1 >= LIMITS.depth) throw new ValidationError(`the task hierarchy is at most ${LIMITS.depth} deep`, 'hierarchy_too_deep', { parent_task_id: parentId });
        const kids = await tx.store.members(tx.store.keys.children(parentId));
        if (kids.length >= LIMITS.children) throw new ValidationError(`a task has at most ${LIMITS.children} children`, 'too_many_children', { parent_task_id: parentId });
        if (p.task.scope !== scope || p.task.workspace_id !== workspace) throw new ValidationError('a child task has its parent\'s scope and workspace', 'scope_mismatch', { scope });
        task.depth = p.task.depth + 1;
        tx.extra.sadd!.push([tx.store.keys.children(parentId), id]);
        tx.emit('task.child_created', p.task, undefined, { child_task_id: id });
        tx.touch(p);
      }
      const l = tx.add({ ...task });
      // NOTE: created first: a task's events are numbered (latest_event_seq) and read in the bus's order.
      tx.emit('task.created', l.task);
      if (!draft && autoEnqueue) this.enqueue(tx, l, { origin });
      return l.task;
    }).then((t) => this.view(t.id));
  }

  /** view is a task with effective_paused and paused_by_task_id (a paused ancestor). */
  async view(id: string): Promise<Task & { effective_paused: boolean; paused_by_task_id: string }> {
    const [{ fields }] = await this.o.store.readTasks([id]);
    if (!fields) throw new NotFoundError(`task "${id}" not found`, 'task_not_found', { task_id: id });
    const t = taskFrom(fields);
    let by = t.paused ? t.id : '';
    for (let p = t.parent_task_id, n = 0; !by && p && n < 16; n++) {
      const [{ fields: pf }] = await this.o.store.readTasks([p]);
      if (!pf) break;
      if (pf.paused === '1') by = p;
      p = pf.parent_task_id;
    }
    return { ...t, effective_paused: !!by, paused_by_task_id: by };
  }

  /** resolveWorkspace is the id of the workspace `ref` names (id, name or path); none is a 422 naming `field`. */
  private async resolveWorkspace(field: string, ref: string): Promise<string> {
    if (!this.o.workspace) return ref;
    const ws = await this.o.workspace(ref);
    if (!ws) throw new ValidationError(`${field} "${ref}" names no workspace (by id, name or path)`, 'workspace_not_found', { [field]: 'names no workspace (by id, name or path)' });
    return ws.id;
  }

  /**
   * list pages through tasks, newest-created last. Filters: `status` (one of the task statuses), `workspace` (id,
   * name or path), `owner` (ref or kind:ref); an unknown status or workspace is a 422 naming the parameter.
   */
  async list(q: { status?: string; workspace?: string; owner?: string; limit?: number; cursor?: string }) {
    if (q.status && !(TASK_STATUSES as readonly string[]).includes(q.status)) throw new ValidationError(`status must be one of ${TASK_STATUSES.join(', ')}`, 'invalid_query', { status: `must be one of ${TASK_STATUSES.join(', ')}` });
    const workspace = q.workspace ? await this.resolveWorkspace('workspace', q.workspace) : '';
    const limit = q.limit ?? 50;
    let offset = q.cursor ? Number(Buffer.from(q.cursor, 'base64url').toString()) : 0;
    if (!Number.isInteger(offset) || offset < 0) throw new ValidationError('cursor is not valid', 'invalid_cursor', { cursor: 'is not a cursor this service returned' });
    const out: Task[] = [];
    for (;;) {
      const ids = await this.o.store.listTaskIds(offset, 200);
      if (!ids.length) return { tasks: out, next_cursor: '' };
      const rows = await this.o.store.readTasks(ids);
      for (let n = 0; n < rows.length; n++) {
        offset++;
        const f = rows[n].fields;
        if (!f) continue;
        const t = taskFrom(f);
        if (q.status && t.status !== q.status) continue;
        if (workspace && t.workspace_id !== workspace) continue;
        if (q.owner && t.owner?.ref !== q.owner && `${t.owner?.kind}:${t.owner?.ref}` !== q.owner) continue;
        out.push(t);
        if (out.length === limit) return { tasks: out, next_cursor: Buffer.from(String(offset)).toString('base64url') };
      }
    }
  }

  async patch(id: string, body: unknown): Promise<Task> {
    const i = new Input(body);
    for (const f of IMMUTABLE) if (i.has(f)) i.fail(f, 'cannot change after create', 'immutable_field');
    // NOTE: a field PATCH would ignore (`status`, a typo) is refused, so a caller never reads 200 for a change that did
    // not happen; as the workspace PATCH does (422 naming each). The status follows the runs.
    const other = Object.keys(i.body).filter((k) => !PATCHABLE.includes(k));
    if (other.length) {
      const why = (k: string) => (k === 'status' ? 'cannot be set: it follows the task\'s runs, approval and dependencies (start, cancel, approve, reject)' : `is not a field PATCH changes (${PATCHABLE.join(', ')})`);
      throw new ValidationError(`cannot patch ${other.join(', ')}`, 'invalid_field', Object.fromEntries(other.map((k) => [k, why(k)])));
    }
    const patch: Partial<Task> = {};
    if (i.has('title')) patch.title = i.str('title', { required: true, max: 500 });
    if (i.has('description')) patch.description = i.str('description', { max: 20_000 });
    if (i.has('priority')) patch.priority = i.oneOf('priority', Object.keys(PRIORITY_RANK) as Priority[]);
    if (i.has('max_attempts')) patch.max_attempts = i.int('max_attempts', { min: 1, max: LIMITS.maxAttempts });
    if (i.has('auto_enqueue_on_ready')) patch.auto_enqueue_on_ready = i.bool('auto_enqueue_on_ready');
    if (i.has('approval_policy')) patch.approval_policy = i.oneOf('approval_policy', ['none', 'manual'] as const);
    if (i.has('metadata')) patch.metadata = i.obj('metadata', LIMITS.metadataBytes) ?? {};
    if (i.has('network_channel')) patch.network_channel = i.str('network_channel', { max: 200 });
    if (i.has('owner')) patch.owner = i.identity('owner', IDENTITY_KINDS) ?? null;
    if (i.bool('clear_owner')) patch.owner = null;
    await this.mutate(async (tx) => {
      const l = await tx.load(id);
      Object.assign(l.task, patch);
      if (patch.approval_policy === 'manual' && l.task.approval_state === 'not_required') l.task.approval_state = 'pending';
      if (patch.approval_policy === 'none') l.task.approval_state = 'not_required';
      tx.touch(l);
      tx.emit('task.updated', l.task, undefined, { fields: Object.keys(patch) });
    });
    return this.view(id);
  }

  private newRun(tx: Tx, l: Loaded, o: { idempotency_key?: string; network_channel?: string; metadata?: Record<string, unknown>; previous?: TaskRun; origin?: Identity }): TaskRun {
    return {
      id: newId('run'), task_id: l.task.id, status: 'queued', attempt: nextAttempt(l),
      queued_at: tx.nowIso, queued_ms: tx.nowMs, claimed_at: '', started_at: '', ended_at: '', heartbeat_at: '', lease_until_ms: 0, lease_ms: 0,
      session_id: '', claimed_by: null, claim_token_hash: '', idempotency_key: o.idempotency_key ?? '', network_channel: o.network_channel ?? l.task.network_channel,
      origin: o.origin ?? ORIGIN, previous_run_id: o.previous?.id ?? '', error: '', failure_kind: '', metadata: o.metadata ?? {}, result: null,
    };
  }

  /**
   * enqueueRefusal says why a task cannot have a new run now (undefined: it can): it has a live run, or its
   * attempts are used up. NOTE: checked on the state read (a clear error before anything else happens) and
   * enforced again by the commit script on the state as committed, so replicas starting one task at once still
   * leave one live run.
   */
  private enqueueRefusal(l: Loaded): ConflictError | undefined {
    const live = [...l.runs.values()].find((r) => LIVE.includes(r.status));
    if (live) return runActive(l.task.id, live.id, live.status);
    const attempt = nextAttempt(l);
    if (attempt > l.task.max_attempts) return attemptsExhausted(l.task.id, attempt, l.task.max_attempts);
    return undefined;
  }

  private enqueue(tx: Tx, l: Loaded, o: Parameters<TaskService['newRun']>[2]): TaskRun {
    const why = this.enqueueRefusal(l);
    if (why) throw why;
    const r = this.newRun(tx, l, o);
    l.runs.set(r.id, r);
    tx.touch(l);
    tx.emit('task.run_enqueued', l.task, r);
    return r;
  }

  /**
   * runOp is publish/start/approve/runs: an idempotency key returns the first result; publish only from draft;
   * approve only for manual approval; start and runs enqueue a run unless the task is terminal or canceled.
   */
  async runOp(id: string, op: 'publish' | 'start' | 'approve' | 'runs', body: unknown): Promise<{ task: Task; run: Record<string, unknown> | null }> {
    const i = new Input(body);
    const key = i.str('idempotency_key', { max: 200 });
    const channel = i.has('network_channel') ? i.str('network_channel', { max: 200 }) : undefined;
    const metadata = i.obj('metadata', LIMITS.metadataBytes);
    const idemKey = key ? this.o.store.keys.idem(`${id}:${op}`, key) : '';
    const runId = await this.mutate(async (tx) => {
      const l = await tx.load(id);
      if (idemKey) {
        const prior = await tx.store.get(idemKey);
        if (prior !== null) return prior;
        tx.extra.absent!.push(idemKey);
      }
      const t = l.task;
      if (t.status === 'canceled') throw new ConflictError(`task "${id}" is canceled`, 'invalid_transition', { status: t.status });
      if (op === 'publish') {
        if (t.status !== 'draft') throw new ConflictError(`only a draft task can be published (it is ${t.status})`, 'invalid_transition', { status: t.status });
        t.status = 'pending';
      } else if (t.status === 'draft') throw new ConflictError(`task "${id}" is a draft: publish it first`, 'invalid_transition', { status: t.status });
      if (op === 'approve') {
        // NOTE: an approval decision is made once, from `pending` (as reject): a rejected task stays rejected.
        if (t.approval_policy !== 'manual' || t.approval_state !== 'pending') throw new ConflictError(`task "${id}" is not awaiting approval (approval_state ${t.approval_state})`, 'invalid_transition', { approval_state: t.approval_state });
        t.approval_state = 'approved';
        tx.emit('task.approved', t);
      }
      if (op === 'publish') tx.emit('task.published', t);
      tx.touch(l);
      const open = [...l.runs.values()].find((r) => LIVE.includes(r.status));
      const run = op === 'approve' && open ? open : this.enqueue(tx, l, { idempotency_key: key, network_channel: channel, metadata });
      if (idemKey) tx.extra.set!.push([idemKey, run.id, 86_400]);
      return run.id;
    });
    const [h] = await this.o.store.readRuns([runId]);
    return { task: await this.view(id), run: h ? runView(runFrom(h)) : null };
  }

  /**
   * cancel cancels a task and every descendant that has not finished (completed, failed and canceled ones are
   * left as they are), each with its unfinished runs, in one commit: a child of a canceled task would otherwise
   * stay `ready` and be claimed for work nobody wants. A descendant's `task.canceled` carries
   * `propagated_from_task_id`.
   */
  async cancel(id: string, body: unknown): Promise<Task> {
    const i = new Input(body);
    const reason = i.str('reason', { max: 2000 });
    await this.mutate(async (tx) => {
      const root = await tx.load(id);
      this.cancelOne(tx, root, { reason });
      // NOTE: the children sets are read in the transaction; a child created meanwhile touches its parent, whose
      // revision this commit checks, so the walk reruns rather than miss it.
      const seen = new Set([id]);
      for (let frontier = [id], depth = 0; frontier.length && depth < LIMITS.depth; depth++) {
        const next: string[] = [];
        for (const parent of frontier) {
          for (const kid of await tx.store.members(tx.store.keys.children(parent))) {
            if (seen.has(kid)) continue;
            seen.add(kid);
            const l = await tx.find(kid);
            if (!l) continue;
            if (!['completed', 'failed', 'canceled'].includes(l.task.status)) this.cancelOne(tx, l, { reason, propagated_from_task_id: id });
            next.push(kid);
          }
        }
        frontier = next;
      }
    });
    return this.view(id);
  }

  /** cancelOne cancels one task and its unfinished runs (nothing when it is already canceled). */
  private cancelOne(tx: Tx, l: Loaded, data: { reason: string; propagated_from_task_id?: string }) {
    if (l.task.status === 'canceled') return;
    for (const r of l.runs.values()) {
      if (TERMINAL_RUN.includes(r.status)) continue;
      this.endRun(tx, r, 'canceled', { error: data.reason });
      tx.emit('task.run_canceled', l.task, r, data);
    }
    l.task.status = 'canceled';
    tx.touch(l);
    tx.emit('task.canceled', l.task, undefined, data);
  }

  async reject(id: string): Promise<Task> {
    await this.mutate(async (tx) => {
      const l = await tx.load(id);
      if (l.task.approval_policy !== 'manual' || l.task.approval_state !== 'pending') throw new ConflictError(`task "${id}" is not awaiting approval`, 'invalid_transition', { approval_state: l.task.approval_state });
      l.task.approval_state = 'rejected';
      for (const r of l.runs.values()) if (r.status === 'queued') this.endRun(tx, r, 'canceled', { error: 'approval rejected' });
      tx.touch(l);
      tx.emit('task.rejected', l.task);
    });
    return this.view(id);
  }

  async pause(id: string, body: unknown, resume: boolean): Promise<Task> {
    const i = new Input(body);
    const reason = resume ? '' : i.str('reason', { required: true, max: 2000 });
    await this.mutate(async (tx) => {
      const l = await tx.load(id);
      if (l.task.paused === !resume) return;
      l.task.paused = !resume;
      l.task.paused_reason = reason;
      tx.touch(l);
      if (resume) tx.wakes.add(queueScope(l.task));
      tx.emit(resume ? 'task.resumed' : 'task.paused', l.task, undefined, reason ? { reason } : {});
    });
    return this.view(id);
  }

  /** addDependency makes `id` wait for `depends_on_task_id` to complete; a cycle is refused (422). */
  async addDependency(id: string, body: unknown): Promise<Task> {
    const i = new Input(body);
    const dep = i.str('depends_on_task_id', { required: true, max: 128 });
    i.oneOf('kind', ['blocks'] as const, 'blocks');
    if (dep === id) throw new ValidationError('a task cannot depend on itself', 'dependency_cycle', { depends_on_task_id: dep });
    await this.mutate(async (tx) => {
      const l = await tx.load(id);
      const d = await tx.find(dep);
      if (!d) throw new NotFoundError(`task "${dep}" not found`, 'task_not_found', { depends_on_task_id: dep });
      if (l.task.depends_on.includes(dep)) return;
      if (l.task.depends_on.length >= LIMITS.dependencies) throw new ValidationError(`a task has at most ${LIMITS.dependencies} dependencies`, 'too_many_dependencies', { depends_on_task_id: dep });
      // NOTE: a cycle exists if `id` is reachable from `dep` along depends_on edges.
      const seen = new Set<string>();
      const stack = [dep];
      while (stack.length) {
        const cur = stack.pop()!;
        if (cur === id) throw new ValidationError(`"${id}" depending on "${dep}" makes a cycle`, 'dependency_cycle', { depends_on_task_id: dep });
        if (seen.has(cur)) continue;
        seen.add(cur);
        const c = await tx.find(cur);
        if (c) stack.push(...c.task.depends_on);
      }
      l.task.depends_on = [...l.task.depends_on, dep].sort();
      tx.extra.sadd!.push([tx.store.keys.dependents(dep), id]);
      tx.touch(l);
      tx.emit('task.dependency_added', l.task, undefined, { depends_on_task_id: dep, kind: 'blocks' });
    });
    return this.view(id);
  }

  async runs(taskId: string): Promise<Record<string, unknown>[]> {
    await this.view(taskId);
    const rows = await this.o.store.readRuns(await this.o.store.runIdsOf(taskId));
    return rows.filter(Boolean).map((h) => runView(runFrom(h!)));
  }

  /**
   * leaseStarter is the agent session that started the run a session holds the lease of (the run's origin: the
   * session created its task with start, through svc__task_create), when another session did; else ''. The holder
   * works for that session, so its tools are held to that session's policy too (ToolRuntime).
   */
  async leaseStarter(sessionId: string): Promise<string> {
    const runId = await this.o.store.get(this.o.store.keys.sessionLease(sessionId));
    if (!runId) return '';
    const [h] = await this.o.store.readRuns([runId]);
    const r = h ? runFrom(h) : undefined;
    if (!r || r.session_id !== sessionId || !LEASED.includes(r.status)) return '';
    return r.origin?.kind === 'agent_session' && r.origin.ref && r.origin.ref !== sessionId ? r.origin.ref : '';
  }

  async run(runId: string): Promise<TaskRun> {
    const [h] = await this.o.store.readRuns([runId]);
    if (!h) throw new NotFoundError(`run "${runId}" not found`, 'run_not_found', { run_id: runId });
    return runFrom(h);
  }

  /** endRun moves a run to a terminal status and clears its lease. */
  private endRun(tx: Tx, r: TaskRun, status: 'completed' | 'failed' | 'canceled', o: { error?: string; failure_kind?: string; result?: unknown } = {}) {
    r.status = status;
    r.ended_at = tx.nowIso;
    r.lease_until_ms = 0;
    if (o.error !== undefined) r.error = o.error;
    if (o.failure_kind !== undefined) r.failure_kind = o.failure_kind;
    if (o.result !== undefined) r.result = o.result;
  }

  /** requeue puts a leased run back in its queue with every lease field cleared (release, recover, expiry). */
  private requeue(r: TaskRun) {
    Object.assign(r, { status: 'queued', claimed_at: '', started_at: '', ended_at: '', heartbeat_at: '', lease_until_ms: 0, lease_ms: 0, session_id: '', agent_name: '', claimed_by: null, claim_token_hash: '', error: '', result: null });
  }

  /** retryIfAllowed enqueues the retry of a failed run while attempts remain (the retry chain). */
  private retryIfAllowed(tx: Tx, l: Loaded, r: TaskRun) {
    if (nextAttempt(l) <= l.task.max_attempts && l.task.status !== 'canceled') this.enqueue(tx, l, { previous: r, network_channel: r.network_channel, metadata: r.metadata, origin: r.origin });
  }

  // ── agent leases ────────────────────────────────────────────────────────────────────────────────

  /**
   * claimNext claims the first eligible run for the caller in one atomic script; with wait:true it blocks on the
   * wake notifications (not a poll loop) until the deadline. undefined = nothing claimable (204).
   */
  async claimNext(caller: Caller, body: unknown, signal?: AbortSignal): Promise<Record<string, unknown> | undefined> {
    const i = new Input(body, ValidationError);
    let scope = 'global';
    if ('workspace_id' in i.body && (i.body.workspace_id === null || i.body.workspace_id === '')) scope = 'global';
    else {
      const ws = i.str('workspace_id', { max: 200 }) || caller.workspace_id;
      if (ws !== caller.workspace_id) throw new ForbiddenError('a session claims only in its own workspace', 'identity_unauthorized', { workspace_id: ws });
      scope = `ws:${ws}`;
    }
    const caps = i.strings('required_capabilities');
    const pmin = i.int('priority_min', { min: 0, max: 40 });
    const leaseS = i.int('lease_seconds', { min: 0, max: LIMITS.leaseMaxS, def: 0 })! || LIMITS.leaseDefaultS;
    const wait = i.bool('wait');
    const waitS = i.int('wait_seconds', { min: 1, max: 120, def: 30 })!;
    const idem = i.str('idempotency_key', { max: 200 });
    const channel = i.str('network_channel', { max: 200 });
    const args = {
      queue: this.o.store.keys.queue(scope), sessionId: caller.session_id, capabilities: caps, channel, maxScore: maxScoreFor(pmin),
      leaseMs: leaseS * 1000, tokenHash: newClaimTokenHash(),
      idemKey: idem ? this.o.store.keys.idem(`claim:${caller.session_id}`, idem) : '', claimedBy: JSON.stringify(identity('agent_session', caller.session_id)), scanLimit: SCAN_LIMIT,
      agentName: caller.agent_name, withRecords: true,
    };
    if (scope !== 'global') await this.assertRoot(caller.workspace_id);
    // NOTE: a long poll listens for wakes of its queue before its first attempt, so a run enqueued between a miss
    // and the wait still wakes it (every write that queues, unblocks or resumes publishes the queue's scope).
    const attempt = () => this.claimGated(args, caller);
    const out = wait && this.o.claimWakes
      ? await this.o.claimWakes.until(scope, attempt, (o) => o.kind === 'ok' || o.kind === 'idem' || o.kind === 'held', { timeoutMs: waitS * 1000, recheckMs: CLAIM_RECHECK_MS, pollMs: CLAIM_RECHECK_MS, signal })
      : await attempt();
    if (out.kind === 'held') throw new ConflictError('this session already holds an active lease; finish or release it first', 'active_lease_held', { run_id: out.runId });
    if (out.kind === 'ok' || out.kind === 'idem') return this.claimResult(out);
    return undefined;
  }

  /**
   * claimGated is one claim attempt. With a pre_claim gate it peeks the run the claim would take, asks the gate
   * (a deny: 403, nothing changed), then claims exactly that run; if another claimer took it meanwhile it peeks
   * again. Each step is the one claim script, so the check and the write of a claim stay one atomic step.
   */
  private async claimGated(args: Omit<ClaimArgs, 'nowMs'>, caller: Caller): Promise<ClaimOutcome> {
    // NOTE: with no binding on the event the gate would allow every claim; skipping it keeps claim-next one script
    // call (a peek makes concurrent claimers race for the same head run).
    if (!this.o.gate || (this.o.gateBound && !(await this.o.gateBound('task.run.pre_claim')))) return this.o.store.claim({ ...args, nowMs: Date.now() });
    for (let n = 0; n < 100; n++) {
      const peek = await this.o.store.claim({ ...args, nowMs: Date.now(), mode: 'peek' });
      if (peek.kind !== 'peek') return peek;
      const [h] = await this.o.store.readTasks([peek.taskId]);
      await this.preClaim({
        session_id: caller.session_id, agent_name: caller.agent_name, workspace_id: h.fields?.workspace_id || caller.workspace_id,
        task_id: peek.taskId, run_id: peek.runId, priority: h.fields?.priority ?? '', claimed_by: identity('agent_session', caller.session_id),
      });
      const out = await this.o.store.claim({ ...args, nowMs: Date.now(), target: peek.runId });
      if (out.kind !== 'none') return out;
    }
    return { kind: 'none' };
  }

  /** preClaim runs the `task.run.pre_claim` gate; a deny is 403 hook_denied naming the hook. */
  private async preClaim(p: { task_id: string; run_id: string; workspace_id?: string; session_id?: string; agent_name?: string } & Record<string, unknown>) {
    if (!this.o.gate) return;
    const v = await this.o.gate.gate('task.run.pre_claim', { ...p, autonomy: { task_id: p.task_id, run_id: p.run_id } });
    if (v.denied) throw new ForbiddenError(`task.run.pre_claim denied by hook ${v.hook}: ${v.reason}`, 'hook_denied', { event: 'task.run.pre_claim', hook: v.hook, reason: v.reason, run_id: p.run_id });
  }

  private readonly roots = new Map<string, { root: string | undefined; at: number }>();

  /** assertRoot refuses work in a workspace whose root directory is gone (410); the root path is cached 5 s. */
  private async assertRoot(workspaceId: string) {
    if (!this.o.workspace || !workspaceId) return;
    let c = this.roots.get(workspaceId);
    if (!c || Date.now() - c.at > 5000) this.roots.set(workspaceId, (c = { root: (await this.o.workspace(workspaceId))?.root_dir, at: Date.now() }));
    if (!c.root || !existsSync(c.root)) {
      this.roots.delete(workspaceId);
      throw new GoneError(`the root directory of workspace "${workspaceId}" is gone`, 'workspace_root_gone', { workspace_id: workspaceId });
    }
  }

  /**
   * The tasks of the runs this process claimed lately, as the claim left them (the claim script's answer), by run id:
   * the lease's next write (usually the completion, from the same agent on the same connection) starts from it
   * instead of reading the task again. Taken by that write; at most CLAIMED_CHARS of text, the oldest dropped.
   */
  private readonly claimed = new Map<string, { snap: TaskSnapshot; chars: number }>();
  private claimedChars = 0;

  private keepClaimed(runId: string, snap: TaskSnapshot) {
    const chars = snapshotChars(snap);
    // NOTE: a task over a hundredth of the budget (long results of earlier runs) is read again instead: kept, it
    // would push out a hundred others.
    if (chars > CLAIMED_CHARS / 100) return;
    this.claimed.set(runId, { snap, chars });
    this.claimedChars += chars;
    for (const [id, e] of this.claimed) {
      if (this.claimedChars <= CLAIMED_CHARS) break;
      this.claimed.delete(id);
      this.claimedChars -= e.chars;
    }
  }

  private takeClaimed(runId: string): TaskSnapshot | undefined {
    const e = this.claimed.get(runId);
    if (!e) return undefined;
    this.claimed.delete(runId);
    this.claimedChars -= e.chars;
    return e.snap;
  }

  private async claimResult(out: { kind: 'ok' | 'peek' | 'idem' | 'held'; runId: string; run?: Record<string, string>; task?: Record<string, string>; snapshot?: TaskSnapshot }) {
    const fresh = out.kind === 'ok';
    if (fresh && out.snapshot) this.keepClaimed(out.runId, out.snapshot);
    // NOTE: a fresh claim's script answered the run and task as it wrote them; the claim passed only if neither the
    // task nor an ancestor was paused, so the view's pause fields are known without walking the ancestors again.
    const [run, task] = fresh && out.run && out.task ? [runFrom(out.run), { ...taskFrom(out.task), effective_paused: false, paused_by_task_id: '' }]
      : await this.run(out.runId).then(async (r) => [r, await this.view(r.task_id)] as const);
    if (fresh) {
      const ev = { type: 'task.run_claimed', source: 'tasks', workspace_id: task.workspace_id || undefined, session_id: run.session_id, agent_name: run.agent_name || undefined, outcome: 'info' as const, summary: `task.run_claimed ${task.id} run ${run.id}`, data: { task_id: task.id, run_id: run.id, run_status: run.status, attempt: run.attempt, task_status: task.status } };
      await this.o.bus?.publishMany(withHookEvent(ev)).catch(() => undefined);
    }
    return { claim: { task, run: runView(run), lease: leaseView(run) } };
  }

  /** leased runs one lease mutation of the caller's own live lease (404 no run, 409 not leased by the caller or expired). */
  private async leased<T>(caller: Caller, runId: string, fn: (tx: Tx, l: Loaded, r: TaskRun) => T): Promise<Record<string, unknown>> {
    let out!: TaskRun;
    let known = this.takeClaimed(runId);
    await this.mutate(async (tx) => {
      // NOTE: the run, its task, the task's other runs and its dependents in one read (a lease route names the run);
      // none when the claim's answer has them (a rerun after a conflict reads them).
      const l = await tx.findByRun(runId, known);
      known = undefined;
      if (l === undefined) throw new NotFoundError(`run "${runId}" not found`, 'run_not_found', { run_id: runId });
      if (l === null) throw new NotFoundError(`the task of run "${runId}" not found`, 'task_not_found', { run_id: runId });
      const r = l.runs.get(runId);
      // NOTE: a run of another workspace's task answers as one that does not exist, so its id tells the caller nothing.
      const foreign = l.task.scope === 'workspace' && caller.workspace_id !== '' && l.task.workspace_id !== caller.workspace_id;
      if (!r || foreign) throw new NotFoundError(`run "${runId}" not found`, 'run_not_found', { run_id: runId });
      if (!LEASED.includes(r.status) || r.session_id !== caller.session_id) throw new ConflictError(`run "${runId}" is not leased by this session`, 'invalid_claim_token', { run_id: runId, status: r.status });
      if (r.lease_until_ms <= tx.nowMs) throw leaseExpired(runId);
      fn(tx, l, r);
      tx.touch(l);
      out = r;
    });
    return { lease: leaseView(out) };
  }

  heartbeat(caller: Caller, runId: string, body: unknown) {
    const i = new Input(body, ValidationError);
    const s = i.int('lease_seconds', { min: 0, max: LIMITS.leaseMaxS, def: 0 })!;
    return this.leased(caller, runId, (tx, l, r) => {
      const ms = s ? s * 1000 : leaseMsOf(r);
      r.heartbeat_at = tx.nowIso;
      r.lease_ms = ms;
      r.lease_until_ms = tx.nowMs + ms;
      tx.emit('task.run_lease_extended', l.task, r);
    });
  }

  complete(caller: Caller, runId: string, body: unknown) {
    const i = new Input(body, ValidationError);
    const result = i.body.result;
    if (result !== undefined && Buffer.byteLength(JSON.stringify(result)) > LIMITS.resultBytes) throw new PayloadTooLargeError(`result must be at most ${LIMITS.resultBytes} bytes`, 'result_too_large', { result: 'too large' });
    return this.leased(caller, runId, (tx, l, r) => {
      this.endRun(tx, r, 'completed', { result: result ?? null });
      tx.emit('task.run_completed', l.task, r, {}, 'success');
    });
  }

  fail(caller: Caller, runId: string, body: unknown) {
    const i = new Input(body, ValidationError);
    const error = i.str('error', { required: true, max: 8000 });
    const metadata = i.obj('metadata', LIMITS.metadataBytes);
    return this.leased(caller, runId, (tx, l, r) => {
      this.endRun(tx, r, 'failed', { error });
      if (metadata) r.metadata = { ...r.metadata, ...metadata };
      tx.emit('task.run_failed', l.task, r, { error }, 'failure');
      this.retryIfAllowed(tx, l, r);
    });
  }

  release(caller: Caller, runId: string, body: unknown) {
    const i = new Input(body, ValidationError);
    const reason = i.str('reason', { max: 2000 });
    return this.leased(caller, runId, (tx, l, r) => {
      this.requeue(r);
      tx.emit('task.run_released', l.task, r, reason ? { reason } : {});
    });
  }

  // ── operator run routes (/api/task-runs/{id}/*) ──────────────────────────────────────────────────

  /**
   * unclaimable says why a queued run cannot be claimed now (undefined: it can): the claim eligibility that
   * an operator's explicit pick keeps (task status, the task's or an ancestor's pause); capabilities, channel
   * and priority filters are the agent's. Ancestors are read in the transaction, so their pause is checked at commit.
   */
  private async unclaimable(tx: Tx, l: Loaded): Promise<string | undefined> {
    const t = l.task;
    if (['draft', 'blocked', 'canceled', 'pending'].includes(t.status)) return `task "${t.id}" is ${t.status}`;
    if (t.paused) return `task "${t.id}" is paused`;
    for (let p = t.parent_task_id, n = 0; p && n < 16; n++) {
      const a = await tx.find(p);
      if (!a) break;
      if (a.task.paused) return `ancestor task "${p}" is paused`;
      p = a.task.parent_task_id;
    }
    return undefined;
  }

  /**
   * runClaim is `claim` (queued → claimed, by the operator) and `start` (queued or claimed → starting). Taking a
   * queued run passes the `task.run.pre_claim` gate first and commits only if the run is still queued, its task
   * claimable and the scheduler open (the commit script checks all three: no read-then-write race). The lease
   * (default 5 min) expires like an agent's unless the run is started, attached or finished.
   */
  async runClaim(runId: string, op: 'claim' | 'start', body: unknown, actor: Actor): Promise<{ task: Task; run: Record<string, unknown> }> {
    const i = new Input(body);
    const key = i.str('idempotency_key', { max: 200 });
    const idemKey = key ? this.o.store.keys.idem(`run:${runId}:${op}`, key) : '';
    if (idemKey && (await this.o.store.get(idemKey)) !== null) return this.runResult(runId);
    const first = await this.run(runId);
    const task0 = await this.view(first.task_id);
    const allowed = op === 'claim' ? ['queued'] : ['queued', 'claimed'];
    const refuse = (r: TaskRun) => new ConflictError(`run "${runId}" is ${r.status}: ${op} needs ${allowed.join(' or ')}`, 'invalid_transition', { run_id: runId, status: r.status });
    if (!allowed.includes(first.status)) throw refuse(first);
    if (first.status === 'claimed' && first.lease_until_ms <= Date.now()) throw leaseExpired(runId);
    if (task0.scope === 'workspace') await this.assertRoot(task0.workspace_id);
    const sched = await this.o.store.scheduler();
    if (first.status === 'queued' && (sched.paused === '1' || sched.draining === '1')) throw new ConflictError('the scheduler is paused or draining: no run can be claimed', 'scheduler_paused');
    if (first.status === 'queued') {
      // NOTE: checked before the gate (a hook never judges a claim that would be refused), and again at commit.
      const pre = new Tx(this.o.store);
      const why = await this.unclaimable(pre, await pre.load(first.task_id));
      if (why) throw new ConflictError(`run "${runId}" cannot be claimed: ${why}`, 'not_claimable', { run_id: runId });
      await this.preClaim({ task_id: task0.id, run_id: runId, workspace_id: task0.workspace_id, actor: actor.name, claimed_by: identity('human', actor.name) });
    }
    await this.mutate(async (tx) => {
      const l = await tx.load(first.task_id);
      const r = l.runs.get(runId);
      if (!r) throw new NotFoundError(`run "${runId}" not found`, 'run_not_found', { run_id: runId });
      if (idemKey) {
        if ((await tx.store.get(idemKey)) !== null) return;
        tx.extra.absent!.push(idemKey);
        tx.extra.set!.push([idemKey, runId, 86_400]);
      }
      // NOTE: the state the gate judged must still hold; otherwise the request is refused, not redone.
      if (r.status !== first.status) throw refuse(r);
      if (r.status === 'queued') {
        const why = await this.unclaimable(tx, l);
        if (why) throw new ConflictError(`run "${runId}" cannot be claimed: ${why}`, 'not_claimable', { run_id: runId });
        const ms = LIMITS.leaseDefaultS * 1000;
        Object.assign(r, {
          status: 'claimed', claimed_at: tx.nowIso, heartbeat_at: tx.nowIso, session_id: '', claimed_by: identity('human', actor.name),
          claim_token_hash: newClaimTokenHash(),
          lease_ms: ms, lease_until_ms: tx.nowMs + ms,
        });
        tx.extra.open = true;
        tx.emit('task.run_claimed', l.task, r, { actor: actor.name });
      } else if (r.lease_until_ms <= tx.nowMs) throw leaseExpired(runId);
      if (op === 'start') {
        r.status = 'starting';
        r.lease_until_ms = tx.nowMs + leaseMsOf(r);
        tx.emit('task.run_starting', l.task, r, { actor: actor.name });
      }
      tx.touch(l);
    });
    return this.runResult(runId);
  }

  /** runResult is an operator run route's answer: the run as it is now and its task. */
  private async runResult(runId: string): Promise<{ task: Task; run: Record<string, unknown> }> {
    const r = await this.run(runId);
    return { task: await this.view(r.task_id), run: runView(r) };
  }

  /**
   * attachSession binds a session to an operator-claimed or starting run: run → running, the session now holds
   * the lease (it heartbeats and finishes through the agent routes). 409 attach_locked when a session is already
   * bound, 409 active_lease_held when the session holds another live lease, 400 when the session is of another
   * workspace than a workspace task, 410 when the workspace root is gone.
   */
  async attachSession(runId: string, body: unknown, actor: Actor): Promise<{ task: Task; run: Record<string, unknown> }> {
    const i = new Input(body);
    const sid = i.str('session_id', { required: true, max: 200 });
    const first = await this.run(runId);
    const s = this.o.session ? await this.o.session(sid) : { id: sid };
    if (!s) throw new NotFoundError(`session "${sid}" not found`, 'session_not_found', { session_id: sid });
    const task0 = await this.view(first.task_id);
    if (task0.scope === 'workspace' && s.workspace_id !== undefined && s.workspace_id !== task0.workspace_id) {
      throw new InputError(`session "${sid}" is not in the task's workspace "${task0.workspace_id}"`, 'scope_binding', { session_id: `is in workspace "${s.workspace_id}"` });
    }
    if (s.state !== undefined && s.state !== 'active') throw new ConflictError(`session "${sid}" is ${s.state}, not active`, 'session_not_active', { session_id: sid, state: s.state });
    const check = (r: TaskRun, nowMs: number) => {
      if (r.session_id) throw new ConflictError(`run "${runId}" is already bound to session "${r.session_id}"`, 'attach_locked', { run_id: runId, session_id: r.session_id });
      if (r.status !== 'claimed' && r.status !== 'starting') throw new ConflictError(`run "${runId}" is ${r.status}: attach needs claimed or starting`, 'invalid_transition', { run_id: runId, status: r.status });
      if (r.lease_until_ms <= nowMs) throw leaseExpired(runId);
    };
    check(first, Date.now());
    if (task0.scope === 'workspace') await this.assertRoot(task0.workspace_id);
    const pointer = this.o.store.keys.sessionLease(sid);
    await this.mutate(async (tx) => {
      const l = await tx.load(first.task_id);
      const r = l.runs.get(runId)!;
      check(r, tx.nowMs);
      const held = await tx.store.get(pointer);
      if (held && held !== runId) {
        const [h] = await tx.store.readRuns([held]);
        const other = h ? runFrom(h) : undefined;
        if (other && LEASED.includes(other.status) && other.session_id === sid && other.lease_until_ms > tx.nowMs) {
          throw new ConflictError(`session "${sid}" already holds the lease of run "${held}"`, 'active_lease_held', { session_id: sid, run_id: held });
        }
      }
      // NOTE: no pointer read → it must still be absent at commit (a claim-next by that session meanwhile refuses this).
      if (!held) tx.extra.absent!.push(pointer);
      tx.extra.set!.push([pointer, runId, 0]);
      Object.assign(r, { status: 'running', session_id: sid, started_at: tx.nowIso, heartbeat_at: tx.nowIso, lease_until_ms: tx.nowMs + leaseMsOf(r) });
      tx.touch(l);
      tx.emit('task.run_session_bound', l.task, r, { actor: actor.name });
      tx.emit('task.run_started', l.task, r, { actor: actor.name });
    });
    return this.runResult(runId);
  }

  /** runEnd is the operator's complete | fail (of a live lease) | cancel (of any unfinished run) of one run. */
  async runEnd(runId: string, op: 'complete' | 'fail' | 'cancel', body: unknown, actor: Actor): Promise<{ task: Task; run: Record<string, unknown> }> {
    const i = new Input(body);
    const result = i.body.result;
    if (op === 'complete' && result !== undefined && Buffer.byteLength(JSON.stringify(result)) > LIMITS.resultBytes) {
      throw new PayloadTooLargeError(`result must be at most ${LIMITS.resultBytes} bytes`, 'result_too_large', { result: 'too large' });
    }
    const error = op === 'fail' ? i.str('error', { required: true, max: 8000 }) : '';
    const reason = op === 'cancel' ? i.str('reason', { max: 2000 }) : '';
    const metadata = op === 'complete' ? undefined : i.obj('metadata', LIMITS.metadataBytes);
    const first = await this.run(runId);
    const check = (r: TaskRun, nowMs: number) => {
      if (op === 'cancel') {
        if (TERMINAL_RUN.includes(r.status)) throw new ConflictError(`run "${runId}" is already ${r.status}`, 'invalid_transition', { run_id: runId, status: r.status });
        return;
      }
      if (!LEASED.includes(r.status)) throw new ConflictError(`run "${runId}" is ${r.status}: only a leased run can be ${op === 'fail' ? 'failed' : 'completed'}`, 'invalid_transition', { run_id: runId, status: r.status });
      if (r.lease_until_ms <= nowMs) throw leaseExpired(runId);
    };
    check(first, Date.now());
    await this.mutate(async (tx) => {
      const l = await tx.load(first.task_id);
      const r = l.runs.get(runId)!;
      check(r, tx.nowMs);
      if (metadata) r.metadata = { ...r.metadata, ...metadata };
      if (op === 'complete') {
        this.endRun(tx, r, 'completed', { result: result ?? null });
        tx.emit('task.run_completed', l.task, r, { actor: actor.name }, 'success');
      } else if (op === 'fail') {
        this.endRun(tx, r, 'failed', { error });
        tx.emit('task.run_failed', l.task, r, { error, actor: actor.name }, 'failure');
        this.retryIfAllowed(tx, l, r);
      } else {
        this.endRun(tx, r, 'canceled', { error: reason });
        tx.emit('task.run_canceled', l.task, r, { reason, actor: actor.name });
      }
      tx.touch(l);
    });
    return this.runResult(runId);
  }

  // ── lease expiry ────────────────────────────────────────────────────────────────────────────────────────────

  /** recoverExpired requeues every run whose lease deadline passed; safe to run in several processes at once. */
  async recoverExpired(nowMs = Date.now()): Promise<number> {
    let n = 0;
    for (const runId of await this.o.store.expiredLeases(nowMs)) {
      const [h] = await this.o.store.readRuns([runId]);
      if (!h) {
        await this.o.store.redis.zrem(this.o.store.keys.leases, runId);
        continue;
      }
      const taskId = h.task_id;
      const did = await this.mutate(async (tx) => {
        const l = await tx.find(taskId);
        const r = l?.runs.get(runId);
        if (!l || !r) return false;
        if (!LEASED.includes(r.status)) {
          await tx.store.redis.zrem(tx.store.keys.leases, runId);
          return false;
        }
        if (r.lease_until_ms > tx.nowMs) return false;
        const session = r.session_id;
        this.requeue(r);
        tx.touch(l);
        tx.emit('task.run_lease_expired', l.task, r, { session_id: session }, 'warning');
        return true;
      });
      if (did) n++;
    }
    return n;
  }

  // ── operator force operations ───────────────────────────────────────────────────────────────────

  private async rateLimit(actor: Actor, taskId: string) {
    const n = await this.o.store.countForce(actor.name, taskId, Date.now());
    if (n > LIMITS.forcePerMinute) throw new TooManyRequestsError(`at most ${LIMITS.forcePerMinute} force operations per minute per actor and task`, 'force_rate_limited', { task_id: taskId });
  }

  /** force is release | recover | fail | retry of a run by an operator. */
  async force(op: 'release' | 'recover' | 'fail' | 'retry', runId: string, body: unknown, actor: Actor): Promise<Record<string, unknown>> {
    const i = new Input(body, ValidationError);
    const reason = op === 'fail' ? i.str('reason', { required: true, max: 2000 }) : i.str('reason', { max: 2000 });
    const metadata = i.obj('metadata', LIMITS.metadataBytes);
    const first = await this.run(runId);
    // NOTE: validity first (a refused request changes nothing), then the rate limit, then the change.
    const check = (r: TaskRun) => {
      if ((op === 'release' || op === 'recover') && !(LEASED.includes(r.status) || r.status === 'needs_attention')) throw new ConflictError(`run "${runId}" is ${r.status}: only a leased run can be ${op}d`, 'invalid_transition', { status: r.status });
      if (op === 'fail' && TERMINAL_RUN.includes(r.status)) throw new ConflictError(`run "${runId}" is already ${r.status}`, 'invalid_transition', { status: r.status });
      if (op === 'retry' && !(r.status === 'failed' || r.status === 'canceled')) throw new ConflictError(`only a failed or canceled run can be retried (it is ${r.status})`, 'invalid_transition', { status: r.status });
    };
    check(first);
    if (op === 'retry') {
      // NOTE: the chain is the run and its previous runs; a retry adds one, up to LIMITS.retryChain runs.
      let chain = 1;
      for (let prev = first.previous_run_id; prev && chain <= LIMITS.retryChain; chain++) {
        const [h] = await this.o.store.readRuns([prev]);
        prev = h?.previous_run_id ?? '';
      }
      if (chain + 1 > LIMITS.retryChain) throw new ValidationError(`the retry chain is at most ${LIMITS.retryChain} runs`, 'retry_chain_too_deep', { run_id: runId });
      const pre = new Tx(this.o.store);
      const why = this.enqueueRefusal(await pre.load(first.task_id));
      if (why) throw why;
    }
    await this.rateLimit(actor, first.task_id);
    let out!: TaskRun;
    await this.mutate(async (tx) => {
      const l = await tx.load(first.task_id);
      const r = l.runs.get(runId)!;
      check(r);
      const data = { reason, actor: actor.name, ...(metadata ? { metadata } : {}) };
      if (op === 'release' || op === 'recover') {
        this.requeue(r);
        tx.emit(op === 'release' ? 'task.run_released' : 'task.run_recovered', l.task, r, data);
        out = r;
      } else if (op === 'fail') {
        this.endRun(tx, r, 'failed', { error: reason, failure_kind: 'operator_forced' });
        tx.emit('task.run_operator_forced_fail', l.task, r, data, 'failure');
        out = r;
      } else {
        if (l.task.status === 'canceled') throw new ConflictError(`task "${l.task.id}" is canceled`, 'invalid_transition', { status: 'canceled' });
        out = this.enqueue(tx, l, { previous: r, network_channel: r.network_channel, metadata: metadata ?? r.metadata });
        tx.emit('task.run_operator_retry', l.task, out, data);
      }
      tx.touch(l);
    });
    return { run: runView(out), task: await this.view(out.task_id) };
  }

  async bulk(op: 'release' | 'fail', body: unknown, actor: Actor) {
    const i = new Input(body, ValidationError);
    const ids = i.strings('run_ids', Number.MAX_SAFE_INTEGER);
    if (!ids.length) i.fail('run_ids', 'is required', 'required');
    if (ids.length > LIMITS.bulk) i.fail('run_ids', `must have at most ${LIMITS.bulk} ids`, 'bulk_too_large');
    if (op === 'fail') i.str('reason', { required: true, max: 2000 });
    const results = [];
    for (const id of ids) {
      try {
        const r = await this.force(op, id, { reason: i.body.reason, metadata: i.body.metadata }, actor);
        results.push({ run_id: id, ok: true, run: r.run });
      } catch (err) {
        if (!(err instanceof ServiceError)) throw err;
        results.push({ run_id: id, ok: false, error: err.message, code: err.code, status: err.status });
      }
    }
    return { results };
  }

  // ── scheduler ───────────────────────────────────────────────────────────────────────────────────────────────

  async scheduler() {
    const s = await this.o.store.scheduler();
    const queues: Record<string, number> = {};
    for (const q of await this.o.store.queueNames()) queues[q] = await this.o.store.queueDepth(q);
    const leased = await this.o.store.leaseCount();
    return { scheduler: { paused: s.paused === '1', draining: s.draining === '1', paused_at: s.paused_at ?? '', reason: s.reason ?? '', queued: Object.values(queues).reduce((a, b) => a + b, 0), leased, queues } };
  }

  async backlog(limit = 100) {
    const runs: Record<string, unknown>[] = [];
    for (const q of await this.o.store.queueNames()) {
      const ids = await this.o.store.queued(q, 0, limit);
      for (const h of await this.o.store.readRuns(ids)) if (h) runs.push({ ...runView(runFrom(h)), queue: q });
    }
    return { backlog: runs.slice(0, limit) };
  }

  /** setScheduler pauses (no claims), resumes, or drains (no new claims until the leased runs have ended). */
  async setScheduler(op: 'pause' | 'resume' | 'drain', body: unknown, actor: Actor) {
    const i = new Input(body);
    const reason = i.str('reason', { max: 2000 });
    const now = new Date().toISOString();
    if (op !== 'pause') await this.o.store.redis.del(`${this.o.store.keys.scheduler}:drain-done`);
    if (op === 'resume') await this.o.store.setScheduler({ paused: '0', draining: '0', reason: '', paused_at: '' });
    else if (op === 'pause') await this.o.store.setScheduler({ paused: '1', reason, paused_at: now });
    else await this.o.store.setScheduler({ draining: '1', reason, paused_at: now });
    const type = op === 'resume' ? 'scheduler.resumed' : op === 'pause' ? 'scheduler.paused' : 'scheduler.drain_started';
    await this.o.bus?.publish({ type, source: 'tasks', outcome: 'info', summary: `${type} by ${actor.name}`, data: { actor: actor.name, reason } }).catch(() => undefined);
    if (op === 'resume') await this.o.store.wake(['*']);
    return this.scheduler();
  }

  /** checkDrain ends a drain once no run is leased (scheduler.drain_completed); the controller loop calls it. */
  async checkDrain(): Promise<void> {
    const s = await this.o.store.scheduler();
    if (s.draining !== '1') return;
    if ((await this.o.store.leaseCount()) > 0) return;
    // NOTE: HSETNX-like guard: only the first controller to see the drain done publishes the event.
    if ((await this.o.store.redis.set(`${this.o.store.keys.scheduler}:drain-done`, '1', 'NX')) === 'OK') {
      await this.o.bus?.publish({ type: 'scheduler.drain_completed', source: 'tasks', outcome: 'success', summary: 'scheduler drain completed', data: {} }).catch(() => undefined);
    }
  }
}
