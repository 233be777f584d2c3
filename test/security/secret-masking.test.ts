import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Redis } from 'ioredis';
import { loadConfig } from '../../runtime/process/config.ts';
import { Service } from '../../runtime/process/service.ts';
import { SecretMask, secretForms } from '../../runtime/security/secret-mask.ts';
import { agentPid, environOf, SCRIPTED_COMMAND, sessionToken } from '../helpers/agents.ts';
import { ProcessCluster } from '../helpers/process.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';
import { SseReader } from '../helpers/sse.ts';

// NOTE: a slash, a plus, an equals sign and a space, so its URL encodings differ from it.
const CANARY = `c4n/${randomBytes(12).toString('hex')}+k=y z`;
const b64 = (s: string) => Buffer.from(s).toString('base64');
const url = (s: string) => s.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

/** LEAKS names every form of the canary an attacker would grep for. */
const LEAKS: Record<string, string> = {
  literal: CANARY,
  base64: b64(CANARY),
  'base64 without padding': b64(CANARY).replace(/=+$/, ''),
  'url-safe base64': url(b64(CANARY)),
  'percent-encoded': encodeURIComponent(CANARY),
  'form-encoded': new URLSearchParams({ v: CANARY }).toString().slice(2),
  // NOTE: a decoder reads any character's %XX as the character: every byte encoded, and a mix in lower-case hex.
  'percent-encoded byte by byte': [...Buffer.from(CANARY)].map((x) => `%${x.toString(16).toUpperCase().padStart(2, '0')}`).join(''),
  'percent-encoded in part, lower-case hex': [...CANARY].map((c, i) => (i % 2 ? `%${c.charCodeAt(0).toString(16)}` : c)).join(''),
};
// NOTE: the three alignments inside a longer base64 text (a Basic auth header of "user:<canary>" is one of them).
const EMBEDDED = ['', 'u', 'us'].map((pre) => `Basic ${b64(`${pre}user:${CANARY}`)}`);

/** noLeak fails naming the form and where when a text holds any form of the canary. */
function noLeak(text: string, where: string): void {
  for (const [form, value] of Object.entries(LEAKS)) expect(text.includes(value), `${where} holds the canary (${form})`).to.equal(false);
}

/** RecordingClient is a Client that keeps every answer it received, status, headers and body. */
class RecordingClient extends Client {
  readonly answers: string[] = [];
  override async call(method: string, p: string, body?: unknown, headers: Record<string, string> = {}) {
    const res = await super.call(method, p, body, headers);
    this.answers.push(`${method} ${p} ${res.status} ${JSON.stringify([...res.headers])} ${typeof res.body === 'string' ? res.body : JSON.stringify(res.body)}`);
    return res;
  }
}

/** redisText reads every key of a store (SCAN) with its value in text, whatever its type. */
async function redisText(r: Redis): Promise<{ keys: number; text: Map<string, string> }> {
  const text = new Map<string, string>();
  let cursor = '0';
  do {
    const [next, batch] = await r.scan(cursor, 'COUNT', 500);
    cursor = next;
    for (const k of batch) {
      const t = await r.type(k);
      const v = t === 'string' ? await r.get(k) : t === 'hash' ? JSON.stringify(await r.hgetall(k)) : t === 'stream' ? JSON.stringify(await r.xrange(k, '-', '+'))
        : t === 'zset' ? JSON.stringify(await r.zrange(k, 0, -1)) : t === 'list' ? JSON.stringify(await r.lrange(k, 0, -1)) : t === 'set' ? JSON.stringify(await r.smembers(k)) : '';
      const dumped = await r.dumpBuffer(k);
      text.set(k, `${k}\n${v}\n${dumped ? dumped.toString('latin1') : ''}`);
    }
  } while (cursor !== '0');
  return { keys: text.size, text };
}

