import { expect } from 'chai';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EventSource } from 'eventsource';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';

describe('The eventsource package reads a session stream through a stop (real Redis, real agent)', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  let service: Service;
  let api: Client;

  before(async () => {
    await redis.start();
    service = await startService(redis.url, { DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'svc-es-')) });
    api = new Client(service.url);
  });
  after(async () => {
    await service?.stop();
    await redis.stop();
  });

  it('gets every row and the terminal frame last; its reconnect with the terminal id gets 204 and it closes', async () => {
    const ws = (await api.post('/api/workspaces', { root_dir: mkdtempSync(path.join(os.tmpdir(), 'svc-es-ws-')) })).body.workspace;
    const s = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
    await (await fetch(`${service.url}/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'hello' }) })).text();

    const answers: { status: number; lastEventId: string | null }[] = [];
    const es = new EventSource(`${service.url}/api/workspaces/${ws.id}/sessions/${s.id}/stream`, {
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        answers.push({ status: res.status, lastEventId: new Headers(init?.headers as HeadersInit).get('last-event-id') });
        return res;
      },
    });
    const ids: string[] = [];
    const stoppedFrames: string[] = [];
    es.addEventListener('session_stopped', (e) => { stoppedFrames.push(e.lastEventId); });
    es.onmessage = (e) => ids.push(e.lastEventId);
    for (const type of ['user_prompt', 'agent_message', 'done']) es.addEventListener(type, (e) => ids.push(e.lastEventId));
    await eventually(async () => expect(ids.length).to.be.greaterThan(0));
    expect((await api.post(`/api/sessions/${s.id}/stop`, {})).status).to.equal(204);
    await eventually(async () => expect(es.readyState).to.equal(EventSource.CLOSED));
    es.close();
    // NOTE: the recorded session_stopped row (a numeric id), then the synthetic terminal frame, once.
    expect(stoppedFrames.at(-1)).to.equal(`session-stopped-${s.id}`);
    expect(stoppedFrames.slice(0, -1).every((id) => /^\d+$/.test(id))).to.equal(true);
    expect(answers.map((a) => a.status)).to.deep.equal([200, 204]);
    expect(answers[1].lastEventId).to.equal(`session-stopped-${s.id}`);
    expect(ids.every((id) => /^\d+$/.test(id))).to.equal(true);
  });

  it('a session error event arrives as session_error and does not fire EventSource\'s own error handler', async () => {
    const ws = (await api.post('/api/workspaces', { root_dir: mkdtempSync(path.join(os.tmpdir(), 'svc-es-ws-')) })).body.workspace;
    const s = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
    const es = new EventSource(`${service.url}/api/workspaces/${ws.id}/sessions/${s.id}/stream`);
    const sessionErrors: any[] = [];
    const ownErrors: unknown[] = [];
    const done: string[] = [];
    es.addEventListener('session_error', (e) => { sessionErrors.push(JSON.parse(e.data)); });
    es.addEventListener('error', (e) => { ownErrors.push(e); });
    es.addEventListener('done', (e) => { done.push(e.lastEventId); });
    await eventually(async () => expect(es.readyState).to.equal(EventSource.OPEN));
    await (await fetch(`${service.url}/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: '/error the agent gave up' }) })).text();
    await eventually(async () => expect(sessionErrors).to.have.length(1));
    expect(sessionErrors[0]).to.include({ type: 'error', session_id: s.id });
    expect(JSON.stringify(sessionErrors[0])).to.include('the agent gave up');
    // A later turn still arrives on the same connection: the stream was not dropped or reconnected.
    await (await fetch(`${service.url}/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'still here' }) })).text();
    await eventually(async () => expect(done).to.have.length(1));
    expect(es.readyState).to.equal(EventSource.OPEN);
    expect(ownErrors).to.deep.equal([]);
    es.close();
  });

  it('a numeric Last-Event-ID still resumes after a stop', async () => {
    const ws = (await api.post('/api/workspaces', { root_dir: mkdtempSync(path.join(os.tmpdir(), 'svc-es-ws-')) })).body.workspace;
    const s = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
    await (await fetch(`${service.url}/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'hello' }) })).text();
    expect((await api.post(`/api/sessions/${s.id}/stop`, {})).status).to.equal(204);
    const res = await fetch(`${service.url}/api/workspaces/${ws.id}/sessions/${s.id}/stream`, { headers: { 'Last-Event-ID': '1' } });
    const text = await res.text();
    expect(res.status).to.equal(200);
    expect(text).not.to.match(/^id: 1$/m);
    expect(text).to.match(/^id: 2$/m);
    expect(text).to.include(`id: session-stopped-${s.id}`);
  });
});
