import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import client from 'prom-client';
import type { BusEventInput, EventBus, Outcome } from '../../store/event-bus.ts';
import { defineScripts, type ScriptCommands } from '../../store/scripts.ts';
import type { HookOutcome } from './executors.ts';
import type { Binding, HookInput } from './matcher.ts';

/** RunOutcome: a hook's decision, or `dead` for an async run whose last attempt failed (dead-lettered). */
export type RunOutcome = HookOutcome['decision'] | 'dead';

/** HookRun is one recorded run of one binding on one event (GET /api/hooks/runs). */
export interface HookRun {
  id: string;
  /** The hook.binding record id, and the hook's name. */
  binding: string;
  name: string;
  event: string;
  event_id: string;
  session_id: string;
  workspace_id: string;
  mode: 'sync' | 'async';
  executor: string;
  required: boolean;
  /** 1 for the first try; async runs count their retries. */
  attempt: number;
  outcome: RunOutcome;
  /** The hook's decision reason (never its output beyond that), or why it failed. */
  reason: string;
  duration_ms: number;
  started_at: string;
  finished_at: string;
  /** The event, when the `record` built-in kept it. */
  record?: Record<string, unknown>;
}

/** DeadLetter is an async run that failed its last attempt, with the event, so an operator can look and replay. */
export interface DeadLetter {
  run: HookRun;
  input: HookInput;
  dead_at: string;
}

/** HookMetrics are the hooks' instruments, registered once per process into the service's registry. */
export class HookMetrics {
  readonly runs: client.Counter<'event' | 'mode' | 'outcome'>;
  readonly duration: client.Histogram<'mode'>;
  readonly dispatched: client.Counter<'event'>;

  constructor(registry: client.Registry) {
    this.runs = new client.Counter({
      name: 'svc_hook_runs_total', help: 'Hook runs by event, mode and outcome (allow, deny, error, dead).',
      labelNames: ['event', 'mode', 'outcome'], registers: [registry],
    });
    this.duration = new client.Histogram({
      name: 'svc_hook_run_duration_seconds', help: 'Hook run latency by mode.',
      labelNames: ['mode'], registers: [registry], buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    });
    this.dispatched = new client.Counter({
      name: 'svc_hook_async_enqueued_total', help: 'Async hook runs enqueued by the dispatcher, by event.',
      labelNames: ['event'], registers: [registry],
    });
  }
}

const OUTCOME: Record<RunOutcome, Outcome> = { allow: 'success', deny: 'warning', error: 'failure', dead: 'failure' };

/**
 * HookRuns records every run: `hook.dispatch.start` and `hook.dispatch.complete` on the event bus (binding,
 * event, outcome, duration; never a hook's output beyond its decision reason), the metrics, the newest `kept`
 * runs in one capped Redis list, and the dead letters in another.
 */
export class HookRuns {
  readonly runsKey: string;
  readonly deadKey: string;

  constructor(private readonly o: { redis: Redis; bus: EventBus; prefix: string; metrics: HookMetrics; logger: Logger; kept: number }) {
    this.runsKey = `${o.prefix}{hooks}:runs`;
    this.deadKey = `${o.prefix}{hooks}:dead`;
    defineScripts();
  }

  /**
   * start announces a run (not awaited by callers: a bus hiccup never delays a hook). With `deferred` it only notes
   * the start time: the `hook.dispatch.start` event then goes on the bus with the run's completion, in the same
   * round trip (complete's `announceStart`); for a run that ends within microseconds (a native hook) a separate
   * write would only add a socket write per gated event.
   */
  start(b: Binding, input: HookInput, mode: 'sync' | 'async', attempt: number, deferred = false): Date {
    const started = new Date();
    if (!deferred) this.o.bus.publish(startEvent(b, input, mode, attempt)).catch((err) => this.o.logger.warn({ err: (err as Error).message }, 'hook run start not published'));
    return started;
  }

