import { expect } from 'chai';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { alive, checksum, copyHello, HELLO, install, running, TRUSTED } from './helpers.ts';

/** SERVICE_VARIABLES are variables of the service's own process that no daemon may see. */
const SERVICE_VARIABLES = ['REDIS_URL', 'DATA_DIR', 'PORT', 'HOST', 'SVC_ROLES', 'LOG_LEVEL', 'EXTENSION_RESTART_BACKOFF', 'RESYNC_INTERVAL', 'SVC_VAULT_KEYS', 'SVC_CONFIG_FILE'];

describe('Extensions: install, records, daemon supervision (HTTP, real Redis, real daemon processes)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture({
    workspace: false,
    env: ({ dataDir }) => {
      writeFileSync(path.join(dataDir, 'config.yaml'), TRUSTED);
      // NOTE: the restart backoff starts at 100 ms here (1 s by default) so five failures fit a test.
      return { EXTENSION_RESTART_BACKOFF: '100ms', EXTENSION_LEASE: '3s' };
    },
  }).install();

  const owned = async (name: string) => (await f.api.get(`/api/resources?owner_kind=extension&owner_id=${name}`)).body.records as any[];
  const invoke = (id: string, input: object) => f.api.post(`/api/tools/${id}/invoke`, { input });

  it('refuses a path install whose checksum does not match with 400, and installs nothing', async () => {
    const res = await f.api.post('/api/extensions', { path: HELLO, checksum: `sha256:${'0'.repeat(64)}` });
    expect(res.status).to.equal(400);
    expect(res.body.diagnostic.code).to.equal('checksum_mismatch');
    expect(res.body.diagnostic.evidence).to.have.property('checksum');
    expect((await f.api.get('/api/extensions')).body.extensions).to.deep.equal([]);
    expect(await owned('hello')).to.deep.equal([]);
    expect(await f.service.store!.redis.keys('*{art:*')).to.deep.equal([]);
    expect(existsSync(path.join(f.dataDir, 'extensions')) ? readdirSync(path.join(f.dataDir, 'extensions')) : []).to.deep.equal([]);
  });

  it('answers the original\'s errors: neither or both 400, no checksum 400, invalid manifest 400 naming the field, exists 409', async () => {
    const neither = await f.api.post('/api/extensions', {});
    expect([neither.status, neither.body.error]).to.deep.equal([400, 'path or slug is required']);
    const both = await f.api.post('/api/extensions', { path: HELLO, slug: 'hello', checksum: await checksum(HELLO) });
    expect(both.status).to.equal(400);
    expect(both.body.error).to.match(/mutually exclusive/);
    expect((await f.api.post('/api/extensions', { path: HELLO })).status).to.equal(400);
    const unknown = await f.api.post('/api/extensions', { path: HELLO, checksum: await checksum(HELLO), chekcsum: 'x' });
    expect(unknown.status).to.equal(422);
    expect(unknown.body.diagnostic.evidence).to.have.property('chekcsum');

    const bad = copyHello((m) => { m.name = 'Bad_Name'; m.daemon.health_interval = 'soon'; });
    const invalid = await f.api.post('/api/extensions', { path: bad, checksum: await checksum(bad) });
    expect(invalid.status).to.equal(400);
    expect(invalid.body.diagnostic.code).to.equal('manifest_invalid');
    expect(invalid.body.diagnostic.evidence).to.have.keys('name', 'daemon.health_interval');
    const misspelt = copyHello((m) => { m.deamon = m.daemon; });
    expect((await f.api.post('/api/extensions', { path: misspelt, checksum: await checksum(misspelt) })).body.diagnostic.evidence).to.have.property('deamon');
    expect((await f.api.get('/api/extensions')).body.extensions).to.deep.equal([]);

    const first = await install(f.api, HELLO);
    const again = await f.api.post('/api/extensions', { path: HELLO, checksum: await checksum(HELLO) });
    expect(again.status).to.equal(409);
    expect(again.body.diagnostic.code).to.equal('extension_exists');
    const now = (await f.api.get('/api/extensions/hello')).body.extension;
    expect(now.provenance).to.deep.equal(first.provenance);
  });

  it('projects its bundle, skill and tool as records owned by the extension; the bundle is in the catalog and activates; remove while activated is 409', async () => {
    const ext = await install(f.api, HELLO);
    expect(ext).to.include({ name: 'hello', version: '1.0.0', enabled: true, source: 'path', type: 'plugin' });
    expect(ext.provenance).to.include({ checksum_verified: true, installed_by: 'local', installed_from: `path:${HELLO}` });
    expect(ext.provenance.checksum_sha256).to.match(/^[0-9a-f]{64}$/);
    expect(ext.trust).to.include({ decision: 'verified', checksum_verified: true });
    expect(ext.requires_env).to.deep.equal(['HELLO_GREETING']);
    const kids = await eventually(async () => {
      const k = await owned('hello');
      expect(k.map((r) => r.kind).sort()).to.deep.equal(['bundle', 'skill', 'tool', 'tool']);
      return k;
    });
    for (const k of kids) {
      expect(k.owner).to.deep.equal({ kind: 'extension', id: 'hello' });
      expect(k.source).to.deep.equal({ kind: 'extension', id: 'hello' });
    }
    const catalog = await eventually(async () => {
      const b = (await f.api.get('/api/bundles/catalog')).body.bundles;
      expect(b.map((x: any) => `${x.extension_name}/${x.bundle_name}`)).to.deep.equal(['hello/greeter']);
      return b;
    });
    expect(catalog[0].profiles[0]).to.include({ name: 'default', agent_count: 1 });
    const skill = await eventually(async () => {
      const s = await f.api.get('/api/skills/greeting');
      expect(s.status).to.equal(200);
      return s.body.skill;
    });
    expect(skill.provenance.installed_from_extension).to.equal('hello');

    const act = await f.api.post('/api/bundles/activations', { extension_name: 'hello', bundle_name: 'greeter', profile_name: 'default' });
    expect(act.status, JSON.stringify(act.body)).to.equal(201);
    const del = await f.api.delete('/api/extensions/hello');
    expect(del.status).to.equal(409);
    expect(del.body.diagnostic.code).to.equal('extension_has_active_bundles');
    expect((await f.api.get('/api/extensions/hello')).status).to.equal(200);
    expect((await owned('hello')).length).to.equal(4);

    expect((await f.api.delete(`/api/bundles/activations/${act.body.activation.id}`)).status).to.equal(204);
    const pid = (await running(f.api, 'hello')).pid;
    const removed = await f.api.delete('/api/extensions/hello');
    expect(removed.status).to.equal(200);
    expect(removed.body.extension).to.include({ name: 'hello', status: 'removed' });
    expect((await f.api.get('/api/extensions/hello')).status).to.equal(404);
    await eventually(async () => expect(await owned('hello')).to.deep.equal([]));
    await eventually(async () => expect(alive(pid)).to.equal(false));
    expect(await f.service.store!.redis.keys('*{art:*')).to.deep.equal([]);
    // The unpacked tree the answer names as removed is gone too (no leftovers pile up in DATA_DIR/extensions).
    expect(removed.body.extension.path).to.equal(path.join(f.dataDir, 'extensions', ext.provenance.checksum_sha256));
    await eventually(async () => expect(existsSync(removed.body.extension.path), removed.body.extension.path).to.equal(false));
  });

  it('refuses a direct write to one of its records naming the owner, and brings back a hand-deleted one', async () => {
    await install(f.api, HELLO);
    const skill = await eventually(async () => {
      const s = (await owned('hello')).find((r) => r.kind === 'skill');
      expect(s).to.not.equal(undefined);
      return s;
    });
    const put = await f.api.put(`/api/resources/skill/${skill.id}`, { scope: skill.scope, spec: { ...skill.spec, description: 'hijacked' }, expected_version: skill.version });
    expect(put.status).to.equal(409);
    expect(put.body.diagnostic.evidence.owner).to.deep.equal({ kind: 'extension', id: 'hello' });
    expect((await f.api.get(`/api/resources/skill/${skill.id}`)).body.record.spec.description).to.equal(skill.spec.description);
    expect((await f.api.delete(`/api/resources/skill/${skill.id}`, { expected_version: skill.version })).status).to.equal(204);
    const back = await eventually(async () => {
      const r = await f.api.get(`/api/resources/skill/${skill.id}`);
      expect(r.status).to.equal(200);
      return r.body.record;
    }, 10_000);
    expect(back.owner).to.deep.equal({ kind: 'extension', id: 'hello' });
    expect(back.spec).to.deep.equal(skill.spec);
  });

  it('runs its daemon: the tool is callable, the daemon sees none of the service\'s variables, and disable removes its records and stops it', async () => {
    await install(f.api, HELLO);
    const ext = await running(f.api, 'hello');
    expect(ext).to.include({ daemon_running: true, health: 'ok', state: 'Ready' });
    expect(ext.uptime_seconds).to.be.a('number');
    expect(alive(ext.pid)).to.equal(true);
    const greet = await eventually(async () => {
      const r = await invoke('ext__hello__greet', { name: 'Ada' });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      return r.body;
    });
    expect(greet.result.content[0].text).to.equal('Hello, Ada!');
    expect(greet.result.structured).to.include({ pid: ext.pid });
    expect(greet.result.structured.granted).to.deep.equal(['tools.publish']);
    const env = (await invoke('ext__hello__environment', {})).body.result.structured.names as string[];
    for (const v of SERVICE_VARIABLES) expect(env, v).to.not.include(v);
    expect(env.filter((n) => !['PATH', 'HOME', 'LANG', 'TERM', 'TMPDIR', 'TZ'].includes(n) && !n.startsWith('LC_')).sort())
      .to.deep.equal(['HELLO_GREETING', 'SVC_EXTENSION_DIR', 'SVC_EXTENSION_NAME', 'SVC_EXTENSION_VERSION']);

    const off = await f.api.post('/api/extensions/hello/disable', {});
    expect(off.status).to.equal(200);
    expect(off.body.extension).to.include({ enabled: false, state: 'Disabled' });
    await eventually(async () => expect(await owned('hello')).to.deep.equal([]));
    await eventually(async () => expect(alive(ext.pid)).to.equal(false), 10_000);
    const disabled = (await f.api.get('/api/extensions/hello')).body.extension;
    expect(disabled).to.include({ daemon_running: false, pid: 0, health: '' });
    // A disabled extension's daemon is stopped, not about to start.
    expect(disabled.daemon.state).to.equal('Stopped');
    expect(off.body.extension.daemon.state).to.equal('Stopped');
    expect((await f.api.get('/api/bundles/catalog')).body.bundles).to.deep.equal([]);
    const tool = await f.api.get('/api/tools/ext__hello__greet');
    expect(tool.status).to.equal(404);

    expect((await f.api.post('/api/extensions/hello/enable', {})).body.extension.enabled).to.equal(true);
    await running(f.api, 'hello');
    await eventually(async () => expect((await invoke('ext__hello__greet', { name: 'Bo' })).body.result?.content[0].text).to.equal('Hello, Bo!'));
  });

  it('restarts a SIGKILLed daemon with backoff, and its tool is callable again', async () => {
    await install(f.api, HELLO);
    const before = await running(f.api, 'hello');
    process.kill(before.pid, 'SIGKILL');
    const after = await eventually(async () => {
      const x = await running(f.api, 'hello');
      expect(x.pid).to.not.equal(before.pid);
      return x;
    });
    expect(after.daemon.starts).to.equal(2);
    expect(after.last_error).to.match(/killed by SIGKILL/);
    const r = await eventually(async () => {
      const res = await invoke('ext__hello__greet', { name: 'Cy' });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      return res.body;
    });
    expect(r.result.structured.pid).to.equal(after.pid);
    // NOTE: the healthy check that follows the restart ends the failure streak.
    await eventually(async () => expect((await f.api.get('/api/extensions/hello')).body.extension.daemon.failures).to.equal(0));
  });

  it('marks a daemon that always exits CrashLoop after 5 tries and starts it no sixth time; enabling again starts afresh', async () => {
    const dir = copyHello((m) => { m.daemon.env.HELLO_MODE = 'crash'; });
    await install(f.api, dir);
    const x = await eventually(async () => {
      const e = (await f.api.get('/api/extensions/hello')).body.extension;
      expect(e.daemon.state).to.equal('CrashLoop');
      return e;
    }, 20_000);
    expect(x.state).to.equal('Degraded');
    expect(x.daemon).to.include({ failures: 5, starts: 5 });
    expect(x.diagnostics.map((d: any) => d.code)).to.include('CrashLoop');
    expect(x.last_error).to.match(/exit code 3/);
    expect(x.daemon_running).to.equal(false);
    const tool = await eventually(async () => {
      const t = (await f.api.get('/api/tools/ext__hello__greet')).body.tool;
      expect(t.availability.reason_codes).to.include('extension_inactive');
      return t;
    });
    expect(tool.availability.executable).to.equal(false);
    // NOTE: well past the next backoff (1.6 s at this base): no sixth start.
    await new Promise((r) => setTimeout(r, 2500));
    expect((await f.api.get('/api/extensions/hello')).body.extension.daemon).to.include({ state: 'CrashLoop', starts: 5 });
    // enable, without a disable first, starts it again with a fresh failure count (a new generation)
    const generation = async () => JSON.parse((await f.service.store!.redis.hget(`${f.service.store!.keys.prefix}{ext}:records`, 'hello')) ?? '{}').generation;
    const g = await generation();
    const enabled = await f.api.post('/api/extensions/hello/enable', {});
    expect(enabled.status).to.equal(200);
    expect(await generation()).to.equal(g + 1);
    await eventually(async () => expect((await f.api.get('/api/extensions/hello')).body.extension.daemon.starts).to.be.at.least(1).and.below(5));
  });

  it('enable on a healthy extension changes nothing: the same daemon keeps running', async () => {
    await install(f.api, HELLO);
    const before = await running(f.api, 'hello');
    const res = await f.api.post('/api/extensions/hello/enable', {});
    expect(res.status).to.equal(200);
    expect(res.body.extension).to.include({ enabled: true });
    await new Promise((r) => setTimeout(r, 300));
    const after = await running(f.api, 'hello');
    expect(after.pid).to.equal(before.pid);
    expect(after.daemon.starts).to.equal(before.daemon.starts);
  });

  it('shows a daemon whose health answers degraded as Degraded with its message (never Pending without a word)', async () => {
    await install(f.api, copyHello((m) => { m.daemon.env.HELLO_MODE = 'degraded'; }));
    const x = await eventually(async () => {
      const e = (await f.api.get('/api/extensions/hello')).body.extension;
      expect(e.health).to.equal('degraded');
      return e;
    });
    expect(x).to.include({ state: 'Degraded', daemon_running: true, health_message: 'upstream slow: answering from cache' });
    const d = x.diagnostics.find((y: any) => y.code === 'DaemonDegraded');
    expect(d).to.include({ severity: 'warning', message: 'upstream slow: answering from cache' });
    // degraded is running, not failing: no restart, no failure counted
    expect(x.daemon).to.include({ state: 'Running', failures: 0, starts: 1 });
  });

  it('names what a daemon that cannot be spawned is missing: the resolved path, or the command not found in PATH', async () => {
    const cases = [
      { command: './bin/not-there', want: /could not be started: no such file: \S+\/bin\/not-there \(ENOENT\)/ },
      { command: 'svc-no-such-daemon', want: /could not be started: "svc-no-such-daemon" is not found in PATH \(.*\) \(ENOENT\)/ },
    ];
    for (const c of cases) {
      await install(f.api, copyHello((m) => { m.daemon.command = c.command; m.daemon.args = []; }));
      const x = await eventually(async () => {
        const e = (await f.api.get('/api/extensions/hello')).body.extension;
        expect(e.last_error).to.match(c.want);
        return e;
      });
      expect(x.last_error, c.command).to.not.equal('the daemon could not be started');
      expect(x.daemon_running).to.equal(false);
      expect((await f.api.delete('/api/extensions/hello')).status).to.equal(200);
    }
  });

  it('an extension removed while its daemon fails and installed anew under its name starts the new install\'s daemon (the generation starts at 1 again)', async () => {
    await install(f.api, copyHello((m) => { m.daemon.command = './bin/not-there'; m.daemon.args = []; }));
    await eventually(async () => expect((await f.api.get('/api/extensions/hello')).body.extension.last_error).to.match(/not-there/));
    expect((await f.api.delete('/api/extensions/hello')).status).to.equal(200);
    await install(f.api, copyHello());
    const e = await running(f.api, 'hello');
    expect(e.last_error, 'the removed install\'s failure is not the new one\'s').to.equal('');
  });

  it('leaves a daemon whose secret_env does not resolve stopped with missing_env; writing the vault secret starts it, and the value reaches the daemon but no answer', async () => {
    const dir = copyHello((m) => { delete m.daemon.env.HELLO_GREETING; m.daemon.secret_env = { HELLO_GREETING: 'vault:extensions/hello-greeting' }; });
    await install(f.api, dir);
    const waiting = await eventually(async () => {
      const e = (await f.api.get('/api/extensions/hello')).body.extension;
      expect(e.missing_env).to.deep.equal(['HELLO_GREETING']);
      return e;
    });
    expect(waiting).to.include({ daemon_running: false, state: 'Degraded' });
    expect(waiting.diagnostics.map((d: any) => d.code)).to.include('MissingEnv');
    const put = await f.api.put('/api/vault/secrets', { ref: 'vault:extensions/hello-greeting', secret_value: 'Bonjour-secret-greeting' });
    expect(put.status, JSON.stringify(put.body)).to.equal(200);
    await running(f.api, 'hello');
    const r = await eventually(async () => {
      const res = await invoke('ext__hello__greet', { name: 'Ada' });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      return res;
    });
    // NOTE: the daemon got the value (it answers with it); the tool result masks it, as an MCP server's.
    expect(JSON.stringify(r.body)).to.not.include('Bonjour-secret-greeting');
    expect(r.body.result.content[0].text).to.match(/REDACTED/);
    expect(JSON.stringify((await f.api.get('/api/extensions/hello')).body)).to.not.include('Bonjour-secret-greeting');
  });

  it('masks a daemon\'s secret values in what it wrote to stderr before failing (last_error, health_message, diagnostics)', async () => {
    const SECRET = 'Leaky-secret-value-123';
    expect((await f.api.put('/api/vault/secrets', { ref: 'vault:extensions/leaky', secret_value: SECRET })).status).to.equal(200);
    const dir = copyHello((m) => {
      m.daemon.secret_env = { LEAKY: 'vault:extensions/leaky' };
      m.daemon.args = ['-e', 'console.error("login refused for token " + process.env.LEAKY); process.exit(3)'];
    });
    await install(f.api, dir);
    const failed = await eventually(async () => {
      const e = (await f.api.get('/api/extensions/hello')).body.extension;
      expect(e.last_error).to.include('login refused for token');
      return e;
    });
    expect(JSON.stringify(failed)).to.not.include(SECRET);
    expect(failed.last_error).to.include('[REDACTED]');
    expect(JSON.stringify((await f.api.get('/api/extensions')).body)).to.not.include(SECRET);
  });

  it('masks a daemon\'s secret values in a tools/call error it answers (the tool\'s failure message)', async () => {
    const SECRET = 'Erring-secret-value-456';
    expect((await f.api.put('/api/vault/secrets', { ref: 'vault:extensions/erring', secret_value: SECRET })).status).to.equal(200);
    const dir = copyHello((m) => {
      m.daemon.secret_env = { ERRING: 'vault:extensions/erring' };
      m.daemon.args = ['erring.cjs'];
    });
    // A daemon that is healthy but answers every tool call with a JSON-RPC error naming its key.
    writeFileSync(path.join(dir, 'erring.cjs'), `
      const send = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
      require('node:readline').createInterface({ input: process.stdin }).on('line', (l) => {
        const m = JSON.parse(l);
        if (m.method === 'tools/call') send({ jsonrpc: '2.0', id: m.id, error: { code: -32000, message: 'upstream refused key ' + process.env.ERRING } });
        else if (m.id !== undefined) send({ jsonrpc: '2.0', id: m.id, result: m.method === 'health' ? { status: 'ok' } : {} });
      }).on('close', () => process.exit(0));`);
    await install(f.api, dir);
    await running(f.api, 'hello');
    const res = await invoke('ext__hello__greet', { name: 'Ada' });
    expect(res.status, JSON.stringify(res.body)).to.equal(502);
    expect(JSON.stringify(res.body)).to.include('upstream refused key').and.not.include(SECRET);
  });

  it('refuses an extension whose MCP server name another mcp_server record already serves (409), installing nothing', async () => {
    const hand = await f.api.put('/api/resources/mcp_server/handmade', { scope: { kind: 'global' }, spec: { name: 'shared-name', transport: 'http', url: 'http://127.0.0.1:9/mcp' }, expected_version: 0 });
    expect(hand.status, JSON.stringify(hand.body)).to.equal(201);
    const dir = copyHello((m) => { m.resources.mcp_servers = [{ name: 'shared-name', transport: 'http', url: 'http://127.0.0.1:9/mcp' }]; });
    const res = await f.api.post('/api/extensions', { path: dir, checksum: await checksum(dir) });
    expect(res.status, JSON.stringify(res.body)).to.equal(409);
    expect(res.body.diagnostic).to.deep.include({ code: 'mcp_server_name_taken' });
    expect(res.body.diagnostic.evidence).to.include({ 'resources.mcp_servers[0].name': 'shared-name', id: 'handmade' });
    expect((await f.api.get('/api/extensions/hello')).status).to.equal(404);
    expect(readdirSync(path.join(f.dataDir, 'extensions'))).to.deep.equal([]);
  });

  it('publishes extension.installed, disabled, enabled and removed on the event bus', async () => {
    await install(f.api, HELLO);
    await f.api.post('/api/extensions/hello/disable', {});
    await f.api.post('/api/extensions/hello/enable', {});
    await f.api.post('/api/extensions/hello/disable', {});
    expect((await f.api.delete('/api/extensions/hello')).status).to.equal(200);
    const events = await f.service.bus!.range('', 10_000);
    expect(events.filter((e) => e.type.startsWith('extension.')).map((e) => `${e.type} ${(e.data as any).name}`))
      .to.deep.equal(['extension.installed hello', 'extension.disabled hello', 'extension.enabled hello', 'extension.disabled hello', 'extension.removed hello']);
  });
});
