import type { Context } from 'koa';
import { TooManyRequestsError } from '../store/errors.ts';

/** STREAM_RETRY_AFTER_MS is the Retry-After a refused stream is told: streams live long, so not at once. */
export const STREAM_RETRY_AFTER_MS = 5000;

/** StreamSlotLimits are the caps on open streams in one API process (Config.streams). */
export interface StreamSlotLimits {
  /** Streams one caller may hold open at once (STREAMS_PER_CALLER). */
  perCaller: number;
  /** Streams the process holds open at once, every caller together (STREAMS_MAX). */
  max: number;
}

/**
 * streamCaller names who holds a stream: the authenticated principal, else (AUTH_MODE=none, or a route that
 * authenticates no principal) the remote address. NOTE: `app.proxy` is off, so the address is the socket's own and
 * a forwarded-for header cannot spread one caller over many names.
 */
export function streamCaller(ctx: Context): string {
  const name = (ctx.state.principal as { name?: string } | undefined)?.name;
  return name ? `principal ${name}` : `address ${ctx.request.socket.remoteAddress ?? 'unknown'}`;
}

/**
 * StreamSlots counts the open server-sent-event streams (event bus, resource and status watches, session and loop
 * run streams) per caller and in total, and refuses one more past either cap with 429. NOTE: each such stream holds
 * a Redis connection (a blocking XREAD) or a session tail, so the caps bound this process's Redis connections.
 */
export class StreamSlots {
  private readonly byCaller = new Map<string, number>();
  private total = 0;

  constructor(private readonly limits: StreamSlotLimits) {}

  /** open is how many streams are open now, every caller together. */
  get open(): number {
    return this.total;
  }

  /**
   * admit takes a slot for the request's caller, or throws TooManyRequestsError (429, Retry-After) past a cap. It
   * returns the release, which frees the slot once however often it is called.
   */
  admit(ctx: Context): () => void {
    const caller = streamCaller(ctx);
    const mine = this.byCaller.get(caller) ?? 0;
    const evidence = { retry_after_ms: STREAM_RETRY_AFTER_MS };
    if (mine >= this.limits.perCaller) {
      throw new TooManyRequestsError(`${caller} holds ${mine} open streams, the most one caller may (STREAMS_PER_CALLER); close one and retry`, 'too_many_streams', { ...evidence, limit: 'STREAMS_PER_CALLER', max: this.limits.perCaller });
    }
    if (this.total >= this.limits.max) {
      throw new TooManyRequestsError(`this process holds ${this.total} open streams, the most it serves (STREAMS_MAX); retry later`, 'too_many_streams', { ...evidence, limit: 'STREAMS_MAX', max: this.limits.max });
    }
    this.byCaller.set(caller, mine + 1);
    this.total++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const left = (this.byCaller.get(caller) ?? 1) - 1;
      if (left > 0) this.byCaller.set(caller, left);
      else this.byCaller.delete(caller);
    };
  }
}
