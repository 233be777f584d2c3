import type { LogStream } from '../../store/log-stream.ts';

/** MAX_PENDING_LINES bounds the lines a sink holds while Redis is not attached or not answering. */
const MAX_PENDING_LINES = 1000;

/**
 * SharedLogSink is the pino destination every process installs for its warning and error lines: it hands them,
 * in batches, to the shared LogStream in Redis, where a support bundle built on any replica reads them.
 * NOTE: logging must never wait on Redis nor fail a caller: lines written before `attach` (start-up) or while Redis
 * does not answer wait in a bounded buffer; past it the oldest are dropped and counted. The sink itself never logs
 * (that would feed its own input).
 */
export class SharedLogSink {
  private pending: string[] = [];
  private stream?: LogStream;
  private flushing?: Promise<void>;
  /** dropped counts lines lost to a full buffer or a failed write. */
  dropped = 0;

  constructor(private readonly onDrop: (lines: number) => void = () => undefined) {}

  /** write takes one pino line (pino calls it synchronously for each line at or above the sink's level). */
  write(line: string): void {
    if (this.pending.length >= MAX_PENDING_LINES) this.drop(this.pending.splice(0, 1).length);
    this.pending.push(line.endsWith('\n') ? line.slice(0, -1) : line);
    if (this.stream && !this.flushing) this.flushing = this.drain();
  }

  /** attach starts handing lines (those buffered so far first) to `stream`. */
  attach(stream: LogStream): void {
    this.stream = stream;
    if (!this.flushing) this.flushing = this.drain();
  }

  /** detach writes what is buffered, then stops using the stream (before its connection closes). */
  async detach(): Promise<void> {
    await this.flushing;
    if (this.pending.length && this.stream) await (this.flushing = this.drain());
    this.stream = undefined;
  }

  private drop(lines: number): void {
    this.dropped += lines;
    this.onDrop(lines);
  }

  private async drain(): Promise<void> {
    // NOTE: one tick's lines go in one pipeline; lines written meanwhile wait for the next round.
    await new Promise((r) => setImmediate(r));
    while (this.pending.length && this.stream) {
      const batch = this.pending.splice(0, 200);
      try {
        await this.stream.append(batch);
      } catch {
        this.drop(batch.length);
      }
    }
    this.flushing = undefined;
  }
}
