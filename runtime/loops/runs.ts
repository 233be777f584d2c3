import type { Redis } from 'ioredis';
import { InputError, NotFoundError, ValidationError } from '../../store/errors.ts';
import type { LoopStore, StoredEvent } from '../../store/loop-store.ts';
import type { LoopEngine } from './engine.ts';
import { outputRef, type NodeRecord } from './planner.ts';
import { runFromHash } from './records.ts';
import { isTerminal, LOOP_RUN_STATUSES, type LoopDefinition, type LoopRun, type LoopRunEvent } from './types.ts';

/** RunFilter is the run list's query (spec endpoints "Loop runs"). */
export interface RunFilter {
  loop?: string;
  status?: string;
  origin?: string;
  origin_session?: string;
  live?: boolean;
  limit: number;
}

/** LoopAggregates counts the runs a filter matches (spec `LoopAggregates`). */
export interface LoopAggregates { failed: number; live: number; succeeded: number; terminal: number; total: number }

/** SCAN_LIMIT is how many of a workspace's most recent runs a list looks at (its aggregates count those). */
export const SCAN_LIMIT = 10_000;

/** LoopRunDetail is GET /loop-runs/{id} (spec `LoopRunDetail`). */
export interface LoopRunDetail {
  run: LoopRun;
  executed_definition: LoopDefinition;
  generations: { generation: number; outputs: { child_loop_run_id: string; generation: number; item_index: number; node_id: string; output_ref: string; status: string; task_run_id: string; output?: unknown; error?: string; attempt: number; revision: number }[] }[];
  watch_events: { cursors: Record<string, number>; last_wake_at: string; subscriptions: { filter: string; kind: string }[] };
}

/** toEvent is a stored row as the events route sends it (spec concepts "Loop run events"). */
export function toEvent(run: { id: string; workspace_id: string }, e: StoredEvent): LoopRunEvent {
  let payload: Record<string, unknown> = {};
  try { payload = JSON.parse(e.payload) as Record<string, unknown>; } catch { /* a row is written by the step script from JSON */ }
  return { id: `${run.id}-${e.seq}`, seq: e.seq, at: e.at, kind: e.kind, loop_run_id: run.id, workspace_id: run.workspace_id, payload };
}

/**
 * LoopRunViews answers the read routes of runs: the list with aggregates and filters, the detail, the turns (every
 * node execution), and the event stream (replay after a sequence, then tail, ending after the terminal
 * status_changed).
 */
export class LoopRunViews {
  constructor(private readonly o: { store: LoopStore; engine: LoopEngine; redis: Redis }) {}

  async list(wsId: string, f: RunFilter): Promise<{ aggregates: LoopAggregates; runs: LoopRun[] }> {
    if (f.status !== undefined && !(LOOP_RUN_STATUSES as readonly string[]).includes(f.status)) {
      throw new ValidationError(`status must be one of ${LOOP_RUN_STATUSES.join(', ')}`, 'invalid_query', { status: `must be one of ${LOOP_RUN_STATUSES.join(', ')}` });
    }
    const ids = await this.o.store.runIds(wsId, SCAN_LIMIT);
    const hashes = await this.o.store.readRuns(ids);
    const gone = ids.filter((_, i) => !hashes[i]);
    if (gone.length) await this.o.store.unindex(wsId, gone);
    const agg: LoopAggregates = { failed: 0, live: 0, succeeded: 0, terminal: 0, total: 0 };
    const runs: LoopRun[] = [];
    for (const h of hashes) {
      if (!h) continue;
      if (f.loop !== undefined && h.loop_name !== f.loop) continue;
      if (f.origin !== undefined && h.started_origin_kind !== f.origin) continue;
      if (f.origin_session !== undefined && !(h.started_origin_kind === 'session' && h.started_origin_ref === f.origin_session)) continue;
      const term = isTerminal(h.status);
      if (f.live !== undefined && f.live === term) continue;
      if (f.status !== undefined && h.status !== f.status) continue;
      agg.total++;
      if (term) {
        agg.terminal++;
        if (h.status === 'done' || h.status === 'no-op') agg.succeeded++;
        else agg.failed++;
      } else agg.live++;
      if (runs.length < f.limit) runs.push(runFromHash(h));
    }
    return { aggregates: agg, runs };
  }

  private async run(wsId: string, runId: string): Promise<Record<string, string>> {
    const h = await this.o.store.readRun(runId);
    if (!h || h.workspace_id !== wsId) throw new NotFoundError(`loop run ${runId} does not exist in workspace ${wsId}`, 'loop_run_not_found', { run_id: runId });
    return h;
  }

  async detail(wsId: string, runId: string): Promise<LoopRunDetail> {
    const h = await this.run(wsId, runId);
    const def = JSON.parse((await this.o.store.readDef(runId)) ?? '{}') as LoopDefinition;
    const recs = await this.o.engine.nodeRecords(runId);
    const byGen = new Map<number, LoopRunDetail['generations'][number]['outputs']>();
    for (const r of recs) {
      const list = byGen.get(r.generation) ?? [];
      list.push(outputOf(runId, r));
      byGen.set(r.generation, list);
    }
    const watch = def.graph?.nodes?.filter((n) => n.kind === 'watch-events').flatMap((n) => (n.events ?? []).map((e) => ({ kind: e.kind, filter: e.filter ?? '' }))) ?? [];
    return {
      run: runFromHash(h), executed_definition: def,
      generations: [...byGen].sort((a, b) => a[0] - b[0]).map(([generation, outputs]) => ({ generation, outputs })),
      watch_events: { cursors: {}, last_wake_at: '', subscriptions: watch },
    };
  }