describe('Secret masking: vault and env: values never reach the bus, memory, answers, Redis or logs (real Redis, real agents)', function () {
  this.timeout(180_000);

  describe('SecretMask', () => {
    const mask = new SecretMask([CANARY]);
    const quoted = new SecretMask(['pa"ss\\word-123']);
    const table = [
      { reason: 'masks the value itself', mask, given: `key ${CANARY} end`, want: 'key [REDACTED] end' },
      ...Object.entries(LEAKS).map(([form, value]) => ({ reason: `masks its ${form} form`, mask, given: `x ${value} y`, want: 'x [REDACTED] y' })),
      { reason: 'masks a value with a quote and a backslash as a JSON text writes it (a log line)', mask: quoted, given: JSON.stringify({ k: 'pa"ss\\word-123' }), want: '{"k":"[REDACTED]"}' },
      { reason: 'leaves a text without it as it was', mask, given: 'nothing secret here: c4n/ and +k=y', want: 'nothing secret here: c4n/ and +k=y' },
    ];
    for (const t of table) {
      it(t.reason, () => {
        expect(t.mask.text(t.given)).to.equal(t.want);
      });
    }

    it('masks the value inside a longer base64 text at each of the three alignments, standard and url-safe', () => {
      for (const header of EMBEDDED) {
        for (const given of [header, url(header)]) {
          const out = mask.text(given);
          expect(out, given).to.include('[REDACTED]');
          // What is left around the mask is at most the few characters that mix the value's bits with its neighbours'.
          const rest = out.replace(/^Basic /, '').split('[REDACTED]').join('');
          expect(rest.length, out).to.be.at.most(b64('ususer:').length + 4);
        }
      }
    });

    it('masks strings and keys at any depth of a JSON value, and returns a value without a secret unchanged (the same object)', () => {
      const clean = { a: ['x', { b: 1 }], c: true };
      expect(mask.value(clean)).to.equal(clean);
      expect(mask.value({ a: [`t ${b64(CANARY)}`], [CANARY]: 1, n: 2 })).to.deep.equal({ a: ['t [REDACTED]'], '[REDACTED]': 1, n: 2 });
      expect(mask.found({ deep: [{ x: encodeURIComponent(CANARY) }] })).to.equal(true);
      expect(mask.found(clean)).to.equal(false);
    });

    it('masks what JSON would write of other objects (a class instance\'s fields, a toJSON), and leaves a Date as it was', () => {
      class Failure { constructor(readonly detail: string) {} }
      const when = new Date(0);
      const out = mask.value({ when, failure: new Failure(`upstream said ${CANARY}`), custom: { toJSON: () => ({ key: CANARY }) } });
      expect(out.when).to.equal(when);
      expect(JSON.parse(JSON.stringify(out))).to.deep.equal({ when: when.toISOString(), failure: { detail: 'upstream said [REDACTED]' }, custom: { key: '[REDACTED]' } });
    });

    it('does not look for the encodings of a value under 8 bytes, nor for fragments under 8 characters', () => {
      expect(secretForms('abc1234')).to.deep.equal(['abc1234']);
      for (const f of secretForms(CANARY)) expect(f.length, f).to.be.at.least(8);
    });
  });

  describe('the masking set across processes', () => {
    const redis = new RedisServer();
    const services: Service[] = [];
    const dirs: string[] = [];
    before(() => redis.start());
    after(async () => {
      for (const sv of services) await sv.stop();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
      await redis.destroy();
    });

    it('a value written to the vault through one process is masked by another process\'s very next append (the write is announced; no revision read per append)', async () => {
      const keys = `k1=${randomBytes(32).toString('base64')}`;
      for (let i = 0; i < 2; i++) {
        const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-masking-set-'));
        dirs.push(dataDir);
        services.push(await startService(redis.url, { DATA_DIR: dataDir, SVC_VAULT_KEYS: keys }));
      }
      const [writer, reader] = services;
      const api = new Client(writer.url);
      const admin = redis.client();
      const gets = async () => Number(/cmdstat_get:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0);
      try {
        await reader.bus!.publish({ type: 'test.warm', source: 'tests' });
        for (let i = 0; i < 10; i++) {
          const value = `fresh-${i}-${randomBytes(8).toString('hex')}`;
          expect((await api.put('/api/vault/secrets', { ref: `vault:providers/fresh/k${i}`, secret_value: value })).status).to.equal(200);
          const ev = await reader.bus!.publish({ type: 'test.fresh', source: 'tests', summary: `saw ${value}`, data: { b64: b64(value) } });
          expect(ev.summary, `write ${i}`).to.equal('saw [REDACTED]');
          expect(ev.data, `write ${i}`).to.deep.equal({ b64: '[REDACTED]' });
        }
        // While nothing is written, appends read no revision: a hundred appends cost far fewer than a hundred GETs
        // (the two services' own background reads are the few there are).
        const before = await gets();
        for (let i = 0; i < 100; i++) await reader.bus!.publish({ type: 'test.quiet', source: 'tests', summary: `n ${i}` });
        expect((await gets()) - before).to.be.below(30);
        const stored = await reader.bus!.latest(200);
        for (const e of stored.filter((x) => x.type === 'test.fresh')) expect(e.summary).to.equal('saw [REDACTED]');
      } finally {
        admin.disconnect();
      }
    });
  });

  describe('one process with every role', () => {
    const redis = new RedisServer();
    let service: Service;
    let api: RecordingClient;
    let root: string;
    let dataDir: string;
    let log: string[];
    let stream: SseReader | undefined;
    let mcp: McpClient | undefined;

    before(() => redis.start());
    after(() => redis.destroy());
    beforeEach(async () => {
      await redis.flush();
      root = mkdtempSync(path.join(os.tmpdir(), 'svc-masking-'));
      dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-masking-data-'));
      // NOTE: the agent's memory writes run without an approval step, as an operator who trusts its agents sets it.
      writeFileSync(path.join(dataDir, 'config.yaml'), 'tools:\n  permission_mode: approve-all\n  trusted_sources: [echoer]\n');
      log = [];
      // NOTE: the service's whole pino stream at debug, as it would reach stderr.
      const sink = new Writable({ write(chunk, _enc, cb) { log.push(String(chunk)); cb(); } });
      service = new Service(loadConfig({
        REDIS_URL: redis.url, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, RESYNC_INTERVAL: '5m', LOG_LEVEL: 'debug',
        SVC_VAULT_KEYS: `k1=${randomBytes(32).toString('base64')}`,
      }), sink);
      await service.start();
      api = new RecordingClient(service.url);
    });
    afterEach(async () => {
      stream?.close();
      await mcp?.close();
      await service.stop();
      rmSync(root, { recursive: true, force: true });
      rmSync(dataDir, { recursive: true, force: true });
    });

    it('masks a vault canary used by a session in the events stream, session events, memory, every answer, every Redis value and the log; memory writes holding it are rejected (422 naming the rule) and store nothing', async () => {
      expect((await api.put('/api/vault/secrets', { ref: 'vault:providers/masking/key', secret_value: CANARY, kind: 'api_key' })).status).to.equal(200);
      const agent = await api.put('/api/resources/agent/keyed', { scope: { kind: 'global' }, expected_version: 0, spec: { name: 'keyed', prompt: 'p', command: SCRIPTED_COMMAND, secret_env: { API_KEY: 'vault:providers/masking/key' } } });
      expect(agent.status, JSON.stringify(agent.body)).to.equal(201);
      const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
      stream = await new SseReader(`${service.url}/api/events/stream`).open();
      expect(stream.status).to.equal(200);
      const s = (await api.post('/api/sessions', { workspace: ws.id, agent_name: 'keyed' })).body.session;
      expect(s.state, JSON.stringify(s)).to.equal('active');
      // The agent holds the value: that is what it is for.
      expect(environOf(agentPid(s.id)).API_KEY).to.equal(CANARY);

      const prompt = (message: string) => api.call('POST', `/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { message });

      // 1. A prompt carrying the canary in every form: input.pre_submit is published, masked.
      expect((await prompt(`my key is ${CANARY}; ${Object.values(LEAKS).join(' ; ')} ; ${EMBEDDED.join(' ; ')}`)).status).to.equal(200);
      const preSubmit = await eventually(async () => {
        const ev = stream!.events.map((e) => JSON.parse(e.data)).find((e) => e.type === 'input.pre_submit');
        expect(ev, 'input.pre_submit on the events stream').to.not.equal(undefined);
        return ev;
      });
      expect(preSubmit.data.text).to.include('my key is [REDACTED]');
      expect(preSubmit.data.text.split('[REDACTED]').length - 1).to.be.at.least(Object.keys(LEAKS).length + EMBEDDED.length);

      // 2. The agent writes its own key into memory (base64, then URL-encoded) over /api/agent/mcp with its session
      // token, as its process would: rejected, nothing written.
      const token = await eventually(async () => sessionToken(s.id));
      mcp = new McpClient({ name: 'masking-test', version: '1.0.0' });
      await mcp.connect(new StreamableHTTPClientTransport(new URL(`${service.url}/api/agent/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      const toolAnswers: string[] = [];
      const callTool = async (name: string, args: Record<string, unknown>) => {
        const res = await mcp!.callTool({ name, arguments: args });
        toolAnswers.push(JSON.stringify(res));
        return res;
      };
      for (const content of [`the key is ${b64(CANARY)}`, `call https://api.example.com/?key=${encodeURIComponent(CANARY)}`]) {
        const res = await callTool('svc__memory_write', { scope: 'workspace', type: 'reference', name: 'api key', content });
        expect(res.isError, JSON.stringify(res).slice(0, 400)).to.not.equal(true);
        const { decision, applied } = JSON.parse((res.content as any[])[0].text);
        expect(applied).to.equal(false);
        expect(decision.op).to.equal('reject');
        expect(decision.rule_trace.map((r: any) => r.name)).to.include('memory_scan.secret_resolved_value');
      }

      // 3. The same over HTTP: 422 memory.rejected naming the rule, for the value in any field; dry runs too.
      const bodies = [
        { reason: 'content, percent-encoded', body: { content: `token=${encodeURIComponent(CANARY)}` } },
        { reason: 'description, literal', body: { content: 'the provider key lives in the vault', description: CANARY } },
        { reason: 'a metadata key, url-safe base64', body: { content: 'about the provider key', metadata: { [url(b64(CANARY))]: 'x' } } },
        { reason: 'content, inside a Basic auth header', body: { content: `header ${EMBEDDED[1]}` } },
      ];
      for (const b of bodies) {
        const res = await api.post('/api/memory', { scope: 'workspace', workspace_id: ws.id, type: 'reference', name: 'provider', ...b.body });
        expect(res.status, b.reason).to.equal(422);
        expect(res.body.code, b.reason).to.equal('memory.rejected');
        expect(res.body.details.decision.rule_trace.map((r: any) => r.name), b.reason).to.include('memory_scan.secret_resolved_value');
      }
      const listed = await api.get(`/api/memory?scope=workspace&workspace_id=${ws.id}`);
      expect(listed.status).to.equal(200);
      expect(listed.body.memories, 'no rejected write stored a memory').to.deep.equal([]);

      // A write without the secret is stored, and recall finds it but never the canary.
      const ok = await api.post('/api/memory', { scope: 'workspace', workspace_id: ws.id, type: 'reference', name: 'provider', content: 'the provider key lives in the vault under providers/masking' });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
      expect(ok.body.applied).to.equal(true);
      const searched = await api.post('/api/memory/search', { query_text: `provider key ${CANARY}`, workspace_id: ws.id });
      expect(searched.status).to.equal(200);
      expect(JSON.stringify(searched.body)).to.include('providers/masking');
      const recalled = await callTool('svc__memory_search', { query_text: `provider key ${b64(CANARY)}` });
      expect(JSON.stringify(recalled)).to.include('providers/masking');
      await eventually(async () => expect(stream!.events.map((e) => JSON.parse(e.data).type)).to.include('memory.write.committed'));

      // Everything a reader can see afterwards.
      for (const p of [`/api/sessions/${s.id}/events`, `/api/memory?scope=workspace&workspace_id=${ws.id}`, `/api/memory/decisions?scope=workspace&workspace_id=${ws.id}`,
        `/api/memory/daily?scope=workspace&workspace_id=${ws.id}`, '/api/sessions', '/api/hooks/runs']) {
        expect((await api.get(p)).status, p).to.equal(200);
      }
      expect(api.answers.length).to.be.greaterThan(15);
      for (const a of [...api.answers, ...toolAnswers]) noLeak(a, a.slice(0, 120));
      noLeak(stream.events.map((e) => e.data).join('\n'), 'the events stream');
      noLeak(JSON.stringify(await service.bus!.latest(100_000)), 'the bus');
      expect(log.some((l) => l.includes('vault secret written')), 'the log stream is captured').to.equal(true);
      for (const line of log) noLeak(line, `log line ${line.slice(0, 120)}`);
      const r = redis.client();
      try {
        const { keys, text } = await redisText(r);
        expect(keys).to.be.greaterThan(20);
        for (const [k, v] of text) noLeak(v, `Redis key ${k}`);
      } finally {
        r.disconnect();
      }
    });

    it('masks a known value in a tool\'s result even when the backend does not hold it (an echo tool handed the vault value)', async () => {
      expect((await api.put('/api/vault/secrets', { ref: 'vault:providers/echo/key', secret_value: CANARY })).status).to.equal(200);
      const put = await api.put('/api/resources/mcp_server/echoer', { scope: { kind: 'global' }, expected_version: 0, spec: { name: 'echoer', command: process.execPath, args: ['--import', 'tsx', path.resolve('test/helpers/mcp-server.ts')] } });
      expect(put.status, JSON.stringify(put.body)).to.equal(201);
      await eventually(async () => expect((await api.get('/api/tools/mcp__echoer__echo')).status).to.equal(200));
      const table = [
        { reason: 'the value', text: `key ${CANARY}` },
        { reason: 'its base64', text: `key ${b64(CANARY)}` },
        { reason: 'its URL encoding', text: `key ${encodeURIComponent(CANARY)}` },
      ];
      for (const t of table) {
        const res = await api.post('/api/tools/mcp__echoer__echo/invoke', { input: { text: t.text } });
        expect(res.status, JSON.stringify(res.body)).to.equal(200);
        expect(res.body.result.content[0].text, t.reason).to.equal('key [REDACTED]');
      }
      const plain = await api.post('/api/tools/mcp__echoer__echo/invoke', { input: { text: 'nothing secret' } });
      expect(plain.body.result.content[0].text).to.equal('nothing secret');
      for (const a of api.answers) noLeak(a, a.slice(0, 120));
    });

    it('a sync record hook keeps the event as published: a vault value in a gated event\'s field is masked in the run record', async () => {
      expect((await api.put('/api/vault/secrets', { ref: 'vault:hooks/audit/key', secret_value: CANARY })).status).to.equal(200);
      const put = await api.put('/api/resources/hook.binding/audit?wait=true', {
        scope: { kind: 'global' }, expected_version: 0,
        spec: { name: 'audit', event: 'session.pre_create', source: 'native', mode: 'sync', executor_kind: 'native', metadata: { builtin: 'record' } },
      });
      expect(put.status, JSON.stringify(put.body)).to.equal(201);
      const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
      expect((await api.post('/api/sessions', { workspace: ws.id, name: `deploy with ${b64(CANARY)}` })).status).to.equal(201);
      const runs = await eventually(async () => {
        const res = await api.get('/api/hooks/runs?binding=audit');
        expect(res.body.runs).to.have.length(1);
        return res.body.runs as any[];
      });
      expect(runs[0].record).to.include({ event: 'session.pre_create', name: 'deploy with [REDACTED]' });
      noLeak(JSON.stringify(runs), 'the hook run record');
    });

    it('masks a memory stored before its value became a secret in every memory read (list, search, decisions, daily logs), and leaves the others as they were', async () => {
      const later = `later-${randomBytes(10).toString('hex')}`;
      const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
      const write = (name: string, content: string) => api.post('/api/memory', { scope: 'workspace', workspace_id: ws.id, type: 'reference', name, content });
      expect((await write('deploy token', `the deploy token is ${later}`)).status).to.equal(200);
      expect((await write('deploy host', 'deploys go to the staging cluster first')).status).to.equal(200);
      expect((await api.put('/api/vault/secrets', { ref: 'vault:providers/later/token', secret_value: later })).status).to.equal(200);
      const q = `scope=workspace&workspace_id=${ws.id}`;
      const reads = {
        list: await api.get(`/api/memory?${q}`),
        search: await api.post('/api/memory/search', { query_text: 'deploy token', workspace_id: ws.id }),
        decisions: await api.get(`/api/memory/decisions?${q}`),
        daily: await api.get(`/api/memory/daily?${q}`),
      };
      for (const [name, res] of Object.entries(reads)) {
        expect(res.status, name).to.equal(200);
        expect(JSON.stringify(res.body), name).to.not.include(later);
      }
      const contents = (reads.list.body.memories as any[]).map((m) => m.content).sort();
      expect(contents).to.deep.equal(['deploys go to the staging cluster first', 'the deploy token is [REDACTED]']);
      expect(JSON.stringify(reads.search.body)).to.include('the deploy token is [REDACTED]');
    });
  });

  describe('api and runtime in separate processes', () => {
    // NOTE: the env: canary is in both processes' environment (as a deployment gives every role the same variables).
    const ENV_CANARY = `envc4n/${randomBytes(12).toString('hex')}+q=r s`;
    const cluster = new ProcessCluster('masking', { SVC_VAULT_KEYS: `k1=${randomBytes(32).toString('base64')}`, SVC_SECRET_MASKING_CANARY: ENV_CANARY, LOG_LEVEL: 'debug' }).install();
    let mcp: McpClient | undefined;
    let stream: SseReader | undefined;
    afterEach(async () => {
      stream?.close();
      await mcp?.close();
    });

    it('an api process masks a value only a runtime process resolved: the events stream, memory writes (rejected), answers, Redis and both logs hold neither canary', async () => {
      writeFileSync(path.join(cluster.data, 'config.yaml'), 'tools:\n  permission_mode: approve-all\n');
      const apiProc = await cluster.start('api,controller');
      const runtime = await cluster.start('runtime', { SVC_API_URL: apiProc.url });
      const api = new RecordingClient(apiProc.url);
      expect((await api.put('/api/vault/secrets', { ref: 'vault:providers/split/key', secret_value: CANARY })).status).to.equal(200);
      const agent = await api.put('/api/resources/agent/split', {
        scope: { kind: 'global' }, expected_version: 0,
        spec: { name: 'split', prompt: 'p', command: SCRIPTED_COMMAND, secret_env: { API_KEY: 'vault:providers/split/key', OTHER_KEY: 'env:SVC_SECRET_MASKING_CANARY' } },
      });
      expect(agent.status, JSON.stringify(agent.body)).to.equal(201);
      const ws = (await api.post('/api/workspaces', { root_dir: cluster.root })).body.workspace;
      stream = await new SseReader(`${apiProc.url}/api/events/stream`).open();
      const s = await eventually(async () => {
        const res = await api.post('/api/sessions', { workspace: ws.id, agent_name: 'split' });
        expect(res.status, JSON.stringify(res.body)).to.equal(201);
        expect(res.body.session.state).to.equal('active');
        return res.body.session;
      }, 30_000, 200);
      const env = environOf(agentPid(s.id));
      expect([env.API_KEY, env.OTHER_KEY]).to.deep.equal([CANARY, ENV_CANARY]);

      // The prompt reaches the api process, which publishes input.pre_submit; only the runtime resolved the values.
      const sent = await api.call('POST', `/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { message: `keys ${b64(CANARY)} and ${encodeURIComponent(ENV_CANARY)}` });
      expect(sent.status).to.equal(200);
      const preSubmit = await eventually(async () => {
        const ev = stream!.events.map((e) => JSON.parse(e.data)).find((e) => e.type === 'input.pre_submit');
        expect(ev).to.not.equal(undefined);
        return ev;
      });
      expect(preSubmit.data.text).to.equal('keys [REDACTED] and [REDACTED]');

      // The agent's memory writes reach the api process too: rejected, nothing stored.
      mcp = new McpClient({ name: 'masking-split', version: '1.0.0' });
      await mcp.connect(new StreamableHTTPClientTransport(new URL(`${apiProc.url}/api/agent/mcp`), { requestInit: { headers: { authorization: `Bearer ${env.SVC_SESSION_TOKEN}` } } }));
      const answers: string[] = [];
      for (const content of [`vault key ${CANARY}`, `env key ${url(b64(ENV_CANARY))}`]) {
        const res = await mcp.callTool({ name: 'svc__memory_write', arguments: { scope: 'workspace', type: 'reference', name: 'keys', content } });
        answers.push(JSON.stringify(res));
        const { decision, applied } = JSON.parse((res.content as any[])[0].text);
        expect([decision.op, applied]).to.deep.equal(['reject', false]);
        expect(decision.rule_trace.map((r: any) => r.name)).to.include('memory_scan.secret_resolved_value');
      }
      expect((await api.get(`/api/memory?scope=workspace&workspace_id=${ws.id}`)).body.memories).to.deep.equal([]);
      await eventually(async () => expect(stream!.events.map((e) => JSON.parse(e.data).type)).to.include('memory.write.rejected'));
      await api.get(`/api/sessions/${s.id}/events`);

      const leaks = (text: string, where: string) => {
        noLeak(text, where);
        for (const form of [ENV_CANARY, b64(ENV_CANARY), url(b64(ENV_CANARY)), encodeURIComponent(ENV_CANARY)]) expect(text.includes(form), `${where} holds the env: canary`).to.equal(false);
      };
      for (const a of [...api.answers, ...answers]) leaks(a, a.slice(0, 120));
      leaks(stream.events.map((e) => e.data).join('\n'), 'the events stream');
      leaks(apiProc.stderr, 'the api process log');
      leaks(runtime.stderr, 'the runtime process log');
      const r = cluster.redis.client();
      try {
        const { keys, text } = await redisText(r);
        expect(keys).to.be.greaterThan(20);
        for (const [k, v] of text) leaks(v, `Redis key ${k}`);
      } finally {
        r.disconnect();
      }
    });
  });
});
