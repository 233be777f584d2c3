import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { Queue, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { RegistryCache } from '../../controllers/registry-controller.ts';
import { quietQueue } from '../../store/connections.ts';
import { parseBusEntry, type BusEvent, type EventBus } from '../../store/event-bus.ts';
import type { StreamEntry, StreamGroupReader } from '../../store/stream-group.ts';
import { repeatedErrors } from '../process/repeated-errors.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { HOOK_EVENTS } from './catalog.ts';
import { execute, type HookOutcome } from './executors.ts';
import { BindingIndex, inputOfBusEvent, type Binding, type HookInput } from './matcher.ts';
import type { HookMetrics, HookRuns } from './runs.ts';

/** The BullMQ queue of async hook runs, and the bus consumer group the dispatcher reads with. */
export const HOOKS_QUEUE = 'hooks';
export const HOOKS_GROUP = 'hooks';

const LEASE_MS = 5_000;
const RENEW_MS = 1_500;
const SWEEP_MS = 30_000;
/** How long an (event, binding) marker is kept: far longer than a bus page stays pending. */
const SEEN_MS = 60 * 60 * 1000;
const MAX_BACKOFF_MS = 5 * 60 * 1000;
const PAGE = 500;

/** HookDispatcherOptions configures the async side of hooks (controller role). */
export interface HookDispatcherOptions {
  /** The service's main connection (store scripts defined on it). */
  redis: Redis;
  /** A connection with maxRetriesPerRequest: null, for BullMQ. */
  bull: ConnectionOptions;
  queuePrefix: string;
  keyPrefix: string;
  bus: EventBus;
  registries: RegistryCache;
  runs: HookRuns;
  metrics: HookMetrics;
  security: SecurityPolicy;
  logger: Logger;
  dataDir: string;
  /** HOOK_TIMEOUT, HOOK_ATTEMPTS, HOOK_RETRY_BACKOFF, HOOK_CONCURRENCY. */
  defaultTimeoutMs: number;
  attempts: number;
  backoffMs: number;
  concurrency: number;
}

type HookScripts = {
  hookPush(seen: string, queue: string, event: string, ttlMs: number): Promise<number>;
  renewLease(key: string, holder: string, ttlMs: number): Promise<number>;
  releaseLease(key: string, holder: string): Promise<number>;
};

/** DrainJob names one (binding, session) group whose pending events a drain runs in order. */
interface DrainJob {
  binding: string;
  session: string;
}

/**
 * HookDispatcher runs async bindings (controller role, any number of replicas):
 * - One replica at a time (a Redis lease) reads the event bus with the consumer group `hooks`, so pages are
 *   dispatched in bus order. For each catalog event it selects the enabled async bindings in scope that match
 *   and appends the event to the pending list of its (binding, session) group, once per (event, binding)
 *   (hook-push-2.lua), then adds a `drain` job for the group on the BullMQ queue `hooks` with
 *   `deduplication: {id: group, keepLastIfActive: true}`: one drain per group at a time, and one more after it.
 *   A replica that takes the lease over first dispatches what its predecessor read but never acknowledged.
 * - Every replica runs drain jobs: a drain moves the group's oldest event to the group's processing list (LMOVE,
 *   so a killed worker's event is picked up again by the next drain) and runs the binding on it, with the
 *   binding's timeout, retrying an `error` with exponential backoff up to HOOK_ATTEMPTS; after the last attempt
 *   the run is `dead` and kept in the dead-letter list (GET /api/hooks/dead-letters). Then the next event.
 *   So the runs of one binding on one session's events happen one at a time, in bus order.
 */
export class HookDispatcher {
  private readonly queue: Queue;
  private worker?: Worker;
  private reader?: StreamGroupReader;
  private readonly index = new BindingIndex();
  private readonly holder = `${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private readonly leaseKey: string;
  private readonly groupsKey: string;
  private readonly catalog = new Set<string>(HOOK_EVENTS);
  private running = false;
  private leading = false;
  private loop?: Promise<void>;
  private sweptAt = 0;
  private wake?: () => void;

  constructor(private readonly o: HookDispatcherOptions) {
    this.queue = quietQueue(new Queue(HOOKS_QUEUE, { connection: o.bull, prefix: o.queuePrefix }));
    this.leaseKey = `${o.keyPrefix}{hooks}:lock:dispatcher`;
    this.groupsKey = `${o.keyPrefix}{hooks}:groups`;
  }

  private get scripts(): HookScripts {
    return this.o.redis as unknown as HookScripts;
  }

  private keys(g: DrainJob) {
    const tag = `${this.o.keyPrefix}{hk:${g.binding}|${g.session}}`;
    return { pending: `${tag}:q`, processing: `${tag}:p`, tries: `${tag}:tries`, seen: (eventId: string) => `${tag}:seen:${eventId}` };
  }

  async start(): Promise<void> {
    const { o } = this;
    this.worker = new Worker<DrainJob>(HOOKS_QUEUE, (job) => this.drain(job), {
      connection: o.bull, prefix: o.queuePrefix, concurrency: o.concurrency,
      // NOTE: a killed controller's drain is picked up by another worker once its lock lapses; the event it was
      // running is still at the head of the group's processing list.
      lockDuration: 10_000, stalledInterval: 5_000, maxStalledCount: 100,
    });
    this.worker.on('error', repeatedErrors.listener(o.logger, 'error', 'hook worker error'));
    this.running = true;
    this.loop = this.lead();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loop;
    await this.worker?.close();
    await this.queue.close();
  }

  /** lead takes, keeps and gives up the dispatcher lease; the holder reads the bus. */
  private async lead(): Promise<void> {
    const { o } = this;
    while (this.running) {
      try {
        if (!this.leading) {
          if ((await o.redis.set(this.leaseKey, this.holder, 'PX', LEASE_MS, 'NX')) === 'OK') {
            this.leading = true;
            await this.takeOver();
          }
        } else if ((await this.scripts.renewLease(this.leaseKey, this.holder, LEASE_MS)) !== 1) {
          o.logger.warn('hook dispatcher lease lost; another replica dispatches');
          await this.stepDown();
        } else if (Date.now() - this.sweptAt > SWEEP_MS) {
          await this.sweep();
        }
      } catch (err) {
        o.logger.warn({ err: (err as Error).message }, 'hook dispatcher lease check failed');
      }
      await new Promise<void>((r) => { const t = setTimeout(r, this.leading ? RENEW_MS : 1_000); this.wake = () => { clearTimeout(t); r(); }; });
    }
    if (this.leading) {
      await this.stepDown();
      await this.scripts.releaseLease(this.leaseKey, this.holder).catch(() => undefined);
    }
  }

  /**
   * takeOver starts reading as the one dispatcher: first the entries a previous holder read but never
   * acknowledged (oldest first, whatever their idle time), then the stream from the group's position.
   */
  private async takeOver(): Promise<void> {
    const { bus, logger } = this.o;
    try {
      await this.o.redis.xgroup('CREATE', bus.key, HOOKS_GROUP, '$', 'MKSTREAM');
    } catch (err) {
      if (!String(err).includes('BUSYGROUP')) throw err;
    }
    for (let cursor = '0-0'; ;) {
      const [next, entries] = (await this.o.redis.xautoclaim(bus.key, HOOKS_GROUP, this.holder, 0, cursor, 'COUNT', PAGE)) as [string, StreamEntry[]];
      const live = entries.filter((e) => e && e[1]);
      if (live.length) {
        await this.dispatch(live.map(parseBusEntry));
        await this.o.redis.xack(bus.key, HOOKS_GROUP, ...live.map((e) => e[0]));
      }
      if (next === '0-0') break;
      cursor = next;
    }
    // NOTE: only the events some binding is on are decoded (most events have none).
    this.reader = bus.reader(HOOKS_GROUP, logger, (events) => this.dispatch(events), async () => {
      const index = await this.bindings();
      return (t) => this.catalog.has(t) && index.has(t);
    });
    await this.reader.start();
    await this.sweep();
    logger.info('hook dispatcher leading');
  }

  private async stepDown(): Promise<void> {
    this.leading = false;
    await this.reader?.stop();
    this.reader = undefined;
  }

  /** sweep adds a drain for every group with pending events (one whose drain job was lost stays drained). */
  private async sweep(): Promise<void> {
    this.sweptAt = Date.now();
    const groups = await this.o.redis.smembers(this.groupsKey);
    if (groups.length) await this.addDrains(groups.map(splitGroup));
  }

  private async bindings(): Promise<BindingIndex> {
    const { entries } = await this.o.registries.read(['hook.binding']);
    return this.index.update(entries['hook.binding'] as Binding[]);
  }

  /**
   * dispatch queues one page of bus events for the async bindings they match. Idempotent: a redelivered page
   * queues nothing twice (hook-push-2.lua), and the drain jobs are deduplicated by group.
   */
  async dispatch(events: BusEvent[]): Promise<void> {
    const index = await this.bindings();
    const pushes: Promise<void>[] = [];
    const drains = new Map<string, DrainJob>();
    for (const ev of events) {
      if (!this.catalog.has(ev.type) || !index.has(ev.type)) continue;
      const input = inputOfBusEvent(ev);
      const chosen = index.select('async', input);
      if (!chosen.length) continue;
      const json = JSON.stringify(input);
      for (const b of chosen) {
        const g: DrainJob = { binding: b.id, session: ev.session_id || '-' };
        const id = groupId(g);
        const k = this.keys(g);
        // NOTE: a drain empties its group's list before it ends, so only a push that found the list empty (or a
        // redelivered event, whose first push may have died before its drain job was added) needs a drain job.
        pushes.push(Promise.all([this.o.redis.sadd(this.groupsKey, id), this.scripts.hookPush(k.seen(ev.id), k.pending, json, SEEN_MS)]).then(([, n]) => {
          if (n <= 1) drains.set(id, g);
        }));
        this.o.metrics.dispatched.inc({ event: ev.type });
      }
    }
    if (!pushes.length) return;
    await Promise.all(pushes);
    if (drains.size) await this.addDrains([...drains.values()]);
  }

  private async addDrains(groups: DrainJob[]): Promise<void> {
    const jobs = groups.map((g) => ({
      name: 'drain', data: g,
      opts: { deduplication: { id: groupId(g), keepLastIfActive: true }, attempts: 5, backoff: { type: 'exponential' as const, delay: 1_000 }, removeOnComplete: true, removeOnFail: 1000 },
    }));
    if (jobs.length === 1) await this.queue.add(jobs[0].name, jobs[0].data, jobs[0].opts);
    else await this.queue.addBulk(jobs);
  }

  /** drain runs a group's pending events in order, one at a time, until none is left. */
  private async drain(job: Job<DrainJob>): Promise<void> {
    const { redis, runs, attempts, backoffMs } = this.o;
    const g = job.data;
    const k = this.keys(g);
    for (;;) {
      let raw = await redis.lindex(k.processing, 0);
      raw ??= await redis.lmove(k.pending, k.processing, 'LEFT', 'RIGHT');
      if (raw === null) {
        await redis.srem(this.groupsKey, groupId(g));
        // NOTE: an event pushed between the empty LMOVE and the SREM has its own drain job queued after this one.
        return;
      }
      const input = JSON.parse(raw) as HookInput;
      const eventId = String(input.event_id ?? '');
      const b = (await this.bindings()).get(g.binding);
      if (!b || b.spec.enabled === false || b.spec.mode !== 'async' || b.spec.event !== input.event) {
        // The binding was deleted, disabled or changed since the event was queued: the event is dropped for it.
        await redis.multi().lpop(k.processing).hdel(k.tries, eventId).exec();
        continue;
      }
      const attempt = await redis.hincrby(k.tries, eventId, 1);
      // NOTE: a native hook's start is announced with its completion, in one write (HookRuns.start).
      const native = b.spec.executor_kind === 'native';
      const started = runs.start(b, input, 'async', attempt, native);
      const out = await this.run(b, input);
      const last = attempt >= attempts;
      if (out.decision === 'error' && !last) {
        await runs.complete(b, input, 'async', attempt, started, out, out.decision, native);
        await new Promise((r) => setTimeout(r, Math.min(MAX_BACKOFF_MS, backoffMs * 2 ** (attempt - 1))));
        continue;
      }
      const run = await runs.complete(b, input, 'async', attempt, started, out, out.decision === 'error' ? 'dead' : out.decision, native);
      if (run.outcome === 'dead') await runs.deadLetter(run, input);
      await redis.multi().lpop(k.processing).hdel(k.tries, eventId).exec();
    }
  }

  private run(b: Binding, input: HookInput): Promise<HookOutcome> {
    const { o } = this;
    return execute(b, input, { defaultTimeoutMs: o.defaultTimeoutMs, cwd: o.dataDir, security: o.security, logger: o.logger, publicInput: input });
  }
}

const groupId = (g: DrainJob) => `${g.binding}|${g.session}`;
function splitGroup(id: string): DrainJob {
  const at = id.lastIndexOf('|');
  return { binding: id.slice(0, at), session: id.slice(at + 1) };
}
