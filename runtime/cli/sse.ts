import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { UnreachableError } from './errors.ts';

/**
 * readSse feeds a server-sent-events response through eventsource-parser; `onEvent` returning `false` stops
 * reading (and closes the connection). Resolves when the stream ends or is stopped.
 */
export async function readSse(res: Response, onEvent: (ev: EventSourceMessage) => boolean | void): Promise<void> {
  if (!res.body) return;
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let stop = false;
  const parser = createParser({ onEvent: (ev) => { if (!stop && onEvent(ev) === false) stop = true; } });
  try {
    while (!stop) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
    }
  } catch (err) {
    throw new UnreachableError(`stream interrupted: ${(err as Error).message}`);
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
