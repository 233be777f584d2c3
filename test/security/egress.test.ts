import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { ConfigError, loadConfig } from '../../runtime/process/config.ts';
import { sha256 } from '../../runtime/process/auth.ts';
import type { Service } from '../../runtime/process/service.ts';
import { WebhookClient } from '../../runtime/notifications/webhook.ts';
import { EgressPolicy, failureOf } from '../../runtime/security/egress.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';

/** CANARY is what the upstreams answer in their bodies: no status, answer or log may ever carry it. */
const CANARY = 'canary-upstream-body-7c1e55d0a9';
const TOKEN_VAR = 'SVC_SECRET_EGRESS_TOKEN';
const TOKEN = 'egress-bearer-token-5f0a2e9c81';

/** Listener is a local HTTP server standing in for a host; it records every request it receives. */
class Listener {
  readonly requests: { method: string; url: string; headers: http.IncomingHttpHeaders }[] = [];
  url = '';
  private server?: http.Server;

  constructor(private readonly host: string, private readonly handle: (req: http.IncomingMessage, res: http.ServerResponse) => void) {}

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      this.requests.push({ method: req.method!, url: req.url!, headers: req.headers });
      this.handle(req, res);
    });
    await new Promise<void>((r) => this.server!.listen(0, this.host, () => r()));
    this.url = `http://${this.host}:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

const condition = (status: any, type: string) => status?.conditions?.find((c: any) => c.type === type);

describe('Security: egress (token mode; 127.0.0.1 stands in for an internal host, 127.0.0.2 is the listed one)', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-egress-'));
  const tokens = path.join(dir, 'tokens.yaml');
  // NOTE: the internal host answers everything with 200 and the canary: any request that reached it would show.
  const internal = new Listener('127.0.0.1', (_req, res) => res.end(JSON.stringify({ data: [{ id: CANARY }], skills: [], servers: [], note: CANARY })));
  const listed = new Listener('127.0.0.2', (req, res) => {
    const url = req.url ?? '';
    if (url.startsWith('/hook')) return void res.end();
    if (url.startsWith('/redirect/')) {
      res.writeHead(302, { location: `${internal.url}/${url.slice('/redirect/'.length)}` });
      return void res.end();
    }
    if (url === '/index.json') return void res.end(JSON.stringify({ skills: [] }));
    if (url.startsWith('/ok/v1/models')) return void res.end(JSON.stringify({ data: [{ id: 'listed-model-1' }] }));
    // Every other path fails, echoing the canary and what it was sent.
    res.statusCode = 503;
    res.end(JSON.stringify({ error: { message: `${CANARY} ${req.headers.authorization ?? ''}` } }));
  });
  let service: Service;
  const call = (token: string, method: string, p: string, body?: unknown) => new Client(service.url).call(method, p, body, { authorization: `Bearer ${token}` });
  const settings = (doc: Record<string, unknown>) => writeFileSync(path.join(dir, 'data', 'config.yaml'), stringify(doc));
  const putRecord = async (kind: string, id: string, spec: Record<string, unknown>, token = 'op') => {
    const res = await call(token, 'PUT', `/api/resources/${kind}/${id}`, { scope: { kind: 'global' }, expected_version: 0, spec });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  };
  const status = async (kind: string, id: string) => (await call('op', 'GET', `/api/resources/${kind}/${id}/status`)).body.status;
  const bridge = (url: string, more: Record<string, unknown> = {}) => ({
    platform: 'webhook', extension_name: 'webhook', display_name: 'b', enabled: true, provider_config: { url, secret_headers: { Authorization: `env:${TOKEN_VAR}` }, ...more },
  });

  before(async () => {
    process.env[TOKEN_VAR] = TOKEN;
    await redis.start();
    await internal.start();
    await listed.start();
    writeFileSync(tokens, `tokens:\n  - {name: gitops, role: operator, sha256: ${sha256('op')}}\n  - {name: platform, role: admin, sha256: ${sha256('adm')}}\n`);
    service = await startService(redis.url, {
      AUTH_MODE: 'token', AUTH_TOKENS_FILE: tokens, DATA_DIR: path.join(dir, 'data'), EGRESS_ALLOWLIST: '127.0.0.2', SVC_VAULT_KEYS: `k1=${Buffer.alloc(32, 3).toString('base64')}`,
      NOTIFY_BACKOFF: '200ms', NOTIFY_MAX_BACKOFF: '1s', NOTIFY_HEALTH_INTERVAL: '500ms', NOTIFY_TIMEOUT: '2s',
    });
  });
  after(async () => {
    delete process.env[TOKEN_VAR];
    await service?.stop();
    await internal.stop();
    await listed.stop();
    await redis.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
  afterEach(() => {
    // NOTE: whatever a test did, the internal host must have received nothing at all.
    expect(internal.requests, 'requests that reached the internal host').to.deep.equal([]);
  });

  it('a bridge an operator points at an internal host with a secret header: its probe and its deliveries never leave; the status says egress_denied', async () => {
    await putRecord('bridge.instance', 'scan', bridge(`${internal.url}/admin`));
    const s = await eventually(async () => {
      const st = await status('bridge.instance', 'scan');
      expect(condition(st, 'Connected'), JSON.stringify(st)).to.include({ status: 'False', reason: 'BridgeUnreachable' });
      return st;
    });
    expect(condition(s, 'Connected').message).to.equal('the receiver is unreachable (egress_denied)');
    expect(JSON.stringify(s)).to.not.match(/ECONNREFUSED|127\.0\.0\.1/);
    const preset = await call('adm', 'POST', '/api/notifications/presets', { name: 'leak', enabled: true, events: ['egress.*'], targets: [{ bridge_id: 'scan' }] });
    expect(preset.status, JSON.stringify(preset.body)).to.equal(201);
    await service.bus!.publishMany([{ type: 'egress.ping', source: 'test', outcome: 'warning', summary: 'ping', data: {} }]);
    const rows = await eventually(async () => {
      const d = (await call('op', 'GET', '/api/notifications/deliveries?limit=100')).body.deliveries as any[];
      expect(d.some((r) => r.attempts >= 1 && r.last_error), JSON.stringify(d)).to.equal(true);
      return d;
    });
    expect(rows[0]).to.include({ bridge_id: 'scan', last_status: 0, last_error: 'the receiver is unreachable (egress_denied)' });
    expect(JSON.stringify(rows)).to.not.include(TOKEN);
  });

  it('a bridge whose env: ref is outside SECRET_ENV_ALLOWLIST is refused when written (422 naming the field), and nothing is stored', async () => {
    for (const [more, field] of [
      [{ secret_headers: { Authorization: 'env:REDIS_URL' } }, 'spec.provider_config.secret_headers.Authorization'],
      [{ secret_headers: {}, secret_ref: 'env:AUTH_TOKENS_FILE' }, 'spec.provider_config.secret_ref'],
    ] as const) {
      for (const q of ['', '?dry_run=true']) {
        const res = await call('op', 'PUT', `/api/resources/bridge.instance/envref${q}`, { scope: { kind: 'global' }, expected_version: 0, spec: bridge(`${listed.url}/hook`, more) });
        expect(res.status, JSON.stringify(res.body)).to.equal(422);
        expect(res.body.diagnostic.code).to.equal('secret_ref_not_allowed');
        expect(res.body.diagnostic.evidence).to.have.property(field).that.includes('SECRET_ENV_ALLOWLIST');
      }
    }
    expect((await call('op', 'GET', '/api/resources/bridge.instance/envref')).status).to.equal(404);
  });

  it('a vault secret goes only to the hosts its allowed_hosts names: an operator cannot point it elsewhere (422 when written, refused at send after the admin narrows it)', async () => {
    const VAULT_TOKEN = 'vault-bridge-token-0d6b3f7e21a4';
    const putSecret = (ref: string, more: Record<string, unknown> = {}, token = 'adm') => call(token, 'PUT', '/api/vault/secrets', { ref, secret_value: VAULT_TOKEN, ...more });
    expect((await putSecret('vault:bridges/x', { allowed_hosts: ['127.0.0.2'] }, 'op')).status).to.equal(403);
    const bad = await putSecret('vault:bridges/x', { allowed_hosts: ['https://a.example/path'] });
    expect(bad.status).to.equal(400);
    expect(bad.body.diagnostic.evidence).to.have.property('allowed_hosts');
    const bound = await putSecret('vault:bridges/hook', { allowed_hosts: ['127.0.0.2', '*.hooks.example'] });
    expect(bound.status, JSON.stringify(bound.body)).to.equal(200);
    expect(bound.body.secret.allowed_hosts).to.deep.equal(['127.0.0.2', '*.hooks.example']);
    expect((await putSecret('vault:bridges/open')).status).to.equal(200);
    const listedSecrets = (await call('op', 'GET', '/api/vault/secrets?namespace=bridges')).body.secrets;
    expect(listedSecrets.map((x: any) => [x.ref, x.allowed_hosts])).to.deep.equal([['vault:bridges/hook', ['127.0.0.2', '*.hooks.example']], ['vault:bridges/open', undefined]]);
    expect(JSON.stringify(listedSecrets)).to.not.include(VAULT_TOKEN);

    const vaultBridge = (url: string, ref: string) => ({ ...bridge(url), provider_config: { url, secret_headers: { Authorization: ref } } });
    for (const [url, ref, why] of [
      ['http://collector.attacker.example/h', 'vault:bridges/hook', 'may be sent only to 127.0.0.2, *.hooks.example, not to collector.attacker.example'],
      [`${listed.url}/hook`, 'vault:bridges/open', 'has no allowed_hosts'],
    ]) {
      const res = await call('op', 'PUT', '/api/resources/bridge.instance/steal', { scope: { kind: 'global' }, expected_version: 0, spec: vaultBridge(url, ref) });
      expect(res.status, JSON.stringify(res.body)).to.equal(422);
      expect(res.body.diagnostic.code).to.equal('secret_destination_not_allowed');
      expect(res.body.diagnostic.evidence['spec.provider_config.secret_headers.Authorization']).to.include(why);
    }
    expect((await call('op', 'GET', '/api/resources/bridge.instance/steal')).status).to.equal(404);

    await putRecord('bridge.instance', 'vaulted', vaultBridge(`${listed.url}/hook`, 'vault:bridges/hook'));
    await eventually(async () => expect(condition(await status('bridge.instance', 'vaulted'), 'Connected')).to.include({ status: 'True' }));
    const sentWithSecret = () => listed.requests.filter((r) => r.headers.authorization === VAULT_TOKEN).length;
    expect(sentWithSecret()).to.be.greaterThan(0);
    // The admin narrows the secret's hosts: from then on the bridge sends it nowhere, and says why.
    expect((await putSecret('vault:bridges/hook', { allowed_hosts: ['hooks.example.com'] })).status).to.equal(200);
    const st = await eventually(async () => {
      const s2 = await status('bridge.instance', 'vaulted');
      expect(condition(s2, 'Connected'), JSON.stringify(s2)).to.include({ status: 'False', reason: 'SecretHostNotAllowed' });
      return s2;
    });
    expect(condition(st, 'Connected').message).to.include('may be sent only to hooks.example.com');
    const sent = sentWithSecret();
    const preset = await call('adm', 'POST', '/api/notifications/presets', { name: 'vaulted', enabled: true, events: ['bound.*'], targets: [{ bridge_id: 'vaulted' }] });
    expect(preset.status, JSON.stringify(preset.body)).to.equal(201);
    await service.bus!.publishMany([{ type: 'bound.ping', source: 'test', outcome: 'warning', summary: 'ping', data: {} }]);
    await eventually(async () => {
      const d = (await call('op', 'GET', '/api/notifications/deliveries?limit=100')).body.deliveries as any[];
      expect(d.find((r) => r.bridge_id === 'vaulted' && r.attempts >= 1)?.last_error, JSON.stringify(d)).to.include('allowed_hosts');
    });
    expect(sentWithSecret()).to.equal(sent);
  });

  it('the webhook client refuses every spelling of an internal address (name, IPv4-mapped, metadata) before any byte is sent', async () => {
    const client = new WebhookClient(new EgressPolicy({ authMode: 'token', egressAllowlist: ['127.0.0.2'] }));
    const port = new URL(internal.url).port;
    try {
      for (const url of [`${internal.url}/x`, `http://localhost:${port}/x`, `http://[::ffff:127.0.0.1]:${port}/x`, `http://[::1]:${port}/x`, 'http://169.254.169.254/latest/meta-data/']) {
        expect(await client.post(url, { Authorization: TOKEN }, '{}', 2000), url).to.deep.equal({ status: 0, error: 'egress_denied' });
      }
      expect(await client.post(`${listed.url}/hook`, {}, '{}', 2000)).to.deep.equal({ status: 200 });
    } finally {
      client.close();
    }
  });

  it('a bridge to the listed host connects; one whose health path fails says the status code, never the body', async () => {
    await putRecord('bridge.instance', 'ok', bridge(`${listed.url}/hook`));
    await putRecord('bridge.instance', 'down', bridge(`${listed.url}/hook`, { health_path: '/health' }));
    await eventually(async () => expect(condition(await status('bridge.instance', 'ok'), 'Connected')).to.include({ status: 'True' }));
    const down = await eventually(async () => {
      const st = await status('bridge.instance', 'down');
      expect(condition(st, 'Connected')).to.include({ status: 'False', reason: 'BridgeUnreachable' });
      return st;
    });
    expect(condition(down, 'Connected').message).to.equal('the receiver answered 503 (http_status)');
    expect(JSON.stringify(down)).to.not.include(CANARY);
    expect(listed.requests.some((r) => r.url === '/health' && r.headers.authorization === TOKEN)).to.equal(true);
  });

  it('a remote MCP server at an internal host is never contacted (egress_denied); at a listed host that fails, the status names http_status and the code, not the body', async () => {
    await putRecord('mcp_server', 'scan', { name: 'scan', transport: 'http', url: `${internal.url}/mcp` });
    await putRecord('mcp_server', 'sse', { name: 'sse', transport: 'sse', url: `${internal.url}/sse` });
    await putRecord('mcp_server', 'fails', { name: 'fails', transport: 'http', url: `${listed.url}/mcp` });
    for (const id of ['scan', 'sse']) {
      const st = await eventually(async () => {
        const s = await status('mcp_server', id);
        expect(condition(s, 'Connected'), JSON.stringify(s)).to.include({ status: 'False', reason: 'mcp_unreachable' });
        return s;
      });
      expect(condition(st, 'Connected').message, id).to.include('egress_denied');
    }
    const failed = await eventually(async () => {
      const s = await status('mcp_server', 'fails');
      expect(condition(s, 'Connected'), JSON.stringify(s)).to.include({ status: 'False', reason: 'mcp_unreachable' });
      return s;
    });
    expect(condition(failed, 'Connected').message).to.equal('the server answered 503 (http_status)');
    expect(JSON.stringify(failed)).to.not.include(CANARY);
  });

  it('a marketplace source at an internal host, or one the listed host redirects there, is refused (egress_denied); the listed source syncs', async () => {
    const refresh = async (sources: unknown[]) => {
      settings({ marketplace: { refresh_interval: '0s', sources } });
      const res = await call('adm', 'POST', '/api/marketplace/refresh?kind=skill', {});
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      return (res.body.kinds as any[]).find((k) => k.kind === 'skill');
    };
    expect(await refresh([{ id: 'internal', type: 'index', url: `${internal.url}/index.json` }])).to.include({ stale: true, error_class: 'egress_denied' });
    const before = listed.requests.length;
    expect(await refresh([{ id: 'hop', type: 'index', url: `${listed.url}/redirect/index.json` }])).to.include({ stale: true, error_class: 'egress_denied' });
    expect(listed.requests.slice(before).map((r) => r.url)).to.include('/redirect/index.json');
    expect(await refresh([{ id: 'team', type: 'index', url: `${listed.url}/index.json` }])).to.include({ stale: false, error_class: '' });
    const page = (await call('op', 'GET', '/api/marketplace/skill')).body;
    expect(JSON.stringify(page)).to.not.include(CANARY);
  });

  it('a model provider at an internal host is never asked (egress_denied); a listed one failing says http_status and the code, never the body or the key', async () => {
    const refresh = async (name: string, url: string) => {
      settings({ providers: [{ name, kind: 'openai-compatible', base_url: `${url}/v1`, api_key: `env:${TOKEN_VAR}` }] });
      const res = await call('adm', 'POST', `/api/model-catalog/providers/${name}/models/refresh`, { force: true });
      const live = (await call('op', 'GET', `/api/model-catalog/providers/${name}/models/status`)).body.sources.find((s: any) => s.source_id === `provider_live:${name}`);
      return { res, live };
    };
    const scan = await refresh('scan', internal.url);
    expect(scan.live).to.include({ refresh_state: 'failed' });
    expect(scan.live.last_error).to.include('egress_denied');
    const failing = await refresh('failing', `${listed.url}/bad`);
    expect(failing.live).to.include({ refresh_state: 'failed' });
    expect(failing.live.last_error).to.equal('provider failing answered HTTP 503 (http_status)');
    for (const r of [scan, failing]) expect(JSON.stringify(r)).to.not.include(CANARY).and.not.include(TOKEN);
    const ok = await refresh('fine', `${listed.url}/ok`);
    expect(ok.live).to.include({ refresh_state: 'succeeded', row_count: 1 });
  });
});

