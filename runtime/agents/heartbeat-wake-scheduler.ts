import { Queue, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { canonicalJson } from '../../store/canonical.ts';
import { quietQueue } from '../../store/connections.ts';
import type { BusEvent, EventBus } from '../../store/event-bus.ts';
import type { StreamGroupReader } from '../../store/stream-group.ts';
import type { WorkspaceStore } from '../../store/workspace-store.ts';
import { repeatedErrors } from '../process/repeated-errors.ts';
import type { HeartbeatWakes, WakeTarget } from './heartbeat-wakes.ts';

/** HEARTBEAT_QUEUE is the BullMQ queue whose job schedulers tick heartbeat wakes. */
export const HEARTBEAT_QUEUE = 'heartbeat';
const SCHEDULER_PREFIX = 'hb:';
/** How long a bus-triggered plan waits for the changed record to reach its registry (then plans anyway). */
const PROJECTION_WAIT_MS = 10_000;
/**
 * CHANGE_SPACING_MS spaces the reconciles that record changes start: each reads the whole agent registry, so
 * under a burst of writes one reconcile covers every change that arrived meanwhile (the bus pages grow).
 */
const CHANGE_SPACING_MS = 250;
/** The record kinds whose changes can start, stop or re-time a heartbeat. */
const KINDS = new Set(['agent', 'agent.heartbeat', 'bundle.activation']);

interface TickData { agent_name: string; workspace_id: string }

const schedulerId = (t: { agent_name: string; workspace_id: string }) => `${SCHEDULER_PREFIX}${t.workspace_id}:${t.agent_name}`;

/**
 * planSchedulers compares the wanted heartbeat schedulers with the queue's: which to upsert (new, or a changed
 * interval) and which to remove. NOTE: an unchanged scheduler is left alone, since upserting an `every`
 * scheduler again would fire it again at once.
 */
export function planSchedulers(want: WakeTarget[], have: { key: string; every?: number; data?: unknown }[]): { upsert: WakeTarget[]; remove: string[] } {
  const current = new Map(have.filter((h) => h.key.startsWith(SCHEDULER_PREFIX)).map((h) => [h.key, h]));
  const wanted = new Set(want.map(schedulerId));
  const upsert = want.filter((t) => {
    const h = current.get(schedulerId(t));
    return !h || h.every !== t.every_ms || canonicalJson(h.data ?? {}) !== canonicalJson({ agent_name: t.agent_name, workspace_id: t.workspace_id });
  });
  return { upsert, remove: [...current.keys()].filter((k) => !wanted.has(k)) };
}

/**
 * HeartbeatWakeScheduler (controller role) keeps one BullMQ job scheduler per (agent, workspace) whose heartbeat
 * is active, ticking every interval, and works the ticks: each tick is one job with an id derived from the
 * scheduler and the tick time, so across any number of controller processes each tick is handled once.
 * It reconciles the schedulers at start, when an agent, agent.heartbeat or bundle.activation record changes
 * (bus `resource.applied` / `resource.deleted`), and every `resyncIntervalMs` (HEARTBEAT.md files and the
 * `heartbeat:` settings are files, not records, so only the resync sees their edits).
 */
export class HeartbeatWakeScheduler {
  private queue?: Queue;
  private worker?: Worker;
  private reader?: StreamGroupReader;
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;
  private lastRunAt = 0;
  private stopped = false;

  constructor(private readonly o: {
    wakes: HeartbeatWakes; workspaces: WorkspaceStore; bus: EventBus; connection: ConnectionOptions; prefix: string;
    resyncIntervalMs: number; logger: Logger; concurrency?: number;
  }) {}

  /** start creates the queue and its worker, reconciles once, then follows the bus and the resync timer. */
  async start(): Promise<void> {
    const { connection, prefix, logger } = this.o;
    this.queue = quietQueue(new Queue(HEARTBEAT_QUEUE, { connection, prefix }));
    this.worker = new Worker(HEARTBEAT_QUEUE, (job: Job<TickData>) => this.tick(job), { connection, prefix, concurrency: this.o.concurrency ?? 8 });
    this.worker.on('error', repeatedErrors.listener(logger, 'warn', 'heartbeat: worker error'));
    this.worker.on('failed', (job, err) => logger.warn({ err: err.message, job: job?.id }, 'heartbeat: wake tick failed'));
    // NOTE: a failed first plan (logged) does not stop the process; the resync retries it.
    await this.reconcile().catch(() => undefined);
    this.reader = this.o.bus.reader('heartbeat-scheduler', logger, async (events) => {
      const changes = events.filter(relevant);
      if (!changes.length) return;
      await this.o.wakes.projected(changes.map((e) => ({ kind: String(e.data.kind), id: String(e.data.id), revision: Number(e.data.revision ?? 0) })), PROJECTION_WAIT_MS);
      const wait = this.lastRunAt + CHANGE_SPACING_MS - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await this.reconcile();
    }, () => (t) => t === 'resource.applied' || t === 'resource.deleted');
    await this.reader.start();
    this.timer = setInterval(() => void this.reconcile().catch(() => undefined), this.o.resyncIntervalMs);
    this.timer.unref();
  }

  /** stop stops following changes, lets running ticks finish, and closes the queue. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.reader?.stop();
    await this.running?.catch(() => undefined);
    await this.worker?.close();
    await this.queue?.close();
  }

  /**
   * reconcile brings the queue's schedulers to what the heartbeats want. One runs at a time per process; a call
   * during a run makes one more run after it (so a change seen mid-run is not missed).
   */
  reconcile(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          if (this.stopped) return;
          await this.reconcileOnce();
        } while (this.again);
      } catch (err) {
        this.o.logger.warn({ err: (err as Error).message }, 'heartbeat: reconcile failed; the next resync retries');
        throw err;
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }

  private async reconcileOnce(): Promise<void> {
    const queue = this.queue!;
    this.lastRunAt = Date.now();
    const [want, have] = await Promise.all([this.o.wakes.targets(), queue.getJobSchedulers(0, -1)]);
    const plan = planSchedulers(want, have.map((h) => ({ key: h.key, every: h.every === undefined ? undefined : Number(h.every), data: h.template?.data })));
    for (const t of plan.upsert) {
      await queue.upsertJobScheduler(schedulerId(t), { every: t.every_ms }, {
        name: 'wake', data: { agent_name: t.agent_name, workspace_id: t.workspace_id },
        opts: { attempts: 1, removeOnComplete: { count: 100 }, removeOnFail: { count: 100 } },
      });
    }
    for (const key of plan.remove) await queue.removeJobScheduler(key);
    if (plan.upsert.length || plan.remove.length) this.o.logger.info({ upserted: plan.upsert.map(schedulerId), removed: plan.remove }, 'heartbeat: schedulers reconciled');
  }

  /** tick handles one scheduled wake: the (agent, workspace) of its scheduler, at the tick's time. */
  private async tick(job: Job<TickData>): Promise<void> {
    const { agent_name: agentName, workspace_id: workspaceId } = job.data;
    const workspace = await this.o.workspaces.get(workspaceId);
    // NOTE: a workspace deleted since the scheduler was made: nothing to wake; the next reconcile removes it.
    if (!workspace) return void this.reconcile().catch(() => undefined);
    // NOTE: a scheduler's job is made when the tick before it runs, delayed until its own tick.
    const scheduledAt = job.timestamp + (job.opts.delay ?? 0);
    await this.o.wakes.wake({ agentName, workspace, source: 'scheduler', scheduledAt }).catch((err: Error & { code?: string }) => {
      if (err.code === 'agent_not_found') return void this.reconcile().catch(() => undefined);
      throw err;
    });
  }
}

function relevant(e: BusEvent): boolean {
  return (e.type === 'resource.applied' || e.type === 'resource.deleted') && KINDS.has(String(e.data.kind));
}
