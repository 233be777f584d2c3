import { createParser } from 'eventsource-parser';

/** readUiStream reads a whole AI SDK UI message stream response: its chunks and whether it ended with [DONE]. */
export async function readUiStream(res: Response): Promise<{ chunks: any[]; done: boolean }> {
  const chunks: any[] = [];
  let done = false;
  const parser = createParser({ onEvent: (e) => { if (e.data === '[DONE]') done = true; else chunks.push(JSON.parse(e.data)); } });
  const decoder = new TextDecoder();
  for await (const c of res.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(c, { stream: true }));
  return { chunks, done };
}
