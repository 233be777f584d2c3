import { randomBytes } from 'node:crypto';
import { Queue, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { quietQueue } from '../../store/connections.ts';
import type { EventBus, Outcome } from '../../store/event-bus.ts';
import type { DreamStore, StoredDreamRun } from '../../store/dream-store.ts';
import { memoryId, partitionKey } from '../../store/memory-store.ts';
import type { SessionStore } from '../../store/session-store.ts';
import { repeatedErrors } from '../process/repeated-errors.ts';
import { redactText } from '../sessions/redact.ts';
import type { SessionService } from '../sessions/session-service.ts';
import { TurnWatcher } from '../automation/turn-watcher.ts';
import { MemoryError, memoryValidation } from './errors.ts';
import { checkNames, partitionFields, partitionLabel, resolvePartition, type MemoryService } from './memory-service.ts';
import type { Memory, Partition } from './types.ts';
import {
  dreamPrompt, evaluateGates, extractSynthesis, publicStatus, selectCandidates, type CandidateInput, type DreamConfig, type ScoredCandidate,
} from './dream-policy.ts';

/** DREAM_QUEUE is the BullMQ queue dream runs and checks run on. */
export const DREAM_QUEUE = 'memory-dream';
/** TRIGGER_FIELDS and RETRY_FIELDS are the bodies of trigger and retry. */
export const TRIGGER_FIELDS = ['scope', 'workspace_id', 'agent_name', 'agent_tier', 'force'];
export const RETRY_FIELDS = ['failure_id', 'force'];
/** The newest runs a list reads at most (before its filters). */
const LIST_SCAN = 1000;

/** DreamRunView is `DreamRun` (public status), with the run's session and decision. */
export type DreamRunView = Omit<StoredDreamRun, 'partition' | 'status' | 'reason' | 'promoted'> & { status: ReturnType<typeof publicStatus> };

/** DreamServiceOptions wire dreams to memories, sessions, the bus and their queue. */
export interface DreamServiceOptions {
  store: DreamStore;
  memory: MemoryService;
  sessions: Pick<SessionService, 'create' | 'sendPrompt' | 'stop'>;
  sessionStore: SessionStore;
  bus: EventBus;
  logger: Logger;
  config: DreamConfig;
  connection: ConnectionOptions;
  /** The queue's key prefix, a hash tag of its own (`<prefix>{q:memory-dream}`). */
  queuePrefix: string;
}

type JobData = { kind: 'run'; run_id: string } | { kind: 'check'; workspace_id: string };

const view = (r: StoredDreamRun): DreamRunView => ({
  id: r.id, scope: r.scope, workspace_id: r.workspace_id, agent_name: r.agent_name, agent_tier: r.agent_tier, status: publicStatus(r),
  started_at: r.started_at, completed_at: r.completed_at, lock_until: r.lock_until, candidate_count: r.candidate_count, promoted_count: r.promoted_count,
  artifact_paths: r.artifact_paths, failure_path: r.failure_path, failure_reason: r.failure_reason, session_id: r.session_id, decision_id: r.decision_id, retry_of: r.retry_of,
});

/** idleView is the answer for a scope with no run (status `idle`) or a trigger that did not start one. */
const idleView = (p: Partition, status: DreamRunView['status'] = 'idle'): DreamRunView => ({
  id: '', scope: p.scope, workspace_id: p.workspace_id, agent_name: p.agent_name, agent_tier: p.agent_tier, status, started_at: '', completed_at: '',
  lock_until: '', candidate_count: 0, promoted_count: 0, artifact_paths: [], failure_path: '', failure_reason: '', session_id: '', decision_id: '', retry_of: '',
});

/** newRunId is time-ordered and random: `dream_<ms36><8 hex>`. */
const newRunId = () => `dream_${Date.now().toString(36).padStart(9, '0')}${randomBytes(4).toString('hex')}`;

/**
 * DreamService runs dreams: it promotes a scope's recalled candidates into long-term memory. A
 * run takes its scope's lock in Redis (one dream per scope across replicas; `lock_until` shows its end), becomes a
 * BullMQ job whose id is the run id (a repeated add adds nothing; a controller killed mid-run leaves it to another),
 * runs a session of the configured dream agent with the dream.v1 prompt, and writes the agent's synthesis through
 * the decision controller (MemoryService.write, origin `dreaming`). Checks run every check_interval, and a
 * session's stop asks for one after the debounce (one delayed job per workspace, so a burst of stops makes one).
 */
export class DreamService {
  private readonly queue: Queue<JobData>;
  private worker?: Worker<JobData>;
  private watcher?: TurnWatcher;

  constructor(private readonly o: DreamServiceOptions) {
    this.queue = quietQueue(new Queue<JobData>(DREAM_QUEUE, { connection: o.connection, prefix: o.queuePrefix }));
  }

  get config(): DreamConfig { return this.o.config; }

  /** partitionOf validates a scope selector (trigger body or list query): 400 memory.validation naming each field. */
  private partitionOf(input: Record<string, unknown>): Partition {
    const problems: Record<string, string> = {};
    const scope = input.scope ?? (input.workspace_id ? 'workspace' : 'global');
    const p = resolvePartition({ ...input, scope }, problems);
    if (Object.keys(problems).length) throw memoryValidation(problems);
    return p;
  }

  /**
   * trigger starts a dream of a scope when its gates pass, or at once with `force`; it answers
   * `{dream, triggered, reason}`: not triggered when dreams are disabled, a run holds the scope, or a gate says no.
   */
  async trigger(body: Record<string, unknown>, reason = 'trigger', retryOf = ''): Promise<{ dream: DreamRunView; triggered: boolean; reason: string }> {
    if (body.force !== undefined && typeof body.force !== 'boolean') throw memoryValidation({ force: 'must be a boolean' });
    const p = this.partitionOf(body);
    // NOTE: a periodic check walks the scopes that hold memories, a deleted workspace's too; a caller names one.
    if (reason !== 'check') await this.o.memory.requireWorkspace(p.workspace_id);
    const force = body.force === true;
    if (!this.o.config.enabled) return { dream: idleView(p, 'skipped'), triggered: false, reason: 'dream consolidation is disabled (MEMORY_DREAM_ENABLED)' };
    const pk = partitionKey(p);
    const held = await this.running(pk);
    if (held) return { dream: view(held), triggered: false, reason: `dream run ${held.id} of this scope is already running (until ${held.lock_until})` };
    if (!force) {
      const verdict = await this.gates(p);
      if (!verdict.pass) {
        const last = await this.o.store.latest(pk);
        return { dream: last ? view(last) : idleView(p), triggered: false, reason: verdict.reason };
      }
    }
    const run = await this.begin(p, force ? 'force' : reason, retryOf);
    if ('holder' in run) return { dream: view(run.holder), triggered: false, reason: `dream run ${run.holder.id} of this scope is already running` };
    return { dream: view(run.run), triggered: true, reason: '' };
  }

  /** retry runs a failed run's scope again, past the gates (`{failure_id?, force?}` → `{dream, retried}`). */
  async retry(id: string, body: Record<string, unknown>): Promise<{ dream: DreamRunView; retried: boolean; reason: string }> {
    const problems: Record<string, string> = {};
    if (body.failure_id !== undefined && typeof body.failure_id !== 'string') problems.failure_id = 'must be a string';
    if (body.force !== undefined && typeof body.force !== 'boolean') problems.force = 'must be a boolean';
    if (Object.keys(problems).length) throw memoryValidation(problems);
    const run = await this.getRun((body.failure_id as string | undefined)?.trim() || id);
    if (run.status !== 'failed') {
      throw new MemoryError(409, 'memory.conflict', `dream run ${run.id} is ${publicStatus(run)}; only a failed run is retried`, { dream_id: run.id, status: publicStatus(run) });
    }
    // NOTE: a retry repeats what failed, so the gates that let the first run start are not asked again unless force is false.
    const out = await this.trigger({ scope: run.scope, workspace_id: run.workspace_id || undefined, agent_name: run.agent_name || undefined, agent_tier: run.agent_tier || undefined, force: body.force !== false }, 'retry', run.id);
    return { dream: out.dream, retried: out.triggered, reason: out.reason };
  }

  /** get answers one run; 404 memory.not_found. */
  async get(id: string): Promise<DreamRunView> {
    return view(await this.getRun(id));
  }

  private async getRun(id: string): Promise<StoredDreamRun> {
    const run = id.length <= 253 ? await this.o.store.get(id) : undefined;
    if (!run) throw new MemoryError(404, 'memory.not_found', `dream run "${id.slice(0, 253)}" does not exist`, { dream_id: id.slice(0, 253) });
    return run;
  }

  /** list answers runs newest first, filtered by scope, workspace, agent, tier and public status. */
  async list(q: { scope?: string; workspace_id?: string; agent_name?: string; agent_tier?: string; status?: string; limit: number }): Promise<DreamRunView[]> {
    const statuses = ['idle', 'running', 'failed', 'promoted', 'skipped'];
    if (q.status && !statuses.includes(q.status)) throw memoryValidation({ status: `must be one of ${statuses.join(', ')}` });
    if (q.scope && !['global', 'workspace', 'agent'].includes(q.scope)) throw memoryValidation({ scope: 'must be one of global, workspace, agent' });
    if (q.agent_tier && !['workspace', 'global'].includes(q.agent_tier)) throw memoryValidation({ agent_tier: 'must be one of workspace, global' });
    checkNames(q);
    await this.o.memory.requireWorkspace(q.workspace_id);
    const out: DreamRunView[] = [];
    for (const r of await this.o.store.list(LIST_SCAN)) {
      const v = view(r);
      if ((q.scope && v.scope !== q.scope) || (q.workspace_id && v.workspace_id !== q.workspace_id) || (q.agent_name && v.agent_name !== q.agent_name)
        || (q.agent_tier && v.agent_tier !== q.agent_tier) || (q.status && v.status !== q.status)) continue;
      out.push(v);
      if (out.length >= q.limit) break;
    }
    return out;
  }

  /** status answers the newest run of every scope that has dreamed. */
  async status(): Promise<DreamRunView[]> {
    const runs = await Promise.all((await this.o.store.partitions()).map((pk) => this.o.store.latest(pk)));
    return runs.filter((r): r is StoredDreamRun => Boolean(r)).map(view);
  }

  /** sessionStopped asks for a check of the stopped session's workspace after the debounce (the stop hook). */
  async sessionStopped(sessionId: string): Promise<void> {
    if (!this.o.config.enabled) return;
    const s = await this.o.sessionStore.get(sessionId);
    if (!s?.workspace_id) return;
    // NOTE: the job id is the workspace's: a check already waiting absorbs this stop (the debounce).
    await this.queue.add('check', { kind: 'check', workspace_id: String(s.workspace_id) }, {
      jobId: `check-${Buffer.from(String(s.workspace_id)).toString('base64url')}`, delay: this.o.config.debounce_ms, removeOnComplete: true, removeOnFail: true,
    });
  }

  /** startWorker runs dreams and checks in this process (controller role) and schedules the periodic check. */
  async startWorker(): Promise<void> {
    const { o } = this;
    this.watcher = new TurnWatcher({ bus: o.bus, sessions: o.sessionStore, logger: o.logger });
    await this.watcher.start();
    this.worker = new Worker<JobData>(DREAM_QUEUE, (job) => this.work(job), { connection: o.connection, prefix: o.queuePrefix, concurrency: 4 });
    this.worker.on('error', repeatedErrors.listener(o.logger, 'error', 'dream worker error'));
    if (o.config.enabled) {
      await this.queue.upsertJobScheduler('dream-check', { every: o.config.check_interval_ms }, { name: 'check', data: { kind: 'check', workspace_id: '' }, opts: { removeOnComplete: true, removeOnFail: true } });
    }
  }

  async stop(): Promise<void> {
    await this.worker?.close();
    await this.watcher?.stop();
    await this.queue.close();
  }

  private async work(job: Job<JobData>): Promise<void> {
    if (job.data.kind === 'check') return this.check(job.data.workspace_id);
    return this.run(job.data.run_id);
  }

  /** check starts a dream in each scope (of one workspace, or all) whose gates pass. */
  private async check(workspaceId: string): Promise<void> {
    if (!this.o.config.enabled) return;
    for (const pk of await this.o.memory.store.partitions()) {
      const [first] = await this.o.memory.store.partitionMemories(pk);
      if (!first) continue;
      const p: Partition = { scope: first.scope, workspace_id: first.workspace_id, agent_name: first.agent_name, agent_tier: first.agent_tier };
      if (workspaceId && p.workspace_id !== workspaceId) continue;
      const res = await this.trigger({ ...p, workspace_id: p.workspace_id || undefined, agent_name: p.agent_name || undefined, agent_tier: p.agent_tier || undefined }, 'check');
      if (res.triggered) this.o.logger.info({ dream_id: res.dream.id, scope: pk }, 'dream check started a run');
    }
  }

  /** running is the run holding a scope's lock, if any. */
  private async running(pk: string): Promise<StoredDreamRun | undefined> {
    const holder = await this.o.store.holder(pk);
    return holder ? this.o.store.get(holder) : undefined;
  }

  /** gates evaluates the dream gates for a scope now. */
  private async gates(p: Partition) {
    const pk = partitionKey(p);
    const now = Date.now();
    const last = await this.o.store.latest(pk);
    const lastMs = last ? Date.parse(last.started_at) : undefined;
    const sessions = await this.o.sessionStore.list(p.workspace_id || undefined);
    const since = sessions.filter((s) => s.state === 'stopped' && s.origin !== 'memory.dream' && (lastMs === undefined || Date.parse(String(s.updated_at)) > lastMs)).length;
    const candidates = await this.candidates(p, now);
    return evaluateGates({ lastRunMs: lastMs, sessionsSince: since, candidates: candidates.length, nowMs: now }, this.o.config);
  }

  /** candidates are the scope's memories past the recall gates, scored and sorted; the dream's own syntheses are not. */
  private async candidates(p: Partition, nowMs: number): Promise<ScoredCandidate<CandidateInput & { view: Memory }>[]> {
    const pk = partitionKey(p);
    const stored = (await this.o.memory.store.partitionMemories(pk)).filter((m) => m.provenance.source_actor !== 'dreaming');
    const views = await this.o.memory.views(stored);
    const promoted = await this.o.store.promoted(pk);
    const inputs = views.map((v) => ({ id: memoryId(pk, v.filename), recall_count: v.recall_count, recall_score: v.recall_score, last_recalled_at: v.last_recalled_at, freshness_started_at: v.updated_at, view: v }));
    // NOTE: a memory promoted and changed since is a candidate again (its mark names the content it had).
    return selectCandidates(inputs, (m) => promoted[m.id] === m.view.content_hash, this.o.config, nowMs);
  }

  /** begin takes the scope's lock, stores the run and queues its job; answers the run, or the run holding the scope. */
  private async begin(p: Partition, reason: string, retryOf: string): Promise<{ run: StoredDreamRun } | { holder: StoredDreamRun }> {
    const now = Date.now();
    const run: StoredDreamRun = {
      id: newRunId(), partition: partitionKey(p), scope: p.scope, workspace_id: p.workspace_id, agent_name: p.agent_name, agent_tier: p.agent_tier,
      status: 'running', started_at: new Date(now).toISOString(), completed_at: '', lock_until: new Date(now + this.o.config.lock_ms).toISOString(),
      candidate_count: 0, promoted_count: 0, artifact_paths: [], failure_path: '', failure_reason: '', reason, retry_of: retryOf, session_id: '', decision_id: '', promoted: {},
    };
    const begun = await this.o.store.begin(run, now + this.o.config.lock_ms);
    if (!begun.created) {
      if (begun.holder) return { holder: begun.holder };
      throw new MemoryError(409, 'memory.conflict', `another dream run of ${partitionLabel(p)} started at the same time; try again`, partitionFields(p));
    }
    try {
      // NOTE: the job id is the run id: adding it again (a retried handler) adds nothing.
      await this.queue.add('run', { kind: 'run', run_id: run.id }, { jobId: run.id, attempts: 2, backoff: { type: 'fixed', delay: 1000 }, removeOnComplete: true, removeOnFail: true });
    } catch (err) {
      await this.finish(run, { status: 'failed', failure_reason: 'the run could not be queued' });
      throw err;
    }
    await this.publish(run, 'memory.dream.run.started', 'info', `dream run ${run.id} started (${reason})`);
    return { run };
  }

  /**
   * run carries out one dream run: select the candidates, run the dream agent's session on the prompt, write its
   * synthesis through the decision controller, mark the candidates promoted when the write applied, finish the run.
   */
  private async run(runId: string): Promise<void> {
    const { o } = this;
    let run = await o.store.get(runId);
    if (!run || run.status !== 'running') return;
    let sessionId = '';
    // NOTE: the dream agent's session stops before the run's outcome is written, so whoever sees the outcome (the
    // run's status, its bus event) finds the session stopped and its ledger written.
    const stopSession = async () => {
      const id = sessionId;
      sessionId = '';
      if (id) await o.sessions.stop(id).catch((err) => o.logger.warn({ err: (err as Error).message, session: id }, 'dream session stop failed'));
    };
    try {
      const p: Partition = { scope: run.scope as Partition['scope'], workspace_id: run.workspace_id, agent_name: run.agent_name, agent_tier: run.agent_tier as Partition['agent_tier'] };
      const candidates = await this.candidates(p, Date.now());
      run = (await o.store.advance(run, { candidate_count: candidates.length }, ['running'])) ?? run;
      if (!candidates.length) return void (await this.finish(run, { status: 'completed', failure_reason: 'no unpromoted candidates passed the recall gates' }));
      if (!run.workspace_id) {
        return void (await this.finish(run, { status: 'failed', failure_reason: 'workspace_required: the dream agent runs in a workspace; a global or agent-global scope has none (not supported yet)' }));
      }
      const session = await o.sessions.create({ workspace: run.workspace_id, agent_name: o.config.agent, name: `dream ${run.id}` }, { origin: 'memory.dream' });
      sessionId = session.id;
      run = (await o.store.advance(run, { session_id: session.id }, ['running'])) ?? run;
      if (session.state !== 'active') throw new Error(`the dream agent's session ${session.id} did not start: ${String(session.stop_detail ?? session.state)}`);
      const turnId = `dream-${run.id}`;
      const prompt = dreamPrompt(run, candidates.map((c) => ({ id: c.memory.id, name: c.memory.view.name, type: c.memory.view.type, score: c.score, recall_count: c.memory.recall_count, content: c.memory.view.content })));
      await o.sessions.sendPrompt(session, { type: 'prompt', session_id: session.id, turn_id: turnId, text: prompt, mode: 'queue' });
      const outcome = await withTimeout(this.watcher!.wait(session.id, turnId), o.config.lock_ms, 'the dream agent did not finish its turn before the run\'s lock ended');
      if (!outcome.ok) throw new Error(`the dream agent's turn failed: ${outcome.error}`);
      const answer = (await o.sessionStore.events(session.id, { turn_id: turnId, type: 'agent_message' })).map((e) => String(e.content.text ?? '')).join('\n');
      const synthesis = extractSynthesis(answer);
      if (!synthesis) throw new Error('the dream agent answered no ```memory block');
      const day = run.started_at.slice(0, 10);
      const { decision, applied } = await o.memory.write({
        scope: run.scope, workspace_id: run.workspace_id || undefined, agent_name: run.agent_name || undefined, agent_tier: run.agent_tier || undefined,
        type: 'project', name: `Dreaming synthesis ${day}`, description: 'Auto-curated from repeated recall signals.', content: synthesis,
        entity: 'dreaming synthesis', attribute: 'recurring memory themes', source_session_ids: [session.id],
        metadata: { target_filename: `project_dreaming_${day.replace(/-/g, '')}`, run_id: run.id, prompt_version: o.config.prompt_version },
      }, { origin: 'dreaming' });
      run = (await o.store.advance(run, { decision_id: decision.id }, ['running'])) ?? run;
      await stopSession();
      if (decision.op === 'reject') {
        const rules = decision.rule_trace.filter((r) => !r.passed).map((r) => r.name).join(', ');
        return void (await this.finish(run, { status: 'failed', failure_reason: `the decision controller rejected the synthesis (${rules || decision.reason})` }));
      }
      const marks = applied ? Object.fromEntries(candidates.map((c) => [c.memory.id, c.memory.view.content_hash])) : {};
      await o.store.markPromoted(run.partition, marks);
      await this.finish(run, {
        status: 'completed', promoted_count: Object.keys(marks).length, promoted: marks, artifact_paths: decision.target_filename ? [decision.target_filename] : [],
        failure_reason: applied ? '' : `the decision controller made no change (${decision.op}: ${decision.reason})`,
      });
    } catch (err) {
      const reason = redactText((err as Error).message).slice(0, 1000);
      o.logger.warn({ dream_id: runId, err: reason }, 'dream run failed');
      await stopSession();
      await this.finish(run, { status: 'failed', failure_reason: reason });
    } finally {
      await stopSession();
    }
  }

  /** finish ends a running run (compare-and-set on running), releases its scope and announces the outcome. */
  private async finish(run: StoredDreamRun, patch: Partial<StoredDreamRun>): Promise<void> {
    const done = await this.o.store.advance(run, { ...patch, completed_at: new Date().toISOString() }, ['running']);
    await this.o.store.release(run.partition, run.id);
    if (!done) return;
    const status = publicStatus(done);
    if (status === 'promoted') await this.publish(done, 'memory.dream.run.promoted', 'success', `dream run ${done.id} promoted ${done.promoted_count} candidate(s)`);
    else if (status === 'failed') await this.publish(done, 'memory.dream.run.failed', 'failure', `dream run ${done.id} failed: ${done.failure_reason}`);
    else await this.publish(done, 'memory.dream.run.skipped', 'info', `dream run ${done.id} promoted nothing: ${done.failure_reason}`);
  }

  private async publish(run: StoredDreamRun, type: string, outcome: Outcome, summary: string): Promise<void> {
    await this.o.bus.publish({
      type, source: 'memory', outcome, summary, scope: run.workspace_id ? 'workspace' : 'global', workspace_id: run.workspace_id, session_id: run.session_id,
      agent_name: run.agent_name, data: { dream_id: run.id, scope: run.scope, agent_tier: run.agent_tier, status: publicStatus(run), candidate_count: run.candidate_count, promoted_count: run.promoted_count },
    }).catch((err) => this.o.logger.warn({ err: (err as Error).message, dream_id: run.id }, 'dream event not published'));
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(what)), ms);
    p.then((v) => { clearTimeout(t); resolve(v); }, (e) => { clearTimeout(t); reject(e); });
  });
}
