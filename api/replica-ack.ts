import type { Context, Next } from 'koa';
import type { SocketMark } from '../store/connections.ts';
import { UnavailableError } from '../store/errors.ts';

/**
 * ReplicaAck confirms a request's writes: `mark` before the route runs, `wait` after it until the configured
 * replicas hold them (undefined when none is asked for; no replica when a connection was replaced in between).
 */
export interface ReplicaAck {
  mark(): SocketMark;
  wait(since: SocketMark): Promise<{ acked: number; wanted: number } | undefined>;
}

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * replicaAck makes an acknowledged write a replicated one (REDIS_MIN_REPLICAS_ACK, store/connections.ts): after a
 * mutating request succeeded, and before its answer leaves, WAIT for the replicas; short of them, the answer is a
 * 503 saying the write may have happened. NOTE: one place for every family's writes: WAIT covers every write the
 * connection sent before it, so whatever store a route used is covered. A streamed answer (a prompt's message
 * stream) has already started and is not held back: its rows are written as they stream.
 */
export function replicaAck(ack: ReplicaAck) {
  return async (ctx: Context, next: Next) => {
    if (!WRITES.has(ctx.method)) return next();
    const since = ack.mark();
    await next();
    if (ctx.status >= 300 || isStream(ctx.body)) return;
    const r = await ack.wait(since);
    if (!r || r.acked >= r.wanted) return;
    ctx.remove('Location');
    throw new UnavailableError(
      `the write was applied on the Redis master but only ${r.acked} of ${r.wanted} replicas confirmed it in time: it may or may not survive a failover. Read the object back before retrying (a retry with the same expected_version answers 409 if it did happen)`,
      'replication_unconfirmed', { dependency: 'redis', replicas_acked: r.acked, replicas_wanted: r.wanted });
  };
}

function isStream(body: unknown): boolean {
  return typeof (body as { pipe?: unknown } | null)?.pipe === 'function';
}
