import { randomBytes } from 'node:crypto';
import type { AutomationRun, AutomationStore, RunFilter } from '../../store/automation-store.ts';
import { NotFoundError, ValidationError } from '../../store/errors.ts';
import type { EventBus } from '../../store/event-bus.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { ResourceRecord, ResourceStatus } from '../../store/types.ts';
import type { WorkspaceService } from '../workspaces/workspace-service.ts';
import type { AutomationQueue, Schedule } from './queue.ts';
import { fireLimitOf, newRun, skippedEvent, webhookIdOf, type OwnerSpec } from './runs.ts';
import { renderTemplate } from './template.ts';
import type { AutomationReader, AutomationView } from './types.ts';

const JOB = 'automation.job';
const TRIGGER = 'automation.trigger';

/** AutomationServiceOptions configures an AutomationService. */
export interface AutomationServiceOptions {
  resources: ResourceStore;
  store: AutomationStore;
  queue: AutomationQueue;
  workspaces: WorkspaceService;
  /** Where a fire refused at once (its fire limit) is announced (automation.run.skipped). */
  bus: EventBus;
}

/** stateOf reads a record's reconcile state: Ready, Degraded, or Pending until its version is reconciled. */
function stateOf(record: ResourceRecord, status: ResourceStatus | undefined): string {
  if (!status || status.observed_version !== record.version) return 'Pending';
  if (status.conditions.find((c) => c.type === 'Degraded')?.status === 'True') return 'Degraded';
  return status.conditions.find((c) => c.type === 'Ready')?.status === 'True' ? 'Ready' : 'Pending';
}

/**
 * AutomationService is the read-and-fire side of automation that the routes and the `svc__automation_*` tools use:
 * jobs and triggers are their resource records with their reconcile state, next fire time and last run; runs are
 * read from the AutomationStore; "fire now" records a `manual` run (fire_limit applies) and queues it.
 */
export class AutomationService implements AutomationReader {
  constructor(private readonly o: AutomationServiceOptions) {}

  async listJobs(workspaceId?: string): Promise<AutomationView[]> {
    return Promise.all((await this.records(JOB, workspaceId)).map((r) => this.view(r)));
  }

  async getJob(id: string): Promise<AutomationView> {
    return this.view(await this.record(JOB, id));
  }

  async listTriggers(workspaceId?: string): Promise<AutomationView[]> {
    return Promise.all((await this.records(TRIGGER, workspaceId)).map((r) => this.view(r)));
  }

  async getTrigger(id: string): Promise<AutomationView> {
    return this.view(await this.record(TRIGGER, id));
  }

  async history(kind: 'job' | 'trigger', id: string, f: Omit<RunFilter, 'job_id' | 'trigger_id'>): Promise<AutomationRun[]> {
    await this.record(kind === 'job' ? JOB : TRIGGER, id);
    return this.o.store.list({ ...f, [kind === 'job' ? 'job_id' : 'trigger_id']: id });
  }

  listRuns(f: RunFilter): Promise<AutomationRun[]> {
    return this.o.store.list(f);
  }

  async getRun(id: string): Promise<AutomationRun> {
    const run = await this.o.store.get(id);
    if (!run) throw new NotFoundError(`automation run "${id}" does not exist`, 'run_not_found', { run_id: id });
    return run;
  }

  /**
   * fireJob fires a job now: a `manual` run, even for a disabled job; a global job needs `workspace_id`. `startedBy`
   * is the agent session that fires it (an agent tool), whose tool policy the run's session is also held to.
   */
  async fireJob(id: string, body: { workspace_id?: string } = {}, opts: { startedBy?: string } = {}): Promise<AutomationRun> {
    const record = await this.record(JOB, id);
    return this.fire(record, { kind: 'manual', job_id: id }, body.workspace_id, (record.spec as OwnerSpec).prompt ?? '', opts.startedBy);
  }

  /** fireTrigger fires a trigger now: its prompt is rendered with `{type: "manual", payload}`. */
  async fireTrigger(id: string, body: { workspace_id?: string; payload?: unknown } = {}): Promise<AutomationRun> {
    const record = await this.record(TRIGGER, id);
    const prompt = renderTemplate((record.spec as OwnerSpec).prompt ?? '', { type: 'manual', event: 'manual', payload: body.payload ?? {}, data: { payload: body.payload ?? {} } });
    return this.fire(record, { kind: 'manual', trigger_id: id }, body.workspace_id, prompt);
  }