  /** turns lists every node execution of a run with its attempt, revision, times and tokens, oldest first. */
  async turns(wsId: string, runId: string): Promise<{ turns: Record<string, unknown>[] }> {
    await this.run(wsId, runId);
    const recs = await this.o.engine.nodeRecords(runId);
    return {
      turns: recs.map((r) => ({
        generation: r.generation, node_id: r.node_id, item_index: r.item_index, status: r.state, attempt: r.attempt, revision: r.revision,
        tokens: r.tokens, queued_at: r.queued_at ?? '', started_at: r.started_at ?? '', ended_at: r.ended_at ?? '', error: r.error ?? '', cause: r.cause ?? '',
        ...(r.verdict ? { verdict: r.verdict.outcome } : {}), ...(r.wait ? { wait: r.wait } : {}), ...(r.child_loop_run_id ? { child_loop_run_id: r.child_loop_run_id } : {}),
      })),
    };
  }

  /**
   * events checks the run and the resume point (the larger of Last-Event-ID and after_sequence; 400 when either is
   * not a number, 422 when it is negative), then answers a frame source: every event after that point in order, live ones as they are
   * appended, ending after the terminal `status_changed`. NOTE: the tail blocks (XREAD) on its own connection.
   */
  async events(wsId: string, runId: string, lastEventId: string | undefined, afterSequence: string | undefined): Promise<(signal: AbortSignal) => AsyncIterable<{ id: number; event: string; data: LoopRunEvent }>> {
    const h = await this.run(wsId, runId);
    const parse = (v: string | undefined, name: string) => {
      if (v === undefined || v === '') return 0;
      // NOTE: read as a number, "-5" is well-formed but no sequence (they start at 1): refused, not read as 5.
      if (/^\s*-\d+\s*$/.test(v)) throw new ValidationError(`${name} must be a sequence number (0 or more), not ${v.trim()}`, 'invalid_sequence', { [name]: 'must be 0 or more' });
      // NOTE: a frame's id is its sequence; the `<run id>-<seq>` form of an event's `id` field is taken too.
      const m = /^(?:.*-)?(\d{1,15})$/.exec(v.trim());
      if (!m) throw new InputError(`${name} must be a sequence number`, 'invalid_last_event_id', { [name]: v });
      return Number(m[1]);
    };
    const after = Math.max(parse(lastEventId, 'Last-Event-ID'), parse(afterSequence, 'after_sequence'));
    const { store } = this.o;
    const run = { id: runId, workspace_id: h.workspace_id };
    const redis = this.o.redis;
    return async function* frames(signal: AbortSignal) {
      let last = after;
      const isEnd = (e: StoredEvent) => e.kind === 'status_changed' && isTerminal(String((JSON.parse(e.payload) as { status?: string }).status ?? ''));
      // NOTE: read before the replay: the terminal status and its status_changed row are written in one step, so a
      // run already ended has every row of it in the replay. A resume point past that row (a client reconnecting
      // after the last frame, as EventSource does) then ends the stream instead of waiting for a row never written.
      const ended = isTerminal(await store.status(runId));
      for (;;) {
        const page = await store.events(runId, last, 500);
        for (const e of page) {
          last = e.seq;
          yield { id: e.seq, event: e.kind, data: toEvent(run, e) };
          if (isEnd(e)) return;
        }
        if (page.length < 500) break;
      }
      if (ended) return;
      const conn = redis.duplicate({ lazyConnect: false, maxRetriesPerRequest: null });
      const close = () => conn.disconnect();
      signal.addEventListener('abort', close, { once: true });
      try {
        while (!signal.aborted) {
          let page: StoredEvent[];
          try {
            page = await store.waitEvents(conn, runId, last, 5000, 500);
          } catch (err) {
            if (signal.aborted) return;
            throw err;
          }
          for (const e of page) {
            last = e.seq;
            yield { id: e.seq, event: e.kind, data: toEvent(run, e) };
            if (isEnd(e)) return;
          }
          // NOTE: a run that expired (retention) while followed has no terminal row left to send.
          if (!page.length && !(await store.status(runId))) return;
        }
      } finally {
        signal.removeEventListener('abort', close);
        conn.disconnect();
      }
    };
  }
}

function outputOf(runId: string, r: NodeRecord) {
  return {
    child_loop_run_id: r.child_loop_run_id ?? '', generation: r.generation, item_index: r.item_index, node_id: r.node_id,
    output_ref: outputRef(runId, { runId, generation: r.generation, nodeId: r.node_id, itemIndex: r.item_index }), status: r.state, task_run_id: '',
    output: r.output ?? null, attempt: r.attempt, revision: r.revision, ...(r.error ? { error: r.error } : {}),
  };
}
