import { expect } from 'chai';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DefaultChatTransport, readUIMessageStream, type UIMessage } from 'ai';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';

/** lastText joins the text parts of the last message a UI message stream built, and counts its error chunks. */
async function lastText(stream: ReadableStream<any>): Promise<{ text: string; errors: number }> {
  let last: UIMessage | undefined;
  let errors = 0;
  const counted = stream.pipeThrough(new TransformStream({ transform(c, out) { if (c.type === 'error') errors++; out.enqueue(c); } }));
  for await (const m of readUIMessageStream({ stream: counted })) last = m;
  return { text: (last?.parts ?? []).filter((p) => p.type === 'text').map((p) => (p as { text: string }).text).join(''), errors };
}

describe('The ai package\'s DefaultChatTransport sends while a turn runs (real Redis, scripted agent)', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  let service: Service;
  let api: Client;
  let ws: { id: string };

  before(async () => {
    await redis.start();
    service = await startService(redis.url, { DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'svc-busy-')) });
    api = new Client(service.url);
    ws = (await api.post('/api/workspaces', { root_dir: mkdtempSync(path.join(os.tmpdir(), 'svc-busy-ws-')) })).body.workspace;
  });
  after(async () => {
    await service?.stop();
    await redis.stop();
  });

  const transportFor = (sessionId: string) => new DefaultChatTransport<UIMessage>({
    api: `${service.url}/api/workspaces/${ws.id}/sessions/${sessionId}/prompt`,
    prepareSendMessagesRequest: ({ messages }) => ({ body: { message: (messages.at(-1)!.parts[0] as { text: string }).text } }),
  });
  const send = (t: DefaultChatTransport<UIMessage>, text: string) => t.sendMessages({
    trigger: 'submit-message', chatId: 'chat', messageId: undefined, abortSignal: undefined,
    messages: [{ id: `m-${text}`, role: 'user', parts: [{ type: 'text', text }] }],
  });
  const busy = async (id: string) => eventually(async () => expect((await api.get(`/api/sessions/${id}`)).body.session.badge).to.equal('running'));

  it('a message sent while a turn runs streams its own turn\'s reply, which ends after the first turn\'s', async () => {
    const s = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
    const t = transportFor(s.id);
    const order: string[] = [];
    const first = send(t, '/sleep 500').then(lastText).then((r) => { order.push('first'); return r; });
    await busy(s.id);
    const second = await send(t, 'second message').then(lastText);
    order.push('second');
    await first;
    expect(second.errors).to.equal(0);
    expect(second.text).to.include('second message');
    expect(second.text).to.not.match(/slept|sleep/i);
    expect(order).to.deep.equal(['first', 'second']);
    const turns = ((await api.get(`/api/sessions/${s.id}/events?type=user_message`)).body.events as any[]).map((e) => e.content.text);
    expect(turns).to.deep.equal(['/sleep 500', 'second message']);
  });

  it('a client that asks for JSON only still gets 202 with the queued turn id, and no stream', async () => {
    const s = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
    const first = send(transportFor(s.id), '/sleep 500').then(lastText);
    await busy(s.id);
    const res = await fetch(`${service.url}/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify({ message: 'json please' }) });
    expect(res.status).to.equal(202);
    expect(res.headers.get('content-type')).to.match(/^application\/json/);
    expect(res.headers.get('x-svc-ai-ui-message-stream')).to.equal(null);
    const body = await res.json();
    expect(body.prompt).to.include({ status: 'queued', mode: 'queue', queued: true });
    await first;
    await eventually(async () => {
      const done = ((await api.get(`/api/sessions/${s.id}/events?type=done`)).body.events as any[]).map((e) => e.turn_id);
      expect(done).to.include(body.prompt.new_turn_id);
    });
  });

  it('a queued message dropped by a cancel ends its stream with an error instead of hanging', async () => {
    const s = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
    const t = transportFor(s.id);
    const first = send(t, '/sleep 30000').then(lastText);
    await busy(s.id);
    const second = send(t, 'never runs').then(lastText);
    await eventually(async () => expect(((await api.get(`/api/sessions/${s.id}/events?type=transcript_marker.created`)).body.events as any[]).some((e) => e.content.kind === 'transcript_marker.prompt_queued')).to.equal(true));
    expect((await api.post(`/api/workspaces/${ws.id}/sessions/${s.id}/prompt/cancel`, {})).status).to.be.below(300);
    await first;
    const dropped = await second;
    expect(dropped.errors).to.equal(1);
    expect(dropped.text).to.equal('');
    const texts = ((await api.get(`/api/sessions/${s.id}/events?type=user_message`)).body.events as any[]).map((e) => e.content.text);
    expect(texts).to.not.include('never runs');
  });
});
