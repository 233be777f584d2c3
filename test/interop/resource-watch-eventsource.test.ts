import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EventSource } from 'eventsource';
import type { Service } from '../../runtime/process/service.ts';
import { freePort, RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';

const agent = (prompt: string) => ({ name: 'helper', prompt });
const body = (spec: unknown, expected_version: number) => ({ scope: { kind: 'global' }, spec, expected_version });

describe('The eventsource package reads the resource watch (GET /api/resources?watch=true) through two cuts (real Redis)', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  const dataDirs: string[] = [];
  let watched: Service | undefined;
  let writer: Service;
  let api: Client;
  let port = 0;

  // NOTE: the watched service listens on one fixed port so that EventSource, which only knows its URL, can
  // reconnect to the service started again there; a second service on the same Redis takes the writes, so
  // records can be written while the watched one is down.
  const startWatched = async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-watch-es-'));
    dataDirs.push(dataDir);
    watched = await startService(redis.url, { DATA_DIR: dataDir, PORT: String(port) });
  };

  before(async () => {
    await redis.start();
    port = await freePort();
    await startWatched();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-watch-es-writer-'));
    dataDirs.push(dataDir);
    writer = await startService(redis.url, { DATA_DIR: dataDir, SVC_ROLES: 'api' });
    api = new Client(writer.url);
  });
  after(async () => {
    await watched?.stop();
    await writer?.stop();
    await redis.stop();
    for (const d of dataDirs) rmSync(d, { recursive: true, force: true });
  });

  it('delivers every change exactly once and in order across a restart and a dropped connection, resuming with Last-Event-ID, and stays OPEN', async () => {
    const lastEventIds: (string | null)[] = [];
    const es = new EventSource(`http://127.0.0.1:${port}/api/resources?watch=true&kind=agent`, {
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        lastEventIds.push(new Headers(init?.headers as HeadersInit).get('last-event-id'));
        return res;
      },
    });
    const got: { event: string; id: string; record: string; version: number }[] = [];
    const expired: unknown[] = [];
    for (const type of ['put', 'delete']) {
      es.addEventListener(type, (e) => {
        const data = JSON.parse(e.data);
        got.push({ event: e.type, id: e.lastEventId, record: data.record.id, version: data.record.version });
      });
    }
    es.addEventListener('expired', (e) => expired.push(e.data));
    const write = async (method: 'put' | 'delete', id: string, spec: unknown, expected: number) => {
      const res = method === 'put' ? await api.put(`/api/resources/agent/${id}`, body(spec, expected)) : await api.delete(`/api/resources/agent/${id}`, { expected_version: expected });
      expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201, 204]);
    };
    try {
      await eventually(async () => expect(es.readyState).to.equal(EventSource.OPEN));
      await write('put', 'a1', agent('one'), 0);
      await write('put', 'a1', agent('two'), 1);
      await eventually(async () => expect(got).to.have.length(2));

      // Cut 1: the watched service stops (its open stream is cut) and, while it is down, two more changes land.
      await watched!.stop();
      watched = undefined;
      await write('put', 'a2', agent('three'), 0);
      await write('delete', 'a1', undefined, 2);
      await startWatched();
      await eventually(async () => expect(got).to.have.length(4), 30_000, 50);
      await eventually(async () => expect(es.readyState).to.equal(EventSource.OPEN));
      await write('put', 'a2', agent('four'), 1);
      await eventually(async () => expect(got).to.have.length(5));

      // Cut 2: the service stays up but every connection it holds is dropped (as a network cut or a proxy would).
      // NOTE: reaching the private server is the only way to drop the stream without stopping the service.
      (watched as unknown as { server: import('node:http').Server }).server.closeAllConnections();
      await write('put', 'a3', agent('five'), 0);
      await eventually(async () => expect(got).to.have.length(6), 30_000, 50);
      await write('delete', 'a2', undefined, 2);
      await eventually(async () => expect(got).to.have.length(7));
      await eventually(async () => expect(es.readyState).to.equal(EventSource.OPEN));

      expect(got).to.deep.equal([
        { event: 'put', id: '1', record: 'a1', version: 1 },
        { event: 'put', id: '2', record: 'a1', version: 2 },
        { event: 'put', id: '3', record: 'a2', version: 1 },
        { event: 'delete', id: '4', record: 'a1', version: 2 },
        { event: 'put', id: '5', record: 'a2', version: 2 },
        { event: 'put', id: '6', record: 'a3', version: 1 },
        { event: 'delete', id: '7', record: 'a2', version: 2 },
      ]);
      expect(expired).to.deep.equal([]);
      // One connection per cut, each resuming after the last change it had: not from the head, not from the start.
      expect(lastEventIds).to.deep.equal([null, '2', '5']);
      // Nothing arrives twice later either: a further change is the only new frame.
      await write('put', 'a3', agent('six'), 1);
      await eventually(async () => expect(got).to.have.length(8));
      expect(got.at(-1)).to.deep.equal({ event: 'put', id: '8', record: 'a3', version: 2 });
      expect(es.readyState).to.equal(EventSource.OPEN);
    } finally {
      es.close();
    }
  });
});
