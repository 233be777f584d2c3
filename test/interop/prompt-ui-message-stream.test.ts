import { expect } from 'chai';
import { readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { ServiceFixture } from '../helpers/fixture.ts';

describe('The ai package\'s readUIMessageStream reads the prompt route (real Redis, real agent)', function () {
  this.timeout(120_000);
  const f = new ServiceFixture().install();

  it('builds the assistant message of the turn to the end', async () => {
    const { api, service, ws } = f;
    const s = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
    const res = await fetch(`${service.url}/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'hello there' }) });
    expect(res.headers.get('x-svc-ai-ui-message-stream')).to.equal('v1');
    const chunks = res.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).pipeThrough(new TransformStream<{ data: string }, UIMessageChunk>({
      transform(ev, out) { if (ev.data !== '[DONE]') out.enqueue(JSON.parse(ev.data)); },
    }));
    let last: UIMessage | undefined;
    for await (const message of readUIMessageStream({ stream: chunks, terminateOnError: true })) last = message;
    expect(last?.role).to.equal('assistant');
    const text = last!.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text).join('');
    expect(text.length).to.be.greaterThan(0);
  });
});
