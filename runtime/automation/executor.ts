import { Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { TERMINAL, type AutomationRun, type AutomationStore, type RunStatus } from '../../store/automation-store.ts';
import { parseDuration } from '../../codecs/duration.ts';
import { ServiceError } from '../../store/errors.ts';
import type { EventBus } from '../../store/event-bus.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { SessionFields, SessionStore } from '../../store/session-store.ts';
import { repeatedErrors } from '../process/repeated-errors.ts';
import type { SessionService } from '../sessions/session-service.ts';
import { scheduledAtOf } from './queue.ts';
import { fireLimitOf, newRun, runEvent, runPayload, skippedEvent, type OwnerSpec } from './runs.ts';
import { TurnWatcher } from './turn-watcher.ts';
import type { Gate } from '../hooks/gate.ts';
import { AUTOMATION_QUEUE, type FireData } from './types.ts';

/** AutomationExecutorOptions configures the run executor of the controller role. */
export interface AutomationExecutorOptions {
  store: AutomationStore;
  resources: ResourceStore;
  bus: EventBus;
  /** Starts, prompts and stops the runs' sessions (built in the controller role as the API builds it). */
  sessions: SessionService;
  sessionStore: SessionStore;
  connection: ConnectionOptions;
  prefix: string;
  /** Runs in flight at once in this process (each mostly waits for its turn). */
  concurrency: number;
  logger: Logger;
  /** The pre-fire hook gate: a denial records the run `skipped` with reason hook_denied. */
  gate: Gate;
  /**
   * How long a finished run's session stays live before it is stopped (default 5 s). NOTE: an agent process
   * exits when its last session leaves; stopping each run's session at once made nearly every firing spawn a new
   * agent process (about 200 ms under tsx), so sessions linger briefly and keep the pool warm.
   */
  sessionLingerMs?: number;
  /** The task family: a job with a `task` section creates a task when it fires (absent: such runs fail). */
  tasks?: TaskCreator;
}

/** TaskCreator is what a task job needs of the task family (runtime/tasks/service.ts TaskService.create). */
export interface TaskCreator {
  create(body: unknown, actor: { name: string; kind?: string }, parentId?: string, origin?: { kind: string; ref: string }): Promise<{ id: string }>;
}

/** RetryRun is thrown to hand a failed run with retries left back to BullMQ, which retries it after its backoff. */
class RetryRun extends Error {}

/** turnIdOf and sessionNameOf name an attempt's turn and session after the run, so a retried job finds them. */
const turnIdOf = (run: AutomationRun) => `turn-${run.id}-${run.attempt}`;
const sessionNameOf = (run: AutomationRun) => `automation ${run.id}#${run.attempt}`;
const now = () => new Date().toISOString();

/**
 * AutomationExecutor turns firings into runs: a BullMQ worker on the `automation` queue records the firing's run
 * once (AutomationStore.create: keyed by the firing, fire_limit checked in the same step), asks the pre-fire gate,
 * starts a session for the agent in the run's workspace, prompts it, waits for the turn to end (TurnWatcher) and
 * completes the run; a failed run with retries left goes back to BullMQ for its backoff.
 *
 * NOTE: exactly once per firing, across processes and crashes: BullMQ hands a job to one worker; if that worker
 * dies, the stalled job is handed to another, which finds the run it made (same key). A run that already has its
 * session (or a session named after it: the crash fell between starting it and recording it) is not started
 * again: the new worker waits for that session's turn instead.
 */
export class AutomationExecutor {
  private worker?: Worker;
  private readonly watcher: TurnWatcher;
  private readonly lingering = new Map<string, NodeJS.Timeout>();

  constructor(private readonly o: AutomationExecutorOptions) {
    this.watcher = new TurnWatcher({ bus: o.bus, sessions: o.sessionStore, logger: o.logger });
  }

  async start(): Promise<void> {
    await this.watcher.start();
    this.worker = new Worker(AUTOMATION_QUEUE, (job) => this.process(job), {
      connection: this.o.connection, prefix: this.o.prefix, concurrency: this.o.concurrency,
      // NOTE: a killed controller's run is picked up by another one once its lock lapses.
      lockDuration: 10_000, stalledInterval: 5_000,
    });
    this.worker.on('error', repeatedErrors.listener(this.o.logger, 'error', 'automation worker error'));
  }

  async stop(): Promise<void> {
    await this.worker?.close(true);
    await this.watcher.stop();
    for (const [id, timer] of this.lingering) {
      clearTimeout(timer);
      await this.stopSession(id, 'automation executor stopped');
    }
  }

  /** stopSession stops a finished run's session (it stays readable and resumable); one already stopped is left. */
  private stopSession(sessionId: string, detail: string): Promise<void> {
    this.lingering.delete(sessionId);
    return this.o.sessions.command({ type: 'stop', session_id: sessionId, reason: 'completed', detail }).catch(() => undefined);
  }

  private async process(job: Job<FireData>): Promise<void> {
    const d = job.data;
    const fireKey = d.fire_key ?? job.id!;
    const kind = d.job_id ? 'automation.job' : 'automation.trigger';
    const record = await this.o.resources.get(kind, (d.job_id ?? d.trigger_id)!);
    const spec = record?.spec as OwnerSpec | undefined;
    const created = await this.o.store.create(newRun({
      fireKey, kind: d.kind, jobId: d.job_id, triggerId: d.trigger_id, spec, workspaceId: d.workspace_id,
      scheduledAt: d.scheduled_at ?? scheduledAtOf(job.id) ?? job.timestamp, eventId: d.event_id,
    }), spec && fireLimitOf(spec), spec?.history_limit);
    let run = created.run;
    // NOTE: the fire limit records a tick over it as skipped in the same step that creates the run.
    if (created.created && run.status === 'skipped') await this.o.bus.publish(skippedEvent(run));
    if (TERMINAL.includes(run.status)) return;
    if (!spec) return void (await this.finish(run, 'skipped', 'not_found', `${kind} "${d.job_id ?? d.trigger_id}" does not exist`));
    if (!spec.enabled && d.kind !== 'manual') return void (await this.finish(run, 'skipped', 'disabled', `${kind} "${record!.id}" is disabled`));
    if (run.status === 'queued' && d.kind === 'job') {
      const why = await this.scheduleRefusal(run, spec);
      if (why) return void (await this.finish(run, 'skipped', why.reason, why.message));
    }
    if (spec.task) return void (await this.createTask(run, spec));
    if (!run.workspace_id) return void (await this.finish(run, 'skipped', 'workspace_required', 'a global job or trigger runs in a workspace: fire it with a workspace_id (or from a workspace event)'));
    const prompt = d.prompt ?? spec.prompt ?? '';

    // NOTE: a run found running was taken over from a worker that died (or lost its lock) mid-run.
    const takenOver = run.status === 'running';
    if (run.status === 'queued') {
      const ev = d.job_id ? 'automation.job.pre_fire' : 'automation.trigger.pre_fire';
      // NOTE: the gate publishes the pre-fire event itself (HookGate publishes what it gates).
      const verdict = await this.o.gate.gate(ev, runPayload(run), { source: 'automation' });
      if (verdict.denied) return void (await this.finish(run, 'skipped', 'hook_denied', `hook ${verdict.hook} denied the fire: ${verdict.reason}`));
      const claimed = await this.o.store.update(run.id, { status: 'running', started_at: now(), error: '' }, ['queued']);
      if (!claimed.run || TERMINAL.includes(claimed.run.status)) return;
      run = claimed.run;
    }
    try {
      const session = await this.sessionOf(run, takenOver, d.started_by_session_id);
      if (!run.session_id) {
        run = (await this.o.store.update(run.id, { session_id: session.id }, ['running'])).run ?? run;
        await this.o.bus.publish(runEvent(run, d.job_id ? 'automation.job.post_fire' : 'automation.trigger.post_fire', 'info', `${run.kind} run ${run.id} started session ${session.id}`));
      }
      const turnId = turnIdOf(run);
      const sent = takenOver && (await this.o.sessionStore.events(session.id, { turn_id: turnId })).length > 0;
      const send = !sent && session.state === 'active';
      // NOTE: the wait starts before the prompt is sent, so the turn's end reaches it from the bus tail alone
      // (no read of the session's log and record first).
      const ended = this.watcher.wait(session.id, turnId, send);
      if (send) {
        await this.o.sessions.sendPrompt(session, { type: 'prompt', session_id: session.id, turn_id: turnId, text: prompt, mode: 'queue' }).catch((err: Error) => {
          this.watcher.cancel(session.id, turnId, `the prompt was not sent: ${err.message}`);
          throw err;
        });
      }
      const outcome = await ended;
      // NOTE: the run's session has done its work: it is stopped after a short linger (see sessionLingerMs), so
      // firings do not pile up live agent sessions.
      const timer = setTimeout(() => void this.stopSession(session.id, `automation run ${run.id} finished`), this.o.sessionLingerMs ?? 5_000);
      timer.unref();
      this.lingering.set(session.id, timer);
      if (outcome.ok) await this.finish(run, 'succeeded', '', '');
      else await this.failOrRetry(run, 'turn_failed', outcome.error);
    } catch (err) {
      if (err instanceof RetryRun) throw err;
      if (!(err instanceof ServiceError)) throw err;
      await this.failOrRetry(run, err.code, err.message);
    }
  }

  /**
   * sessionOf finds the run's session, or starts it: the one recorded, else, for a run taken over, one named after
   * the run's attempt (the crash fell between starting it and recording it: a scan of the workspace's sessions,
   * done only then), else a new one.
   */
  private async sessionOf(run: AutomationRun, takenOver: boolean, startedBy?: string): Promise<SessionFields> {
    if (run.session_id) {
      const s = await this.o.sessionStore.get(run.session_id);
      if (s) return s;
    }
    const named = takenOver ? (await this.o.sessionStore.list(run.workspace_id)).find((s) => s.name === sessionNameOf(run)) : undefined;
    if (named) return named;
    const origin = run.job_id ? `automation.job/${run.job_id}` : `automation.trigger/${run.trigger_id}`;
    const s = await this.o.sessions.create({ workspace: run.workspace_id, agent_name: run.agent_name, name: sessionNameOf(run) }, { origin, ...(startedBy ? { startedBy } : {}) });
    if (s.state !== 'active') {
      const failure = s.failure as { summary?: string } | null;
      throw new SessionStartError(`session ${s.id} did not start: ${failure?.summary ?? String(s.stop_detail ?? s.state)}`, 'session_failed', { session_id: s.id });
    }
    return s;
  }

  /**
   * scheduleRefusal applies a job's CronJob controls to a scheduled tick before it runs: a tick later than its
   * `starting_deadline` is dropped (`missed_deadline`); with a live run of the job, `forbid` skips the tick
   * (`concurrency_forbidden`) and `replace` fails the live runs (`replaced`) and stops their sessions first.
   * NOTE: manual fires are not scheduled ticks: they bypass both, as a Job made from a CronJob does.
   */
  private async scheduleRefusal(run: AutomationRun, spec: OwnerSpec): Promise<{ reason: string; message: string } | undefined> {
    const deadline = spec.starting_deadline ? parseDuration(spec.starting_deadline) : undefined;
    const late = Date.now() - Date.parse(run.scheduled_at);
    if (deadline && late > deadline) return { reason: 'missed_deadline', message: `the tick due at ${run.scheduled_at} started ${Math.round(late / 1000)}s late, past its starting_deadline ${spec.starting_deadline}` };
    const policy = spec.concurrency_policy ?? 'allow';
    if (policy === 'allow') return undefined;
    const live = (await this.o.store.list({ job_id: run.job_id, limit: 20 })).filter((r) => r.id !== run.id && (r.status === 'queued' || r.status === 'running'));
    if (!live.length) return undefined;
    if (policy === 'forbid') return { reason: 'concurrency_forbidden', message: `run ${live[0].id} of this job is still ${live[0].status} (concurrency_policy forbid)` };
    for (const r of live) {
      await this.finish(r, 'failed', 'replaced', `replaced by run ${run.id} (concurrency_policy replace)`);
      if (r.session_id) await this.stopSession(r.session_id, `automation run ${r.id} replaced by ${run.id}`);
    }
    return undefined;
  }

  /** failOrRetry fails a running run, or, with retries left, queues its next attempt and hands it back to BullMQ. */
  private async failOrRetry(run: AutomationRun, reason: string, error: string): Promise<void> {
    if (run.attempt < run.max_attempts) {
      const prev = run.session_id ? [...run.previous_session_ids, run.session_id] : run.previous_session_ids;
      const next = await this.o.store.update(run.id, { status: 'queued', attempt: run.attempt + 1, session_id: '', previous_session_ids: prev, reason, error }, ['running']);
      if (next.ok) throw new RetryRun(`run ${run.id} attempt ${run.attempt} failed (${reason}); retrying`);
      return;
    }
    await this.finish(run, 'failed', reason, error);
  }

  /**
   * createTask fires a task job: it creates a task (workspace-scoped in the run's workspace, else global) with one
   * run enqueued, created by and originating from the job or trigger, and records the task's id on the
   * run. The task id derives from the run, so a retried firing finds the task it made (409 = done).
   */
  private async createTask(run: AutomationRun, spec: OwnerSpec): Promise<void> {
    if (!this.o.tasks) return this.finish(run, 'failed', 'tasks_not_available', 'task jobs need the tasks family, which this process does not have');
    // NOTE: a run found running was taken over from a worker that died mid-run; its started_at stays the first.
    if (run.status === 'queued') run = (await this.o.store.update(run.id, { status: 'running', started_at: now(), error: '' }, ['queued'])).run ?? run;
    if (TERMINAL.includes(run.status)) return;
    const t = spec.task as { title?: string; description?: string; owner?: unknown; network_channel?: string };
    const taskId = `task_auto_${run.id.replace(/[^A-Za-z0-9_.-]/g, '')}`.slice(0, 128);
    const body = {
      id: taskId, title: t.title || spec.name, description: t.description, owner: (t.owner as { kind?: string } | undefined)?.kind ? t.owner : undefined, network_channel: t.network_channel,
      scope: run.workspace_id ? 'workspace' : 'global', workspace: run.workspace_id || undefined, auto_enqueue_on_ready: true,
    };
    try {
      const by = { kind: 'automation', ref: run.job_id || run.trigger_id || run.id };
      await this.o.tasks.create(body, { kind: by.kind, name: by.ref }, undefined, by);
    } catch (err) {
      const status = (err as { status?: number }).status;
      if (status !== 409) return this.finish(run, 'failed', 'task_create_failed', err instanceof ServiceError ? err.message : String(err));
    }
    await this.finish(run, 'succeeded', '', '', { task_id: taskId });
  }

  /** finish moves a run to a terminal status once (with `more` fields, e.g. the task it made) and publishes its outcome. */
  private async finish(run: AutomationRun, status: RunStatus, reason: string, error: string, more: Partial<AutomationRun> = {}): Promise<void> {
    const res = await this.o.store.update(run.id, { ...more, status, reason, error, finished_at: now() }, ['queued', 'running']);
    if (!res.ok || !res.run) return;
    if (status === 'succeeded') await this.o.bus.publish(runEvent(res.run, 'automation.run.completed', 'success', `${run.kind} run ${run.id} succeeded`));
    if (status === 'failed') await this.o.bus.publish(runEvent(res.run, 'automation.run.failed', 'failure', `${run.kind} run ${run.id} failed: ${reason}`));
    if (status === 'skipped') await this.o.bus.publish(skippedEvent(res.run));
    this.o.logger.info({ run_id: run.id, job_id: run.job_id, trigger_id: run.trigger_id, status, reason }, 'automation run finished');
  }

}

/** SessionStartError is a run's session that did not become active. */
class SessionStartError extends ServiceError {
  readonly status = 503;
}
