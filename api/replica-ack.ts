import type { Context, Next } from 'koa';
import { UnavailableError } from '../store/errors.ts';

/** ReplicaAck waits until the configured replicas hold this process's writes; undefined when none is asked for. */
export type ReplicaAck = () => Promise<{ acked: number; wanted: number } | undefined>;

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
    await next();
    if (!WRITES.has(ctx.method) || ctx.status >= 300 || isStream(ctx.body)) return;
    const r = await ack();
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
