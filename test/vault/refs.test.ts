import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { signWebhook } from '../../runtime/automation/webhooks.ts';
import { loadConfig } from '../../runtime/process/config.ts';
import { Service } from '../../runtime/process/service.ts';
import { agentPid, environOf, SCRIPTED_COMMAND } from '../helpers/agents.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually } from '../helpers/service.ts';

const FIXTURE = path.resolve('test/helpers/mcp-server.ts');
const CANARY = 'vault-canary-7e3a91c4d2b8f0';

/** RecordingClient is a Client that keeps every answer (status line, headers, body) it received. */
class RecordingClient extends Client {
  readonly answers: string[] = [];
  override async call(method: string, p: string, body?: unknown, headers: Record<string, string> = {}) {
    const res = await super.call(method, p, body, headers);
    this.answers.push(`${method} ${p} ${res.status} ${JSON.stringify([...res.headers])} ${typeof res.body === 'string' ? res.body : JSON.stringify(res.body)}`);
    return res;
  }
}

describe('Vault refs in use: resolution, SecretNotFound, and the leak test (real Redis, real processes)', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  let service: Service;
  let api: RecordingClient;
  let root: string;
  let dataDir: string;
  let log: string[];

  const put = async (kind: string, id: string, spec: unknown, scope: unknown = { kind: 'global' }) => {
    const res = await api.put(`/api/resources/${kind}/${id}`, { scope, spec, expected_version: 0 });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  };
  const status = async (kind: string, id: string) => (await api.get(`/api/resources/${kind}/${id}/status`)).body.status;
  const condition = (st: any, type: string) => st?.conditions?.find((c: any) => c.type === type);

  before(() => redis.start());
  after(() => redis.destroy());
  beforeEach(async () => {
    await redis.flush();
    root = mkdtempSync(path.join(os.tmpdir(), 'svc-vault-refs-'));
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-vault-refs-data-'));
    writeFileSync(path.join(dataDir, 'config.yaml'), 'tools:\n  trusted_sources: [leaky]\n');
    log = [];
    // NOTE: the service's whole pino stream at debug, as it would reach stderr.
    const sink = new Writable({ write(chunk, _enc, cb) { log.push(String(chunk)); cb(); } });
    service = new Service(loadConfig({ REDIS_URL: redis.url, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, RESYNC_INTERVAL: '5m', LOG_LEVEL: 'debug' }), sink);
    await service.start();
    api = new RecordingClient(service.url);
  });
  afterEach(async () => {
    await service.stop();
    rmSync(root, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('an mcp_server whose vault: ref is missing is Degraded SecretNotFound naming the ref, then Ready after the PUT with no edit; deleting it degrades it again', async () => {
    await put('mcp_server', 'leaky', { name: 'leaky', command: process.execPath, args: ['--import', 'tsx', FIXTURE], secret_env: { FIXTURE_TOKEN: 'vault:mcp/leaky/token' } });
    const degraded = await eventually(async () => {
      const st = await status('mcp_server', 'leaky');
      expect(condition(st, 'Degraded')).to.include({ status: 'True', reason: 'SecretNotFound' });
      return st;
    });
    expect(condition(degraded, 'Degraded').message).to.include('secret_env.FIXTURE_TOKEN').and.include('vault:mcp/leaky/token does not exist in the vault');
    expect((await api.put('/api/vault/secrets', { ref: 'vault:mcp/leaky/token', secret_value: CANARY })).status).to.equal(200);
    const ready = await eventually(async () => {
      const st = await status('mcp_server', 'leaky');
      expect(condition(st, 'Ready')).to.include({ status: 'True' });
      return st;
    });
    expect(ready.observed_version, 'no edit: the record is still at version 1').to.equal(1);
    expect(condition(ready, 'Connected')).to.include({ status: 'True' });
    expect((await api.delete('/api/vault/secrets?ref=vault:mcp/leaky/token')).status).to.equal(204);
    await eventually(async () => expect(condition(await status('mcp_server', 'leaky'), 'Degraded')).to.include({ status: 'True', reason: 'SecretNotFound' }));
  });

  it('an agent and a hook.binding whose vault: refs are missing are Degraded SecretNotFound naming the field, then Ready after the PUT with no edit', async () => {
    await put('agent', 'keyed', { name: 'keyed', prompt: 'p', secret_env: { API_KEY: 'vault:providers/keyed/api' } });
    await put('hook.binding', 'audit', { name: 'audit', event: 'tool.pre_call', mode: 'sync', command: process.execPath, args: ['-e', '0'], secret_env: { HOOK_KEY: 'vault:hooks/audit/key' } });
    for (const [kind, id, field] of [['agent', 'keyed', 'secret_env.API_KEY'], ['hook.binding', 'audit', 'secret_env.HOOK_KEY']]) {
      await eventually(async () => {
        const d = condition(await status(kind, id), 'Degraded');
        expect(d, kind).to.include({ status: 'True', reason: 'SecretNotFound' });
        expect(d.message, kind).to.include(field);
      });
    }
    for (const ref of ['vault:providers/keyed/api', 'vault:hooks/audit/key']) expect((await api.put('/api/vault/secrets', { ref, secret_value: CANARY })).status).to.equal(200);
    for (const [kind, id] of [['agent', 'keyed'], ['hook.binding', 'audit']]) {
      const st = await eventually(async () => {
        const now = await status(kind, id);
        expect(condition(now, 'Ready'), kind).to.include({ status: 'True' });
        return now;
      });
      expect(st.observed_version, `${kind}: no edit`).to.equal(1);
    }
  });

  it('webhook triggers and bridges name a missing vault secret as SecretNotFound; a literal secret-looking env value is 422 telling the writer to use secret_env', async () => {
    await put('automation.trigger', 'hook', { name: 'hook', agent_name: 'scripted', enabled: true, event: 'webhook', endpoint_slug: 'ci', webhook_secret_ref: 'vault:automation/ci', prompt: 'p' });
    await put('bridge.instance', 'b', { platform: 'webhook', extension_name: 'webhook', display_name: 'b', enabled: true, provider_config: { url: 'http://127.0.0.1:9/x', secret_ref: 'vault:bridges/b/signing' } });
    for (const [kind, id, ref] of [['automation.trigger', 'hook', 'vault:automation/ci'], ['bridge.instance', 'b', 'vault:bridges/b/signing']]) {
      await eventually(async () => {
        const d = condition(await status(kind, id), 'Degraded');
        expect(d, kind).to.include({ status: 'True', reason: 'SecretNotFound' });
        expect(d.message).to.include(ref);
      });
    }
    const literal = await api.put('/api/resources/mcp_server/lit', { scope: { kind: 'global' }, expected_version: 0, spec: { name: 'lit', command: process.execPath, env: { API_TOKEN: CANARY } } });
    expect(literal.status).to.equal(422);
    expect(literal.body.diagnostic.evidence).to.have.property('spec.env.API_TOKEN').that.includes('put it in secret_env');
    expect(JSON.stringify(literal.body)).to.not.include(CANARY);
  });

  it('leak test: a canary written through the vault and used by an MCP server, an agent and a webhook signature appears in no answer, log line, bus or session event, support bundle file, nor in Redis', async () => {
    for (const ref of ['vault:mcp/leaky/token', 'vault:providers/leaky', 'vault:automation/leaky']) {
      expect((await api.put('/api/vault/secrets', { ref, secret_value: CANARY, kind: 'token' })).status).to.equal(200);
    }
    // An MCP server started with it: the tool that echoes its token answers redacted.
    await put('mcp_server', 'leaky', { name: 'leaky', command: process.execPath, args: ['--import', 'tsx', FIXTURE], secret_env: { FIXTURE_TOKEN: 'vault:mcp/leaky/token' } });
    await eventually(async () => expect((await api.get('/api/tools/mcp__leaky__whoami')).status).to.equal(200));
    const who = await api.post('/api/tools/mcp__leaky__whoami/invoke', { input: {} });
    expect(who.status, JSON.stringify(who.body)).to.equal(200);
    expect(who.body.result.content[0].text).to.equal('started with token [REDACTED]');
    await eventually(async () => expect(condition(await status('mcp_server', 'leaky'), 'Ready')).to.include({ status: 'True' }));

    // An agent's environment: the process holds the value, its session's events do not.
    await put('agent', 'envy', { name: 'envy', prompt: 'p', command: SCRIPTED_COMMAND, secret_env: { MODEL_API_KEY: 'vault:providers/leaky' } });
    const ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
    const s = (await api.post('/api/sessions', { workspace: ws.id, agent_name: 'envy' })).body.session;
    expect(s.state, JSON.stringify(s)).to.equal('active');
    expect(environOf(agentPid(s.id)).MODEL_API_KEY).to.equal(CANARY);
    await api.call('POST', `/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { message: 'hello' });
    await api.get(`/api/sessions/${s.id}/events`);

    // A webhook trigger signed with it: a good signature is accepted, a bad one 401.
    await put('automation.trigger', 'hook', { name: 'hook', agent_name: 'scripted', enabled: true, event: 'webhook', endpoint_slug: 'ci', webhook_secret_ref: 'vault:automation/leaky', prompt: 'deploy {{ .payload.sha }}' }, { kind: 'workspace', id: ws.id });
    await eventually(async () => expect(condition(await status('automation.trigger', 'hook'), 'Ready')).to.include({ status: 'True' }));
    const body = JSON.stringify({ sha: 'abc' });
    const ts = String(Math.floor(Date.now() / 1000));
    const ok = await api.call('POST', `/api/webhooks/workspaces/${ws.id}/ci`, body, { 'x-svc-webhook-timestamp': ts, 'x-svc-webhook-signature': signWebhook(CANARY, ts, body) });
    expect(ok.status, JSON.stringify(ok.body)).to.equal(202);
    const bad = await api.call('POST', `/api/webhooks/workspaces/${ws.id}/ci`, body, { 'x-svc-webhook-timestamp': ts, 'x-svc-webhook-signature': signWebhook('wrong', ts, body) });
    expect(bad.status).to.equal(401);
    await eventually(async () => expect((await api.get(`/api/automation/runs/${ok.body.run_id}`)).body.run.status).to.equal('succeeded'), 20_000, 100);

    // Every read route a client would call afterwards.
    for (const p of ['/api/vault/secrets', '/api/vault/status', '/api/vault/secrets/metadata?ref=vault:mcp/leaky/token', '/api/resources', '/api/tools', '/api/agents',
      '/api/resources/mcp_server/leaky/status', '/api/automation/runs', '/api/sessions', `/api/sessions/${s.id}/events`, '/api/hooks/runs', '/metrics']) {
      expect((await api.get(p)).status, p).to.be.oneOf([200]);
    }
    await api.post('/api/vault/rotate', {});
    // A support bundle, built and extracted with the system tar: no file holds the canary.
    const requested = await api.post('/api/support/bundles', { yes: true });
    expect(requested.status, JSON.stringify(requested.body)).to.equal(202);
    const opId = requested.body.operation.operation_id;
    await eventually(async () => expect((await api.get(`/api/support/bundles/${opId}`)).body.operation.status).to.equal('completed'), 30_000, 200);
    const archive = Buffer.from(await (await fetch(`${service.url}/api/support/bundles/${opId}/download`)).arrayBuffer());
    const unpacked = mkdtempSync(path.join(os.tmpdir(), 'svc-vault-bundle-'));
    try {
      writeFileSync(path.join(unpacked, 'b.tar.gz'), archive);
      execFileSync('tar', ['-xzf', 'b.tar.gz'], { cwd: unpacked });
      const files = readdirSync(unpacked, { recursive: true, withFileTypes: true }).filter((e) => e.isFile() && e.name !== 'b.tar.gz');
      expect(files.length).to.be.greaterThan(5);
      for (const e of files) expect(readFileSync(path.join(e.parentPath, e.name), 'latin1'), e.name).to.not.include(CANARY);
    } finally {
      rmSync(unpacked, { recursive: true, force: true });
    }

    expect(api.answers.length).to.be.greaterThan(20);
    for (const a of api.answers) expect(a, a.slice(0, 200)).to.not.include(CANARY);
    expect(log.some((l) => l.includes("vault secret written")), "the log stream is captured").to.equal(true);
    for (const line of log) expect(line).to.not.include(CANARY);
    const events = await service.bus!.latest(100_000);
    expect(events.some((e) => e.type === 'vault.secret.written')).to.equal(true);
    expect(JSON.stringify(events)).to.not.include(CANARY);
    // Redis: every key and every value, session event streams included.
    const r = redis.client();
    try {
      let cursor = '0';
      let keys = 0;
      do {
        const [next, batch] = await r.scan(cursor, 'COUNT', 500);
        cursor = next;
        for (const k of batch) {
          keys++;
          expect(k).to.not.include(CANARY);
          const dumped = await r.dumpBuffer(k);
          const t = await r.type(k);
          const text = t === 'string' ? await r.get(k) : t === 'hash' ? JSON.stringify(await r.hgetall(k)) : t === 'stream' ? JSON.stringify(await r.xrange(k, '-', '+'))
            : t === 'zset' ? JSON.stringify(await r.zrange(k, 0, -1)) : t === 'list' ? JSON.stringify(await r.lrange(k, 0, -1)) : t === 'set' ? JSON.stringify(await r.smembers(k)) : '';
          expect(text, k).to.not.include(CANARY);
          expect(dumped ? dumped.toString("latin1") : "", k).to.not.include(CANARY);
        }
      } while (cursor !== '0');
      expect(keys).to.be.greaterThan(20);
    } finally {
      r.disconnect();
    }
  });
});
