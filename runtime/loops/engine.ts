import { createHash, randomUUID } from 'node:crypto';
import { Queue, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { parseDuration } from '../../codecs/duration.ts';
import { canonicalJson } from '../../store/canonical.ts';
import { quietQueue } from '../../store/connections.ts';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../../store/errors.ts';
import type { EventBus } from '../../store/event-bus.ts';
import type { LoopStore, StepResult } from '../../store/loop-store.ts';
import { repeatedErrors } from '../process/repeated-errors.ts';
import { checkConfig, checkNetworkParticipation, type LoopDefinitions } from './definitions.ts';
import type { ExecutorRegistry } from './executors/index.ts';
import { BUDGET_GATE, compileGraph, type CompiledGraph } from '../../codecs/loop-graph.ts';
import {
  approvalStep, completeRecord, fieldOf, isNodeTerminal, keyField, outcomeStep, parseGateId, plan, scopeOf, serializeRecord, upstreamResults,
  type NodeRecord, type Snapshot, type Step,
} from './planner.ts';
import { agentSessionOf, effectiveConfig, parentNodeOf, payloadJson, runFromHash, runRefFromHash, runViewFromHash } from './records.ts';
import {
  APPROVAL_DECISIONS, LOOP_LIMITS, TERMINAL_STATUSES, isTerminal, type ApprovalDecision, type LoopDefinition, type LoopEngineControl, type LoopRun,
  type NodeContext, type NodeExecutor, type NodeKey, type NodeOutcome, type NodeOutcomeKind, type StartRunRequest,
} from './types.ts';
import { loopBusEvents } from './bus-events.ts';

/** LOOP_QUEUE is the BullMQ queue every node execution runs on (one job per execution). */
export const LOOP_QUEUE = 'loop-node';

/** LoopSettings tune the engine (LOOP_* environment settings, runtime/process/config.ts). */
export interface LoopSettings {
  /** Node executions one controller process runs at once. */
  concurrency: number;
  /** A job's lock lasts this long unless renewed; a worker that died leaves its job to another after it (ms). */
  lockMs: number;
  /** The watchdog looks at a live run nothing has touched for this long (ms). */
  watchdogMs: number;
  /** A terminal run's keys are kept this long (ms; 0 = forever). */
  retainMs: number;
}

export const DEFAULT_LOOP_SETTINGS: LoopSettings = { concurrency: 64, lockMs: 30_000, watchdogMs: 10_000, retainMs: 7 * 24 * 3_600_000 };

/** LoopEngineOptions wire the engine to Redis, the definitions, the executors and the bus. */
export interface LoopEngineOptions {
  store: LoopStore;
  definitions: LoopDefinitions;
  registry: ExecutorRegistry;
  bus?: EventBus;
  /** A BullMQ connection (maxRetriesPerRequest: null). */
  connection: ConnectionOptions;
  /** The queue's key prefix, a hash tag of its own (`<prefix>{q:loop-node}`). */
  queuePrefix: string;
  logger: Logger;
  settings?: Partial<LoopSettings>;
}

/** NodeJobData names one node execution attempt; its BullMQ job id is made of the same values (jobIdOf). */
export interface NodeJobData { kind: 'node'; run: string; generation: number; node: string; item: number; attempt: number; revision: number }

/** jobIdOf is the deterministic job id of a node execution attempt: run, generation, node, item index, attempt, revision. */
export const jobIdOf = (runId: string, r: Pick<NodeRecord, 'generation' | 'node_id' | 'item_index' | 'attempt' | 'revision'>) =>
  `${runId}_g${r.generation}_${r.node_id}_i${r.item_index}_a${r.attempt}_r${r.revision}`;

/** DryRun is the resolved plan `?dry=true` answers. */
export interface DryRun {
  loop_name: string;
  resolved_inputs: Record<string, unknown>;
  generation: number;
  nodes: { id: string; class: string; kind: string; depends_on: string[] }[];
  contract: unknown;
  effective_config: unknown;
  resolved_network_participation: { mode: string; source: string; version: string };
}

const TERMINAL = [...TERMINAL_STATUSES] as string[];
type Loaded = { snap: Snapshot; hash: Record<string, string> };

/**
 * LoopEngine runs loop runs: one BullMQ job per node execution (deterministic id), run and node state advanced only
 * by the store's compare-and-set step, the pure planner (planner.ts) deciding each step. Every process may start
 * runs and apply controls; controller processes run the node workers and the watchdog, which re-plans a live run
 * nothing touched for a while (a step whose follow-up was lost with its process: a job not added, a parent not told).
 *
 * Exactly once: a node's attempt starts by CAS (queued → running) and ends by CAS (running at that attempt →
 * outcome), so a job BullMQ runs twice (its worker died, its lock lapsed) records one outcome. Side effects repeat
 * per executor: `exactly-once` kinds (input, transform, branch, fan-out, collect, human gate, run-loop: its child's
 * id comes from the attempt, so a repeat finds the same child) have none outside the run; `at-least-once` kinds
 * (tools, agents, command gates) may act twice when a worker dies after acting and before recording; an
 * `at-most-once` kind's interrupted attempt fails instead of running again.
 */
export class LoopEngine implements LoopEngineControl {
  readonly queue: Queue;
  readonly settings: LoopSettings;
  private worker?: Worker;
  private watchdog?: NodeJS.Timeout;
  private abortTimer?: NodeJS.Timeout;
  private readonly inflight = new Map<string, Set<AbortController>>();
  private readonly graphs = new Map<string, { def: LoopDefinition; graph: CompiledGraph }>();
  private sweeping = false;

  constructor(private readonly o: LoopEngineOptions) {
    this.settings = { ...DEFAULT_LOOP_SETTINGS, ...o.settings };
    this.queue = quietQueue(new Queue(LOOP_QUEUE, { connection: o.connection, prefix: o.queuePrefix }));
  }

  get store(): LoopStore { return this.o.store; }

  // -------------------------------------------------------------------------------------------------------------
  // Lifecycle

  /** startWorkers runs node executions and the watchdog in this process (controller role). */
  startWorkers(): void {
    const s = this.settings;
    this.worker = new Worker<NodeJobData>(LOOP_QUEUE, (job) => this.process(job), {
      connection: this.o.connection, prefix: this.o.queuePrefix, concurrency: s.concurrency,
      lockDuration: s.lockMs, stalledInterval: Math.max(1000, Math.floor(s.lockMs / 2)), maxStalledCount: 3,
    });
    this.worker.on('error', repeatedErrors.listener(this.o.logger, 'error', 'loop worker error'));
    this.watchdog = setInterval(() => void this.sweep().catch((err) => this.o.logger.warn({ err: (err as Error).message }, 'loop watchdog failed')), Math.max(250, Math.floor(s.watchdogMs / 2)));
    this.abortTimer = setInterval(() => void this.checkAborts().catch(() => undefined), 500);
  }

  async stop(): Promise<void> {
    clearInterval(this.watchdog);
    clearInterval(this.abortTimer);
    for (const set of this.inflight.values()) for (const ac of set) ac.abort(new Error('the service is stopping'));
    await this.worker?.close();
    await this.queue.close();
  }

  // -------------------------------------------------------------------------------------------------------------
  // Reading

  private async compiled(runId: string): Promise<{ def: LoopDefinition; graph: CompiledGraph } | undefined> {
    const hit = this.graphs.get(runId);
    if (hit) return hit;
    const raw = await this.o.store.readDef(runId);
    if (!raw) return undefined;
    const def = JSON.parse(raw) as LoopDefinition;
    const c = { def, graph: compileGraph(def) };
    if (this.graphs.size > 5000) this.graphs.delete(this.graphs.keys().next().value!);
    this.graphs.set(runId, c);
    return c;
  }

  /** load reads a run, its node records and its executed definition into a planner snapshot. */
  async load(runId: string): Promise<Loaded | undefined> {
    const st = await this.o.store.readState(runId);
    if (!st) return undefined;
    const c = await this.compiled(runId);
    if (!c) return undefined;
    const nodes = new Map<string, NodeRecord>();
    for (const [f, j] of Object.entries(st.nodes)) nodes.set(f, JSON.parse(j) as NodeRecord);
    const run = runViewFromHash(st.run);
    const waits = [...nodes.values()].filter((r) => r.generation === run.generation && r.state === 'waiting' && r.wait?.kind === 'child_loop');
    let children: Map<string, string> | undefined;
    if (waits.length) {
      const sts = await this.o.store.statuses(waits.map((w) => w.wait!.ref));
      children = new Map(waits.map((w, i) => [w.wait!.ref, sts[i]]));
    }
    return { snap: { run, def: c.def, graph: c.graph, nodes, now: Date.now(), children }, hash: st.run };
  }

  /** local is the state after a step this process applied, without reading it back (a later CAS catches a stale view). */
  private local(l: Loaded, step: Step, res: Extract<StepResult, { kind: 'ok' }>): Loaded {
    const hash: Record<string, string> = { ...l.hash, ...step.set, status: res.status, event_seq: String(res.seq) };
    for (const [k, n] of Object.entries(step.incr)) hash[k] = String(Number(hash[k] ?? 0) + n);
    const nodes = new Map(l.snap.nodes);
    for (const [f, w] of step.writes) nodes.set(f, w.rec);
    return { hash, snap: { ...l.snap, run: runViewFromHash(hash), nodes, now: Date.now() } };
  }

  // -------------------------------------------------------------------------------------------------------------
  // Applying steps

  private async apply(l: Loaded, step: Step, expect: { status?: string[]; not_status?: string[]; generation?: number; active_gate_id?: string; fields?: Record<string, string> }): Promise<StepResult> {
    const transition = step.transition;
    if (transition && isTerminal(transition.to)) endUnfinished(l.snap, step, transition);
    const now = Date.now();
    // NOTE: the time a run spends waiting for a person (an approval, a resume) is not spent on its work: it is kept
    // (waited_ms) and left out of the wall-clock budget, so an approval that grants more time does not find it gone.
    const parked = (st: string) => st === 'needs-approval' || st === 'paused';
    if (transition && parked(transition.to) && !parked(l.snap.run.status)) step.set.parked_ms = String(now);
    if (transition && !parked(transition.to) && parked(l.snap.run.status) && Number(l.hash.parked_ms) > 0) {
      step.incr.waited_ms = (step.incr.waited_ms ?? 0) + Math.max(0, now - Number(l.hash.parked_ms));
      step.set.parked_ms = '0';
    }
    const res = await this.o.store.step(l.snap.run.id, {
      expect, transition,
      set: { ...step.set, touched_ms: String(now) },
      incr: Object.keys(step.incr).length ? step.incr : undefined,
      nodes: [...step.writes].map(([f, w]) => [f, w.expectV, serializeRecord(w.rec)]),
      events: step.events.map(([k, p]) => [k, payloadJson(p)]),
      retain_ms: this.settings.retainMs,
    });
    if (res.kind === 'illegal') {
      this.o.logger.error({ loop_run_id: l.snap.run.id, from: res.from, to: res.to, cause: res.cause }, 'illegal loop run transition refused');
    }
    return res;
  }

  /** enqueue adds a job for each queued execution (an existing job id adds nothing). */
  private async enqueue(runId: string, recs: NodeRecord[]): Promise<void> {
    if (!recs.length) return;
    const now = Date.now();
    await this.queue.addBulk(recs.map((r) => ({
      name: 'node',
      data: { kind: 'node', run: runId, generation: r.generation, node: r.node_id, item: r.item_index, attempt: r.attempt, revision: r.revision } satisfies NodeJobData,
      opts: {
        jobId: jobIdOf(runId, r), delay: Math.max(0, (r.not_before ?? 0) - now),
        // NOTE: these attempts cover infrastructure errors (Redis unreachable mid-step); node retries are the engine's.
        attempts: 5, backoff: { type: 'exponential', delay: 200 }, removeOnComplete: true, removeOnFail: { age: 86_400 },
      },
    })));
  }

  /** after runs what follows a step: jobs for new executions, and a status change's announcements and consequences. */
  private async after(l: Loaded, step: Step, res: StepResult, newOnly: boolean): Promise<void> {
    if (res.kind !== 'ok') return;
    const fresh = newOnly ? step.enqueue.filter((r) => step.writes.has(fieldOf(r.generation, r.node_id, r.item_index))) : step.enqueue;
    await this.enqueue(l.snap.run.id, fresh);
    if (step.transition) await this.announce(l, step.transition.to, step.transition.cause, step.transition.reason ?? '');
  }

  /** announce publishes a status change on the bus and carries out what a terminal status implies. */
  private async announce(l: Loaded, to: string, cause: string, reason: string): Promise<void> {
    const h = l.hash;
    if (this.o.bus) {
      await this.o.bus.publishMany(loopBusEvents({ id: h.id, workspace_id: h.workspace_id, loop_name: h.loop_name }, l.snap.run.status, to, cause, reason))
        .catch((err) => this.o.logger.warn({ err: (err as Error).message }, 'loop bus publish failed'));
    }
    if (!isTerminal(to)) return;
    await this.o.store.ended([h.id]);
    for (const set of [this.inflight.get(h.id)]) for (const ac of set ?? []) ac.abort(new Error(`run ${to}`));
    // Child runs a waiting node started end with their parent.
    for (const r of l.snap.nodes.values()) {
      if (r.state === 'waiting' && r.wait?.kind === 'child_loop') await this.stopRun(r.wait.ref, `parent run ${h.id} ended ${to}`).catch(() => undefined);
    }
    const parent = parentNodeOf(h);
    if (parent) {
      await this.completeChild(parent, h.id, to).catch((err) => this.o.logger.warn({ err: (err as Error).message, loop_run_id: h.id }, 'parent loop run not told; its watchdog will'));
    }
    // NOTE: only a serial loop queues runs to promote; looking (the workspace's last 1000 runs) at every other run's
    // end made the end of each run cost O(runs): 1,000 concurrent runs ran at 45 nodes/s (test/bench/loops.ts).
    if (l.snap.def.concurrency === 'serial') await this.promote(h.workspace_id, h.loop_name).catch(() => undefined);
  }

  // -------------------------------------------------------------------------------------------------------------
  // Planning

  /**
   * advance plans a run until a pass changes nothing or applies: it retries on a concurrent change (re-reading),
   * so concurrent completions of sibling nodes all end with the run planned. `deep` (the watchdog) also re-adds
   * jobs for every queued execution and fails attempts whose job is gone.
   */
  async advance(runId: string, deep = false, pre?: Loaded): Promise<void> {
    let l = pre;
    let fresh = false;
    for (let i = 0; i < 100; i++) {
      if (!l) { l = await this.load(runId); fresh = true; }
      if (!l) return;
      if (isTerminal(l.snap.run.status)) return;
      // NOTE: a queued run (concurrency serial) is started by the end of the run before it; when that follow-up was
      // lost with its process, the watchdog's pass over the queued run starts it instead of leaving it queued for ever.
      if (l.snap.run.status === 'queued') return deep ? this.promote(l.hash.workspace_id, l.hash.loop_name) : undefined;
      if (deep && (await this.recoverLost(l))) { l = undefined; continue; }
      const step = plan(l.snap);
      if (!step.writes.size && !step.transition && !step.events.length && !Object.keys(step.set).length) {
        // NOTE: "nothing to do" holds only on a fresh read: two siblings ending at once each see the other still
        // running in the view they started from, and the one that ends last must see both to run their join.
        if (!fresh) { l = undefined; continue; }
        if (deep) await this.enqueue(runId, step.enqueue);
        return;
      }
      // NOTE: the run fields a plan decides on besides status and generation (a pause request, a gate's request for
      // another generation) are expected as read, so a view read before a pause was asked cannot skip the pause.
      const fields = { pause_requested: l.hash.pause_requested ?? '', next_generation_requested: l.hash.next_generation_requested ?? '' };
      const res = await this.apply(l, step, { status: [l.snap.run.status], generation: l.snap.run.generation, fields });
      if (res.kind === 'ok') {
        await this.after(l, step, res, !deep);
        if (!step.transition || step.transition.to === 'running') { l = this.local(l, step, res); fresh = false; continue; }
        return;
      }
      if (res.kind === 'illegal' || res.kind === 'missing') return;
      l = undefined;
    }
    this.o.logger.warn({ loop_run_id: runId }, 'loop run planning kept conflicting; the watchdog will plan it again');
  }

  /** recoverLost fails running attempts whose job no longer exists (lost with its worker); true when it changed something. */
  private async recoverLost(l: Loaded): Promise<boolean> {
    const { snap } = l;
    for (const r of snap.nodes.values()) {
      if (r.generation !== snap.run.generation || r.state !== 'running') continue;
      const state = await this.queue.getJobState(jobIdOf(snap.run.id, r));
      if (state !== 'unknown' && state !== 'failed' && state !== 'completed') continue;
      const step = outcomeStep(snap, { runId: snap.run.id, generation: r.generation, nodeId: r.node_id, itemIndex: r.item_index }, r.attempt, { outcome: 'failed', error: `the worker running attempt ${r.attempt} was lost (job ${state})` });
      if (!step) continue;
      const res = await this.apply(l, step, { not_status: TERMINAL, generation: snap.run.generation });
      await this.after(l, step, res, true);
      return true;
    }
    return false;
  }

  // -------------------------------------------------------------------------------------------------------------
  // Node executions

  private async process(job: Job<NodeJobData>): Promise<void> {
    const d = job.data;
    const key: NodeKey = { runId: d.run, generation: d.generation, nodeId: d.node, itemIndex: d.item };
    await this.runNode(key, d.attempt, d.revision);
  }

  /** runNode runs one attempt of a node execution, if it is still the current one, records its outcome and plans. */
  async runNode(key: NodeKey, attempt: number, revision: number): Promise<void> {
    const f = keyField(key);
    let l = await this.load(key.runId);
    for (let i = 0; l && i < 20; i++) {
      const rec = l.snap.nodes.get(f);
      if (isTerminal(l.snap.run.status)) return;
      if (!rec || rec.attempt !== attempt || rec.revision !== revision || (rec.state !== 'queued' && rec.state !== 'running')) return this.advance(key.runId, false, l);
      const node = l.snap.graph.nodes.get(key.nodeId)!;
      const exec = this.o.registry.get(node.kind);
      let outcome: NodeOutcome | undefined;
      if (rec.state === 'queued') {
        if ((rec.not_before ?? 0) > Date.now() + 50) { await this.enqueue(key.runId, [rec]); return; }
        const started: NodeRecord = { ...rec, v: rec.v + 1, state: 'running', started_at: new Date().toISOString() };
        const res = await this.o.store.step(key.runId, {
          expect: { not_status: TERMINAL, generation: key.generation }, nodes: [[f, rec.v, serializeRecord(started)]],
          events: [['node_running', payloadJson({ generation: key.generation, node_id: key.nodeId, item_index: key.itemIndex, attempt, revision })]],
          set: { touched_ms: String(Date.now()) },
        });
        if (res.kind !== 'ok') { l = await this.load(key.runId); continue; }
        l.snap.nodes.set(f, started);
        l.hash.event_seq = String(res.seq);
      } else if (exec?.sideEffects === 'at-most-once') {
        outcome = { outcome: 'failed', error: `attempt ${attempt} was interrupted (its worker stopped); ${node.kind} runs at most once` };
      } else {
        this.o.logger.info({ loop_run_id: key.runId, node_id: key.nodeId, item_index: key.itemIndex, attempt }, 'running an interrupted node attempt again');
      }
      outcome ??= exec ? await this.execute(exec, l, key, l.snap.nodes.get(f)!) : { outcome: 'failed', error: `no executor for node kind "${node.kind}"` };
      return this.record(l, key, attempt, outcome);
    }
  }

  /** record writes an attempt's outcome (once: CAS on the attempt) and plans the run. */
  private async record(first: Loaded, key: NodeKey, attempt: number, outcome: NodeOutcome): Promise<void> {
    let l: Loaded | undefined = first;
    for (let i = 0; l && i < 100; i++) {
      l.snap.now = Date.now();
      const step = outcomeStep(l.snap, key, attempt, outcome);
      if (!step) return this.advance(key.runId, false, l);
      const expect = step.transition ? { status: [l.snap.run.status], generation: key.generation } : { not_status: TERMINAL, generation: key.generation };
      const res = await this.apply(l, step, expect);
      if (res.kind === 'ok') {
        await this.after(l, step, res, true);
        if (step.transition && isTerminal(step.transition.to)) return;
        return this.advance(key.runId, false, this.local(l, step, res));
      }
      if (res.kind === 'illegal' || res.kind === 'missing') return;
      l = await this.load(key.runId);
    }
  }

  /** execute runs the executor with the node's context, its timeout and the run's stop as the abort signal. */
  private async execute(exec: NodeExecutor, l: Loaded, key: NodeKey, rec: NodeRecord): Promise<NodeOutcome> {
    const { snap } = l;
    const node = snap.graph.nodes.get(key.nodeId)!;
    const ac = new AbortController();
    const set = this.inflight.get(key.runId) ?? new Set();
    set.add(ac);
    this.inflight.set(key.runId, set);
    const timeoutMs = node.timeout ? parseDuration(node.timeout) ?? 0 : 0;
    const signal = timeoutMs > 0 ? AbortSignal.any([ac.signal, AbortSignal.timeout(timeoutMs)]) : ac.signal;
    let reported = 0;
    const scope: Record<string, unknown> = { ...scopeOf(snap, key.nodeId, key.itemIndex, key.generation), revision: rec.revision, feedback: rec.feedback ?? null };
    const ctx: NodeContext = {
      run: runRefFromHash(l.hash), key, definition: snap.def, config: snap.run.config, node, attempt: rec.attempt, revision: rec.revision,
      feedback: rec.feedback, item: scope.item ?? undefined, inputs: snap.run.inputs, upstream: upstreamResults(snap, key.nodeId, key.itemIndex, key.generation),
      scope, signal, ...(rec.approved_digest !== undefined ? { approval: { decision: 'approve' as const, gate_id: key.itemIndex >= 0 ? `${key.nodeId}[${key.itemIndex}]` : key.nodeId, input_digest: rec.approved_digest } } : {}),
      reportTokens: async (n) => {
        const t = Math.max(0, Math.floor(n));
        if (!t) return;
        reported += t;
        await this.o.store.step(key.runId, { expect: { not_status: TERMINAL }, incr: { tokens_used: t }, set: { touched_ms: String(Date.now()) } });
      },
      emit: async (kind, payload) => {
        await this.o.store.step(key.runId, { expect: { not_status: TERMINAL }, events: [[kind, payloadJson({ ...payload, node_id: key.nodeId, generation: key.generation, item_index: key.itemIndex })]] });
      },
    };
    try {
      const aborted = new Promise<never>((_, reject) => {
        if (signal.aborted) reject(signal.reason);
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
      aborted.catch(() => undefined);
      const out = await Promise.race([exec.run(ctx), aborted]);
      return { ...out, tokens: Math.max(0, (out.tokens ?? 0) - reported) };
    } catch (err) {
      if (signal.aborted && !ac.signal.aborted) return { outcome: 'failed', error: `timed out after ${node.timeout}` };
      return { outcome: 'failed', error: (err as Error)?.message ?? String(err) };
    } finally {
      set.delete(ac);
      if (!set.size) this.inflight.delete(key.runId);
    }
  }

  /** checkAborts aborts the attempts of runs that ended (stopped, halted) while they ran. */
  private async checkAborts(): Promise<void> {
    const ids = [...this.inflight.keys()];
    if (!ids.length) return;
    const sts = await this.o.store.statuses(ids);
    ids.forEach((id, i) => {
      if (sts[i] === '' || isTerminal(sts[i])) for (const ac of this.inflight.get(id) ?? []) ac.abort(new Error(`run ${sts[i] || 'gone'}`));
    });
  }

  /** sweep is the watchdog: it plans, deeply, every live run nothing touched for `watchdogMs`, and prunes ended ones from the live set. */
  private async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      const now = Date.now();
      const idle = this.settings.watchdogMs;
      const ids = await this.o.store.dueLive(now, 200);
      if (!ids.length) return;
      await this.o.store.lookLater(ids, now + idle);
      // NOTE: one command per run (each its own tag: a cluster refuses a pipeline across slots), all in flight at once.
      const rows = await Promise.all(ids.map((id) => this.o.store.redis.hmget(this.o.store.keys.run(id), 'status', 'touched_ms')));
      const gone: string[] = [];
      for (const [i, id] of ids.entries()) {
        const [status, touched] = rows[i];
        if (!status || isTerminal(status)) { gone.push(id); continue; }
        const t = Number(touched ?? 0);
        if (now - t < idle) { await this.o.store.lookLater([id], t + idle); continue; }
        await this.advance(id, true).catch((err) => this.o.logger.warn({ err: (err as Error).message, loop_run_id: id }, 'watchdog could not plan a loop run'));
      }
      await this.o.store.ended(gone);
    } finally {
      this.sweeping = false;
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Starting runs

  /**
   * startRun starts a run of a workspace's loop (201 `{run}`): its definition as it is now is the run's executed
   * definition. A run-loop child (`parent_node`) checks its ancestry: at most 8 deep, and no loop in its own
   * ancestry. `dry` answers the resolved plan and writes nothing. A `run_id` already taken answers that run.
   */
  async startRun(req: StartRunRequest, opts: { dry?: boolean } = {}): Promise<LoopRun> {
    return (await this.start(req, opts)) as LoopRun;
  }

  async start(req: StartRunRequest, opts: { dry?: boolean } = {}): Promise<LoopRun | DryRun> {
    const wsId = req.workspace_id;
    const rec = await this.o.definitions.record(wsId, req.loop_name);
    const def = rec.spec;
    const config = effectiveConfig(def, checkConfig(req.config_overrides, 'config_overrides'));
    checkNetworkParticipation(req.network_participation, 'network_participation');
    const inputs = resolveInputs(def, req.inputs);
    let ancestry = [req.loop_name];
    // NOTE: a child run acts for the agent session its parent acted for, so a run-loop node cannot shed its
    // starter's tool policy by starting another loop.
    let agentSession = req.started_by_kind === 'agent_session' ? req.started_by_ref ?? '' : '';
    if (req.parent_loop_run_id) {
      const parent = await this.o.store.readRun(req.parent_loop_run_id);
      // NOTE: a run of another workspace answers as one that does not exist (its id says nothing to this caller).
      if (!parent || parent.workspace_id !== wsId) throw new NotFoundError(`parent loop run ${req.parent_loop_run_id} does not exist`, 'loop_run_not_found', { parent_loop_run_id: req.parent_loop_run_id });
      const up = runRefFromHash(parent).ancestry;
      if (up.includes(req.loop_name)) {
        throw new ValidationError(`loop ${req.loop_name} is already in its own ancestry (${up.join(' → ')})`, 'loop_ancestry_cycle', { ancestry: up, loop_name: req.loop_name });
      }
      ancestry = [...up, req.loop_name];
      agentSession ||= agentSessionOf(parent);
      if (ancestry.length > LOOP_LIMITS.ancestryDepth) {
        throw new ValidationError(`run-loop ancestry would be ${ancestry.length} deep; at most ${LOOP_LIMITS.ancestryDepth}`, 'loop_ancestry_too_deep', { ancestry, max: LOOP_LIMITS.ancestryDepth });
      }
    }
    const network = {
      mode: req.network_participation?.mode ?? def.network_participation?.mode ?? 'local',
      source: req.network_participation?.mode ? 'explicit_request' : def.network_participation?.mode ? 'loop_definition' : 'explicit_request',
      version: 'network-participation/v1',
    };
    if (opts.dry) {
      const graph = compileGraph(def);
      return {
        loop_name: req.loop_name, resolved_inputs: inputs, generation: 1,
        nodes: graph.order.map((id) => { const n = graph.nodes.get(id)!; return { id, class: n.class ?? (n.kind === 'gate' ? 'control' : 'action'), kind: n.kind, depends_on: graph.upstream.get(id)! }; }),
        contract: def.contract ?? {}, effective_config: config, resolved_network_participation: network,
      };
    }
    const id = req.run_id ?? randomUUID();
    const existing = await this.o.store.readRun(id);
    if (existing) return runFromHash(existing);
    const now = new Date();
    const serial = def.concurrency === 'serial' && (await this.liveRunsOf(wsId, req.loop_name)).length > 0;
    const run: Record<string, string> = {
      id, workspace_id: wsId, loop_name: req.loop_name, status: 'queued', generation: serial ? '0' : '1', active_gate_id: '',
      budget_approval_seq: '0', budget_on_exceeded: config.budget_on_exceeded, budget_tokens: String(config.budget_tokens), budget_wall_sec: String(config.budget_wall_sec),
      tokens_used: '0', iteration_cap: String(config.iteration_cap), consecutive_failures: '0', created_at: now.toISOString(),
      started_at: serial ? '' : now.toISOString(), started_ms: String(now.getTime()), last_progress_at: '',
      definition_digest: createHash('sha256').update(canonicalJson(def)).digest('hex'), definition_version: String(rec.version),
      inputs: JSON.stringify(inputs), parent_loop_run_id: req.parent_loop_run_id ?? '', parent_node: req.parent_node ? JSON.stringify(req.parent_node) : '',
      pause_requested: '0', next_generation_requested: '0', reattempt_strategy: config.reattempt_strategy, resolved_network_participation: JSON.stringify(network),
      start_metadata: JSON.stringify(req.start_metadata ?? {}), started_by_kind: req.started_by_kind ?? 'operator', started_by_ref: req.started_by_ref ?? '',
      started_origin_kind: req.started_origin_kind ?? 'catalog', started_origin_ref: req.started_origin_ref ?? '',
      agent_session_id: agentSession, config: JSON.stringify(config), ancestry: JSON.stringify(ancestry), event_seq: '0', updated_at: now.toISOString(), touched_ms: String(now.getTime()),
    };
    await this.o.store.index(wsId, id, now.getTime(), now.getTime() + this.settings.watchdogMs);
    const res = await this.o.store.step(id, {
      create: { run, def: JSON.stringify(def) },
      ...(serial ? {} : { transition: { to: 'running', cause: 'start', reason: `started by ${run.started_by_kind}${run.started_by_ref ? ` ${run.started_by_ref}` : ''}` } }),
      events: serial ? [] : [['generation_started', payloadJson({ generation: 1, reason: 'start' })]],
    });
    if (res.kind === 'missing') return runFromHash((await this.o.store.readRun(id))!);
    if (res.kind !== 'ok') throw new Error(`creating loop run ${id} answered ${res.kind}`);
    if (this.o.bus) {
      await this.o.bus.publishMany(loopBusEvents({ id, workspace_id: wsId, loop_name: req.loop_name }, '', serial ? 'queued' : 'running', 'start', '', true))
        .catch((err) => this.o.logger.warn({ err: (err as Error).message }, 'loop bus publish failed'));
    }
    if (!serial) await this.advance(id);
    return runFromHash((await this.o.store.readRun(id))!);
  }

  /** liveRunsOf lists the live run ids of a loop in a workspace (the most recent 1000 runs of the workspace are looked at). */
  private async liveRunsOf(wsId: string, loopName: string): Promise<{ id: string; created: string; status: string }[]> {
    const ids = await this.o.store.runIds(wsId, 1000);
    const runs = await this.o.store.readRuns(ids);
    return runs.filter((h): h is Record<string, string> => !!h && h.loop_name === loopName && !isTerminal(h.status)).map((h) => ({ id: h.id, created: h.created_at, status: h.status }));
  }

  /** promote starts the oldest queued run of a serial loop once no other run of it is live (cause promote). */
  private async promote(wsId: string, loopName: string): Promise<void> {
    const live = await this.liveRunsOf(wsId, loopName);
    if (live.some((r) => r.status !== 'queued')) return;
    const next = live.filter((r) => r.status === 'queued').sort((a, b) => a.created.localeCompare(b.created))[0];
    if (!next) return;
    const now = new Date();
    const res = await this.o.store.step(next.id, {
      expect: { status: ['queued'] }, transition: { to: 'running', cause: 'promote', reason: 'the previous run of this serial loop ended' },
      set: { generation: '1', started_at: now.toISOString(), started_ms: String(now.getTime()), touched_ms: String(now.getTime()) },
      events: [['generation_started', payloadJson({ generation: 1, reason: 'start' })]],
    });
    if (res.kind === 'ok') await this.advance(next.id);
  }

  // -------------------------------------------------------------------------------------------------------------
  // Controls

  private async mustLoad(runId: string, wsId?: string): Promise<Loaded> {
    const l = await this.load(runId);
    if (!l || (wsId !== undefined && l.hash.workspace_id !== wsId)) throw new NotFoundError(`loop run ${runId} does not exist${wsId ? ` in workspace ${wsId}` : ''}`, 'loop_run_not_found', { run_id: runId });
    return l;
  }

  /** stopRun ends a live run `failed` (cause operator_stop); 409 `terminal_run` when it already ended. */
  async stopRun(runId: string, reason = 'stopped by an operator', wsId?: string): Promise<LoopRun> {
    for (let i = 0; i < 20; i++) {
      const l = await this.mustLoad(runId, wsId);
      const st = l.snap.run.status;
      if (isTerminal(st)) throw new ConflictError(`loop run ${runId} already ended ${st}`, 'terminal_run', { run_id: runId, status: st });
      const step: Step = { writes: new Map(), events: [], set: { active_gate_id: '' }, incr: {}, enqueue: [], transition: { to: 'failed', cause: 'operator_stop', reason } };
      const res = await this.apply(l, step, { status: [st] });
      if (res.kind === 'ok') {
        await this.after(l, step, res, true);
        return runFromHash((await this.o.store.readRun(runId))!);
      }
    }
    throw new ConflictError(`loop run ${runId} kept changing; try again`, 'concurrent_change', { run_id: runId });
  }

  /** pauseRun asks a running run to pause at its next generation boundary (idempotent); 409 unless running. */
  async pauseRun(runId: string, wsId?: string): Promise<void> {
    const l = await this.mustLoad(runId, wsId);
    const st = l.snap.run.status;
    if (st !== 'running') throw new ConflictError(`loop run ${runId} is ${st}; only a running run pauses`, 'run_not_running', { run_id: runId, status: st });
    const res = await this.o.store.step(runId, { expect: { status: ['running'] }, set: { pause_requested: '1', touched_ms: String(Date.now()) } });
    if (res.kind !== 'ok') throw new ConflictError(`loop run ${runId} changed while pausing; it is ${res.kind === 'expectation' ? res.actual : 'gone'}`, 'run_not_running', { run_id: runId });
  }

  /** resumeRun clears a pause request, or runs a paused run again (cause operator_resume); 409 otherwise. */
  async resumeRun(runId: string, wsId?: string): Promise<void> {
    const l = await this.mustLoad(runId, wsId);
    const st = l.snap.run.status;
    if (st === 'running') {
      await this.o.store.step(runId, { expect: { status: ['running'] }, set: { pause_requested: '0' } });
      return;
    }
    if (st !== 'paused') throw new ConflictError(`loop run ${runId} is ${st}; only a paused (or pausing) run resumes`, 'run_not_paused', { run_id: runId, status: st });
    const step: Step = { writes: new Map(), events: [], set: { pause_requested: '0' }, incr: {}, enqueue: [], transition: { to: 'running', cause: 'operator_resume', reason: 'resumed by an operator' } };
    const res = await this.apply(l, step, { status: ['paused'] });
    if (res.kind !== 'ok') throw new ConflictError(`loop run ${runId} changed while resuming`, 'concurrent_change', { run_id: runId });
    await this.after(l, step, res, true);
    await this.advance(runId);
  }

  /**
   * approve decides the gate a run is parked on: the run must be `needs-approval` with that
   * `active_gate_id` (409 otherwise); decision approve, request_changes or reject (422 otherwise). With
   * `operatorOnlyToolCalls`, approving a tool call that waits for approval is refused (403): an agent deciding it would
   * grant itself, through the run, a call its own policy holds for an operator's approval.
   */
  async approve(runId: string, gateId: string, decision: string, wsId?: string, opts: { operatorOnlyToolCalls?: boolean } = {}): Promise<void> {
    if (!(APPROVAL_DECISIONS as readonly string[]).includes(decision)) {
      throw new ValidationError(`decision must be one of ${APPROVAL_DECISIONS.join(', ')}`, 'invalid_body', { decision: `must be one of ${APPROVAL_DECISIONS.join(', ')}` });
    }
    const l = await this.mustLoad(runId, wsId);
    const { status, active_gate_id } = l.snap.run;
    if (status !== 'needs-approval') throw new ConflictError(`loop run ${runId} is ${status}, not waiting for an approval`, 'run_not_awaiting_approval', { run_id: runId, status });
    if (active_gate_id !== gateId) throw new ConflictError(`loop run ${runId} waits on gate "${active_gate_id}", not "${gateId}"`, 'gate_mismatch', { run_id: runId, active_gate_id });
    if (opts.operatorOnlyToolCalls && decision === 'approve' && gateId !== BUDGET_GATE) {
      const { nodeId, itemIndex } = parseGateId(gateId);
      const wait = l.snap.nodes.get(fieldOf(l.snap.run.generation, nodeId, itemIndex))?.wait;
      if (wait?.kind === 'approval' && (wait.detail as { rerun?: boolean } | undefined)?.rerun) {
        throw new ForbiddenError(`gate "${gateId}" waits for a tool call's approval, which only an operator gives`, 'tool_approval_operator_only', { run_id: runId, gate_id: gateId });
      }
    }
    l.snap.now = Date.now();
    const step = approvalStep(l.snap, gateId, decision as ApprovalDecision);
    if (typeof step === 'string') throw new ConflictError(step, 'gate_not_waiting', { gate_id: gateId });
    const res = await this.apply(l, step, { status: ['needs-approval'], active_gate_id: gateId, generation: l.snap.run.generation });
    if (res.kind !== 'ok') throw new ConflictError(`loop run ${runId} changed while deciding gate ${gateId}; read it again`, 'concurrent_change', { run_id: runId });
    await this.after(l, step, res, true);
    if (step.transition?.to === 'running') await this.advance(runId);
  }

  /** completeWaiting ends a waiting node with an outcome, once (false when it is no longer waiting), and plans the run. */
  async completeWaiting(key: NodeKey, out: Omit<NodeOutcome, 'wait'> & { outcome: NodeOutcomeKind }): Promise<boolean> {
    const f = keyField(key);
    for (let i = 0; i < 20; i++) {
      const l = await this.load(key.runId);
      const rec = l?.snap.nodes.get(f);
      if (!l || !rec || rec.state !== 'waiting' || isTerminal(l.snap.run.status)) return false;
      const next = completeRecord(rec, out, Date.now());
      const kind = out.outcome === 'succeeded' ? 'node_succeeded' : out.outcome === 'failed' ? 'node_failed' : 'node_skipped';
      const res = await this.o.store.step(key.runId, {
        expect: { not_status: TERMINAL, generation: key.generation }, nodes: [[f, rec.v, serializeRecord(next)]],
        events: [[kind, payloadJson({ generation: key.generation, node_id: key.nodeId, item_index: key.itemIndex, attempt: rec.attempt, error: out.error ?? '' })]],
        incr: out.tokens ? { tokens_used: Math.floor(out.tokens) } : undefined, set: { touched_ms: String(Date.now()) },
      });
      if (res.kind === 'ok') { await this.advance(key.runId); return true; }
      if (res.kind === 'missing') return false;
    }
    return false;
  }

  /** completeChild tells a parent's waiting run-loop node that its child run ended. */
  private async completeChild(parent: NodeKey, childId: string, status: string): Promise<void> {
    const l = await this.load(parent.runId);
    const rec = l?.snap.nodes.get(keyField(parent));
    if (!rec || rec.state !== 'waiting' || rec.wait?.ref !== childId) return;
    const ok = status === 'done' || status === 'no-op';
    await this.completeWaiting(parent, { outcome: ok ? 'succeeded' : 'failed', output: { child_loop_run_id: childId, status }, error: ok ? undefined : `child loop run ${childId} ended ${status}` });
  }

  /** getRun reads a run (LoopEngineControl). */
  async getRun(runId: string): Promise<LoopRun | undefined> {
    const h = await this.o.store.readRun(runId);
    return h ? runFromHash(h) : undefined;
  }

  /** nodeRecords lists a run's node records, oldest generation first, in graph order. */
  async nodeRecords(runId: string): Promise<NodeRecord[]> {
    const l = await this.load(runId);
    if (!l) return [];
    const pos = new Map(l.snap.graph.order.map((id, i) => [id, i]));
    return [...l.snap.nodes.values()].sort((a, b) => a.generation - b.generation || (pos.get(a.node_id)! - pos.get(b.node_id)!) || a.item_index - b.item_index);
  }

  /** isNodeDone reports whether a node execution is terminal (tests, tools). */
  static isDone(r: NodeRecord | undefined): boolean { return isNodeTerminal(r?.state); }
}

/**
 * resolveInputs fills a run's inputs from the definition's declarations: given values, then defaults; a required
 * input missing, a value of the wrong type, or an undeclared name (when the loop declares its inputs) is a 422
 * naming each.
 */
export function resolveInputs(def: LoopDefinition, given: unknown): Record<string, unknown> {
  if (given !== undefined && (given === null || typeof given !== 'object' || Array.isArray(given))) {
    throw new ValidationError('inputs must be an object', 'invalid_body', { inputs: 'must be an object' });
  }
  const inputs = { ...((given as Record<string, unknown>) ?? {}) };
  const decl = def.inputs ?? {};
  const problems: Record<string, string> = {};
  if (Object.keys(decl).length) for (const k of Object.keys(inputs)) if (!Object.hasOwn(decl, k)) problems[`inputs.${k}`] = 'is not an input of this loop';
  for (const [k, d] of Object.entries(decl)) {
    if (!Object.hasOwn(inputs, k) && d.default !== undefined) inputs[k] = d.default;
    if (!Object.hasOwn(inputs, k)) { if (d.required) problems[`inputs.${k}`] = 'is required'; continue; }
    const v = inputs[k];
    const t = d.type;
    const ok = !t || (t === 'string' && typeof v === 'string') || (t === 'number' && typeof v === 'number') || (t === 'integer' && Number.isInteger(v))
      || (t === 'boolean' && typeof v === 'boolean') || (t === 'array' && Array.isArray(v)) || (t === 'object' && v !== null && typeof v === 'object' && !Array.isArray(v))
      || !['string', 'number', 'integer', 'boolean', 'array', 'object'].includes(t);
    if (!ok) problems[`inputs.${k}`] = `must be of type ${t}`;
  }
  if (Buffer.byteLength(JSON.stringify(inputs)) > 64 * 1024) problems.inputs = 'must be at most 64 KiB of JSON';
  if (Object.keys(problems).length) throw new ValidationError(`invalid inputs: ${Object.entries(problems).map(([k, v]) => `${k} ${v}`).join('; ')}`, 'invalid_inputs', problems);
  return inputs;
}

/**
 * endUnfinished ends, in the step that ends the run, every node execution the run leaves unfinished: a running or
 * waiting one `failed` naming the run's end, a queued one `skipped` (cause `run_ended`). NOTE: the attempt's own
 * end is refused once the run is terminal (its CAS expects a live run), so without this a stopped run showed its
 * interrupted nodes `running` for ever (no node run is left running).
 */
function endUnfinished(snap: Snapshot, step: Step, transition: NonNullable<Step['transition']>): void {
  const now = Date.now();
  const why = `the run ended ${transition.to} (${transition.cause}${transition.reason ? `: ${transition.reason}` : ''})`;
  for (const [f, r] of snap.nodes) {
    if (step.writes.has(f) || (r.state !== 'running' && r.state !== 'waiting' && r.state !== 'queued')) continue;
    const ended = r.state === 'queued'
      ? { ...completeRecord(r, { outcome: 'skipped' }, now), cause: 'run_ended' }
      : completeRecord(r, { outcome: 'failed', error: why }, now);
    step.writes.set(f, { expectV: r.v, rec: ended });
  }
}