  /**
   * complete records a finished run: bus event (after its `hook.dispatch.start` when `announceStart`, the start
   * deferred), metrics and the runs list.
   */
  async complete(b: Binding, input: HookInput, mode: 'sync' | 'async', attempt: number, started: Date, out: HookOutcome, outcome: RunOutcome = out.decision, announceStart = false): Promise<HookRun> {
    const run: HookRun = {
      id: `hrun-${randomBytes(8).toString('hex')}`, binding: b.id, name: b.spec.name, event: input.event, event_id: str(input.event_id),
      session_id: str(input.session_id), workspace_id: str(input.workspace_id), mode, executor: b.spec.executor_kind, required: Boolean(b.spec.required),
      attempt, outcome, reason: out.reason, duration_ms: out.duration_ms, started_at: started.toISOString(), finished_at: new Date().toISOString(),
      ...(out.record ? { record: out.record } : {}),
    };
    this.o.metrics.runs.inc({ event: run.event, mode, outcome });
    this.o.metrics.duration.observe({ mode }, out.duration_ms / 1000);
    const { redis, bus, kept } = this.o;
    try {
      await Promise.all([
        (redis as Redis & ScriptCommands).pushCapped(this.runsKey, kept, JSON.stringify(run)),
        bus.publishMany([...(announceStart ? [startEvent(b, input, mode, attempt)] : []), {
          type: 'hook.dispatch.complete', source: 'hooks', session_id: run.session_id, workspace_id: run.workspace_id, agent_name: str(input.agent_name),
          outcome: OUTCOME[outcome], summary: `hook ${run.name} on ${run.event}: ${outcome}`,
          data: { binding: run.binding, binding_name: run.name, event: run.event, event_id: run.event_id, mode, attempt, outcome, duration_ms: run.duration_ms, reason: run.reason },
        }]),
      ]);
    } catch (err) {
      this.o.logger.warn({ err: (err as Error).message, binding: b.id }, 'hook run not recorded');
    }
    return run;
  }

  /** deadLetter keeps an async run that failed its last attempt, with its event. */
  async deadLetter(run: HookRun, input: HookInput): Promise<void> {
    const entry: DeadLetter = { run, input, dead_at: new Date().toISOString() };
    await (this.o.redis as Redis & ScriptCommands).pushCapped(this.deadKey, this.o.kept, JSON.stringify(entry));
  }

  /** list returns the newest runs first, filtered by binding (record id or hook name) and event. */
  async list(q: { binding?: string; event?: string; limit: number }): Promise<HookRun[]> {
    const rows = (await this.o.redis.lrange(this.runsKey, 0, -1)).map((r) => JSON.parse(r) as HookRun);
    return rows.filter((r) => (!q.binding || r.binding === q.binding || r.name === q.binding) && (!q.event || r.event === q.event)).slice(0, q.limit);
  }

  /** deadLetters returns the newest dead letters first, filtered by binding (record id or hook name). */
  async deadLetters(q: { binding?: string; limit: number }): Promise<DeadLetter[]> {
    const rows = (await this.o.redis.lrange(this.deadKey, 0, -1)).map((r) => JSON.parse(r) as DeadLetter);
    return rows.filter((d) => !q.binding || d.run.binding === q.binding || d.run.name === q.binding).slice(0, q.limit);
  }
}

const str = (v: unknown) => (typeof v === 'string' ? v : '');

/** startEvent is the `hook.dispatch.start` bus event of a run. */
function startEvent(b: Binding, input: HookInput, mode: 'sync' | 'async', attempt: number): BusEventInput {
  return {
    type: 'hook.dispatch.start', source: 'hooks', session_id: str(input.session_id), workspace_id: str(input.workspace_id), agent_name: str(input.agent_name),
    summary: `hook ${b.spec.name} on ${input.event}`, data: { binding: b.id, binding_name: b.spec.name, event: input.event, event_id: str(input.event_id), mode, attempt },
  };
}