describe('Security: the egress rule itself', () => {
  it('refuses internal addresses under authentication unless listed; AUTH_MODE=none keeps loopback only', () => {
    const token = new EgressPolicy({ authMode: 'token', egressAllowlist: ['10.1.0.0/16', 'hooks.internal.example', '*.corp.example', 'fd00::5'] });
    const none = new EgressPolicy({ authMode: 'none' });
    const cases: [string, string, boolean, boolean][] = [
      // host, address, allowed with token, allowed with none
      ['a.example', '93.184.216.34', true, true],
      ['a.example', '127.0.0.1', false, true],
      ['a.example', '::1', false, true],
      ['a.example', '::ffff:127.0.0.1', false, true],
      ['a.example', '169.254.169.254', false, false],
      ['a.example', '::ffff:169.254.169.254', false, false],
      ['a.example', '10.0.0.8', false, false],
      ['a.example', '10.1.2.3', true, false],
      ['a.example', '172.16.0.1', false, false],
      ['a.example', '192.168.1.1', false, false],
      ['a.example', '100.64.0.1', false, false],
      ['a.example', '0.0.0.0', false, false],
      ['a.example', 'fe80::1', false, false],
      ['a.example', 'fe80::1%eth0', false, false],
      ['a.example', 'fc00::1', false, false],
      ['a.example', 'fd00::5', true, false],
      ['a.example', '2606:4700::1111', true, true],
      ['hooks.internal.example', '10.9.9.9', true, false],
      ['x.corp.example', '192.168.5.5', true, false],
      ['corp.example', '192.168.5.5', false, false],
    ];
    for (const [host, address, withToken, withNone] of cases) {
      expect(token.allows(host, address), `token ${host} ${address}`).to.equal(withToken);
      expect(none.allows(host, address), `none ${host} ${address}`).to.equal(withNone);
    }
  });

  it('classifies failures without their text: egress_denied, timeout, connect_failed', async () => {
    const policy = new EgressPolicy({ authMode: 'token' });
    try {
      expect(failureOf(await policy.fetch('http://127.0.0.1/').catch((e) => e))).to.equal('egress_denied');
      expect(failureOf(Object.assign(new Error('x'), { name: 'TimeoutError' }))).to.equal('timeout');
      expect(failureOf(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).to.equal('connect_failed');
    } finally {
      await policy.close();
    }
  });

  it('a bad EGRESS_ALLOWLIST entry stops the start, naming it', () => {
    expect(() => loadConfig({ EGRESS_ALLOWLIST: '10.0.0.0/99,https://x.example/path' })).to.throw(ConfigError, /EGRESS_ALLOWLIST entry "10.0.0.0\/99".*EGRESS_ALLOWLIST entry "https:\/\/x.example\/path"/s);
    expect(loadConfig({ EGRESS_ALLOWLIST: '10.0.0.0/8, *.example.com ,hooks.example.com,::1' }).security.egressAllowlist).to.deep.equal(['10.0.0.0/8', '*.example.com', 'hooks.example.com', '::1']);
  });
});
