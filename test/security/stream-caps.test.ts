import { expect } from 'chai';
import http from 'node:http';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { sha256 } from '../../runtime/process/auth.ts';
import { ConfigError, loadConfig } from '../../runtime/process/config.ts';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';

/** OpenStream is one server-sent-events request held open (or its refusal, read whole). */
interface OpenStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The refusal's JSON body; undefined for an open stream. */
  body?: any;
  /** close hangs up, as a client that goes away does. */
  close(): void;
}

/**
 * openStream sends a GET and resolves once the headers arrive: a 200 stays open until close(), anything else is
 * read to its end. `localAddress` chooses the caller's address (any 127.x.y.z reaches a loopback listener on Linux).
 */
function openStream(url: string, opts: { headers?: Record<string, string>; localAddress?: string } = {}): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { accept: 'text/event-stream', ...opts.headers }, localAddress: opts.localAddress, agent: false }, (res) => {
      const close = () => { req.destroy(); res.destroy(); };
      if (res.statusCode === 200) {
        res.on('error', () => undefined);
        resolve({ status: 200, headers: res.headers, close });
        return;
      }
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text ? JSON.parse(text) : undefined, close }));
    });
    req.on('error', reject);
  });
}

describe('Stream caps: open SSE streams per caller and in total (HTTP, real Redis)', function () {
  this.timeout(60_000);
  const redis = new RedisServer();
  let service: Service | undefined;
  let admin: Redis;
  let dir: string;
  const opened: OpenStream[] = [];

  before(async () => {
    await redis.start();
    admin = redis.client();
  });
  after(async () => {
    admin.disconnect();
    await redis.destroy();
  });
  beforeEach(async () => {
    await redis.flush();
    dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'svc-streams-')));
  });
  afterEach(async () => {
    for (const s of opened.splice(0)) s.close();
    await service?.stop();
    service = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  /** clients counts the connections Redis holds, the test's own admin connection excluded. */
  const clients = async () => String(await admin.client('LIST')).split('\n').filter((l) => l.trim()).length - 1;
  const open = async (p: string, opts: Parameters<typeof openStream>[1] = {}) => {
    const s = await openStream(service!.url + p, opts);
    opened.push(s);
    return s;
  };
  /** refused asserts a 429 in the service's error body that names the cap, with a Retry-After in seconds. */
  const refused = (s: OpenStream, limit: string, reason: string) => {
    expect(s.status, `${reason}: ${JSON.stringify(s.body)}`).to.equal(429);
    expect(Number(s.headers['retry-after']), reason).to.be.greaterThanOrEqual(1);
    expect(s.body.diagnostic.code, reason).to.equal('too_many_streams');
    expect(s.body.diagnostic.evidence.limit, reason).to.equal(limit);
    expect(s.body.error, reason).to.be.a('string').and.match(new RegExp(limit));
  };

  it('STREAMS_PER_CALLER and STREAMS_MAX default to 32 and 512 and refuse what is not a positive integer, naming the variable', () => {
    expect(loadConfig({}).streams).to.deep.equal({ perCaller: 32, max: 512 });
    expect(loadConfig({ STREAMS_PER_CALLER: '4', STREAMS_MAX: '9' }).streams).to.deep.equal({ perCaller: 4, max: 9 });
    for (const [reason, env, name] of [
      ['zero streams per caller', { STREAMS_PER_CALLER: '0' }, 'STREAMS_PER_CALLER'],
      ['a fraction', { STREAMS_MAX: '1.5' }, 'STREAMS_MAX'],
      ['a word', { STREAMS_MAX: 'many' }, 'STREAMS_MAX'],
    ] as const) {
      expect(() => loadConfig(env), reason).to.throw(ConfigError, new RegExp(`${name}="`));
    }
  });

  it('AUTH_MODE=none: one remote address holds at most STREAMS_PER_CALLER streams of any kind; the next is 429 and opens no Redis connection; a hang-up frees its slot; every connection goes when the streams close', async () => {
    service = await startService(redis.url, { DATA_DIR: path.join(dir, 'data'), STREAMS_PER_CALLER: '3', STREAMS_MAX: '100' });
    const api = new Client(service.url);
    const ws = (await api.post('/api/workspaces', { root_dir: dir })).body.workspace;
    const session = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
    const sessionStream = `/api/workspaces/${ws.id}/sessions/${session.id}/stream`;
    // NOTE: a stream refused for its input (here a bad resume point, checked after the slot is taken) frees its slot.
    for (let i = 0; i < 4; i++) expect((await open('/api/resources?watch=true&since_revision=x')).status).to.equal(400);
    const baseline = await clients();

    const streams = [await open('/api/events/stream'), await open('/api/resources?watch=true'), await open('/api/resources/status/watch?kind=agent')];
    expect(streams.map((s) => s.status)).to.deep.equal([200, 200, 200]);
    const held = await eventually(async () => {
      const n = await clients();
      expect(n, 'the event stream and the resource watch each read on a connection of their own').to.be.at.least(baseline + 2);
      return n;
    });

    for (const [reason, p] of [['a fourth event stream', '/api/events/stream'], ['a fourth stream, a session\'s', sessionStream], ['a fourth stream, a watch', '/api/resources?watch=true']]) {
      refused(await open(p), 'STREAMS_PER_CALLER', reason);
    }
    // NOTE: at most: the status watch's shared subscription (the process's one, not the stream's) may close meanwhile.
    expect(await clients(), 'a refused stream opens no Redis connection').to.be.at.most(held);

    // Another remote address is another caller.
    const other = await open('/api/events/stream', { localAddress: '127.0.0.2' });
    expect(other.status).to.equal(200);

    streams[0].close();
    const again = await eventually(async () => {
      const s = await open('/api/events/stream');
      expect(s.status, 'a hang-up frees its slot').to.equal(200);
      return s;
    });
    refused(await open('/api/events/stream'), 'STREAMS_PER_CALLER', 'the freed slot is taken again');

    for (const s of [...streams, other, again]) s.close();
    // NOTE: at most the baseline: a connection of the service's own may reconnect meanwhile, never one of a stream.
    await eventually(async () => expect(await clients(), 'no stream connection is left behind').to.be.at.most(baseline), 30_000);
    // Every slot is free again: the caller opens its full share at once.
    const full = await Promise.all([1, 2, 3].map(() => open('/api/events/stream')));
    expect(full.map((s) => s.status)).to.deep.equal([200, 200, 200]);
  });

  it('AUTH_MODE=token: the cap is per principal, and STREAMS_MAX bounds every caller together; a refused session prompt sends nothing', async () => {
    const tokens = path.join(dir, 'tokens.yaml');
    writeFileSync(tokens, `tokens:\n  - {name: alice, role: operator, sha256: ${sha256('a-secret')}}\n  - {name: bob, role: operator, sha256: ${sha256('b-secret')}}\n`);
    mkdirSync(path.join(dir, 'roots', 'proj'), { recursive: true });
    service = await startService(redis.url, { DATA_DIR: path.join(dir, 'data'), AUTH_MODE: 'token', AUTH_TOKENS_FILE: tokens, WORKSPACE_ROOTS: path.join(dir, 'roots'), STREAMS_PER_CALLER: '2', STREAMS_MAX: '3' });
    const alice = { authorization: 'Bearer a-secret' };
    const bob = { authorization: 'Bearer b-secret' };
    const api = new Client(service.url);
    const ws = (await api.call('POST', '/api/workspaces', { root_dir: path.join(dir, 'roots', 'proj') }, alice)).body.workspace;
    const session = (await api.call('POST', '/api/sessions', { workspace: ws.id }, alice)).body.session;
    expect(session.state).to.equal('active');

    expect((await open('/api/events/stream', { headers: alice })).status).to.equal(200);
    expect((await open(`/api/workspaces/${ws.id}/sessions/${session.id}/stream`, { headers: alice })).status).to.equal(200);
    refused(await open('/api/events/stream', { headers: alice }), 'STREAMS_PER_CALLER', 'alice\'s third stream');

    // The same address, another principal: bob has his own share, until the process's total is reached.
    expect((await open('/api/resources/status/watch?kind=agent', { headers: bob })).status).to.equal(200);
    refused(await open('/api/events/stream', { headers: bob }), 'STREAMS_MAX', 'bob\'s second stream, the process holding 3');

    // A prompt that would answer with its turn's stream is refused before it is sent: no turn, no event.
    const before = (await api.call('GET', `/api/workspaces/${ws.id}/sessions/${session.id}/transcript`, undefined, bob)).body.messages;
    const prompt = await new Promise<OpenStream>((resolve, reject) => {
      const req = http.request(`${service!.url}/api/workspaces/${ws.id}/sessions/${session.id}/prompt`, { method: 'POST', headers: { ...bob, 'content-type': 'application/json', accept: 'text/event-stream' }, agent: false }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => { text += c; });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text ? JSON.parse(text) : undefined, close: () => undefined }));
      });
      req.on('error', reject);
      req.end(JSON.stringify({ message: 'hello' }));
    });
    refused(prompt, 'STREAMS_MAX', 'a streamed prompt past the total');
    const afterPrompt = (await api.call('GET', `/api/workspaces/${ws.id}/sessions/${session.id}/transcript`, undefined, bob)).body.messages;
    expect(afterPrompt, 'the refused prompt reached no transcript').to.deep.equal(before);
  });
});
