import { createParser, type EventSourceMessage } from 'eventsource-parser';

/** SseReader reads a server-sent-events response with eventsource-parser and collects its events. */
export class SseReader {
  readonly events: EventSourceMessage[] = [];
  ended = false;
  status = 0;
  private readonly abort = new AbortController();
  private wake?: () => void;

  constructor(private readonly url: string, private readonly headers: Record<string, string> = {}) {}

  async open(): Promise<this> {
    const res = await fetch(this.url, { headers: this.headers, signal: this.abort.signal });
    this.status = res.status;
    const parser = createParser({ onEvent: (e) => { this.events.push(e); this.wake?.(); } });
    void (async () => {
      try {
        const decoder = new TextDecoder();
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }));
      } catch { /* aborted */ }
      this.ended = true;
      this.wake?.();
    })();
    return this;
  }

  /** until waits until `n` events arrived (or the stream ended), or throws after the timeout. */
  async until(n: number, timeoutMs = 10_000): Promise<EventSourceMessage[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.events.length < n && !this.ended) {
      if (Date.now() > deadline) throw new Error(`only ${this.events.length} of ${n} events after ${timeoutMs} ms`);
      await new Promise<void>((r) => { this.wake = r; setTimeout(r, 100); });
    }
    return this.events;
  }

  close(): void {
    this.abort.abort();
  }
}