  /**
   * fireWebhook records and queues a verified webhook delivery's run (the run is keyed by the signature, which
   * the receiver has already claimed once).
   */
  async fireWebhook(record: ResourceRecord, fireKey: string, workspaceId: string, prompt: string): Promise<AutomationRun> {
    const spec = record.spec as OwnerSpec;
    const { run, created } = await this.o.store.create(newRun({ fireKey, kind: 'webhook', triggerId: record.id, spec, workspaceId, scheduledAt: Date.now() }), fireLimitOf(spec), spec.history_limit);
    await this.announceSkipped(run, created);
    if (run.status === 'queued') await this.o.queue.fire({ kind: 'webhook', trigger_id: record.id, fire_key: fireKey, workspace_id: workspaceId, prompt, scheduled_at: Date.now() }, fireKey, spec.retry);
    return run;
  }

  /** records lists a kind's records, optionally those of one workspace. */
  records(kind: string, workspaceId?: string): Promise<ResourceRecord[]> {
    return this.o.resources.list({ kind, ...(workspaceId ? { scope: { kind: 'workspace', id: workspaceId } } : {}) });
  }

  private async fire(record: ResourceRecord, who: { kind: 'manual'; job_id?: string; trigger_id?: string }, workspaceRef: string | undefined, prompt: string, startedBy?: string): Promise<AutomationRun> {
    const spec = record.spec as OwnerSpec;
    let workspaceId = spec.workspace_id ?? '';
    if (workspaceRef) {
      const ws = await this.o.workspaces.get(workspaceRef).catch((err: Error) => {
        throw err instanceof NotFoundError ? new ValidationError(`workspace "${workspaceRef}" does not exist`, 'invalid_body', { workspace_id: 'must name an existing workspace' }) : err;
      });
      if (workspaceId && ws.id !== workspaceId) throw new ValidationError(`${record.kind} "${record.id}" runs in workspace "${workspaceId}"`, 'invalid_body', { workspace_id: `must be empty or "${workspaceId}"` });
      workspaceId = ws.id;
    }
    const fireKey = `manual.${randomBytes(12).toString('hex')}`;
    const { run, created } = await this.o.store.create(newRun({ fireKey, kind: 'manual', jobId: who.job_id, triggerId: who.trigger_id, spec, workspaceId, scheduledAt: Date.now() }), fireLimitOf(spec), spec.history_limit);
    await this.announceSkipped(run, created);
    if (run.status === 'queued') await this.o.queue.fire({ ...who, fire_key: fireKey, workspace_id: workspaceId, prompt, scheduled_at: Date.now(), ...(startedBy ? { started_by_session_id: startedBy } : {}) }, fireKey, spec.retry);
    return run;
  }

  /** announceSkipped publishes a run the fire limit refused as it was created (a queued one the executor announces). */
  private async announceSkipped(run: AutomationRun, created: boolean): Promise<void> {
    if (created && run.status === 'skipped') await this.o.bus.publish(skippedEvent(run));
  }

  private async record(kind: string, id: string): Promise<ResourceRecord> {
    const record = await this.o.resources.get(kind, id);
    if (!record) throw new NotFoundError(`${kind} "${id}" does not exist`, kind === JOB ? 'job_not_found' : 'trigger_not_found', { kind, id });
    return record;
  }

  private async view(record: ResourceRecord): Promise<AutomationView> {
    const spec = record.spec as OwnerSpec & { schedule?: Schedule };
    const isJob = record.kind === JOB;
    const [status, last, next] = await Promise.all([
      this.o.resources.getStatus(record.kind, record.id),
      this.o.store.last(isJob ? 'job' : 'trigger', record.id),
      isJob && spec.enabled ? this.nextFire(record.id, spec.schedule!) : Promise.resolve(null),
    ]);
    const view: AutomationView = {
      id: record.id, kind: record.kind, scope: record.scope, version: record.version, spec: record.spec as Record<string, unknown>, enabled: Boolean(spec.enabled),
      state: stateOf(record, status), status, next_fire_at: next, last_run: last ?? null,
    };
    if (!isJob && spec.event === 'webhook') {
      const endpoint = spec.endpoint_slug || webhookIdOf(record.id, spec);
      view.webhook_path = record.scope.kind === 'workspace' ? `/api/webhooks/workspaces/${record.scope.id}/${endpoint}` : `/api/webhooks/global/${endpoint}`;
    }
    return view;
  }

  /** nextFire is a job's next due time as its scheduler (or pending one-off firing) has it; null when none. */
  private async nextFire(id: string, schedule: Schedule): Promise<string | null> {
    if (schedule.mode === 'at') {
      const at = Date.parse(schedule.time ?? '');
      const state = await this.o.queue.atState(id, at);
      return state === 'delayed' || state === 'waiting' ? new Date(at).toISOString() : null;
    }
    const s = await this.o.queue.scheduler(id);
    return s?.next ? new Date(s.next).toISOString() : null;
  }
}
