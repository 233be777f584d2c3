import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';
import type { Logger } from 'pino';
import type { StreamSlots } from './stream-slots.ts';

/** Frame is one server-sent event. */
type Frame = { id?: string | number; event?: string; data: unknown };

/** SseStream is one server-sent-events response: frames, keep-alive comments, and a close signal. */
export class SseStream {
  private readonly out: ServerResponse;
  private readonly keepAlive: NodeJS.Timeout;
  closed = false;

  /** open switches the response to `text/event-stream`; `onClose` runs once when the client goes away. */
  constructor(ctx: Context, onClose: () => void, keepAliveMs = 15_000) {
    ctx.req.socket.setTimeout(0);
    ctx.req.socket.setNoDelay(true);
    ctx.set({ 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' });
    ctx.status = 200;
    // NOTE: frames go straight to the socket's response (not through a body stream Koa pipes), which saves a
    // stream hop per frame per subscriber; Koa leaves the response alone.
    ctx.respond = false;
    this.out = ctx.res;
    this.out.writeHead(200);
    // NOTE: a first comment makes Node send the headers now, so a client knows the stream is open even
    // when no frame is due yet.
    this.out.write(': open\n\n');
    // NOTE: comments keep proxies from cutting an idle stream.
    this.keepAlive = setInterval(() => this.out.write(': keep-alive\n\n'), keepAliveMs);
    const close = () => {
      if (this.closed) return;
      this.closed = true;
      clearInterval(this.keepAlive);
      onClose();
    };
    ctx.req.on('close', close);
    this.out.on('close', close);
    // NOTE: a client that hung up before the stream opened sent its close already; without this its slot and reader
    // stayed. On the next microtask, so the caller's own set-up (a subscription onClose undoes) has run.
    if (ctx.req.socket.destroyed) queueMicrotask(close);
  }

  /** send writes one frame; `data` is serialized as one JSON line. */
  send(frame: Frame): void {
    if (this.closed) return;
    let text = '';
    if (frame.id !== undefined) text += `id: ${frame.id}\n`;
    if (frame.event) text += `event: ${frame.event}\n`;
    this.out.write(`${text}data: ${JSON.stringify(frame.data)}\n\n`);
  }

  /** raw writes preformatted SSE text (e.g. the AI SDK's `data: [DONE]` terminator). */
  raw(text: string): void {
    if (!this.closed) this.out.write(text);
  }

  /** end finishes the response. */
  end(): void {
    clearInterval(this.keepAlive);
    this.out.end();
  }
}

/**
 * streamFrames answers with server-sent events: one per frame of `frames`, until the frames end or the client goes
 * away, which aborts the signal `frames` was given. The stream first takes a slot of `slots` (429 past a cap),
 * freed when it closes. `frames` is called (and awaited) before the stream opens, so what it refuses (its input) is
 * an error answer; a failure after the stream opened is logged and ends it.
 */
export async function streamFrames(ctx: Context, frames: (signal: AbortSignal) => AsyncIterable<Frame> | Promise<AsyncIterable<Frame>>, logger: Logger, what: string, slots: StreamSlots): Promise<void> {
  const release = slots.admit(ctx);
  const abort = new AbortController();
  let framed: AsyncIterable<Frame>;
  try {
    framed = await frames(abort.signal);
  } catch (err) {
    release();
    throw err;
  }
  const sse = new SseStream(ctx, () => { abort.abort(); release(); });
  void (async () => {
    try {
      for await (const frame of framed) sse.send(frame);
    } catch (err) {
      if (!sse.closed) logger.warn({ err }, `${what} failed`);
    } finally {
      sse.end();
      abort.abort();
    }
  })();
}
