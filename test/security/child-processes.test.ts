import { expect } from 'chai';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { API_OWNER, API_SOURCE } from '../../runtime/resources/resource-service.ts';
import { decodeSpec } from '../../codecs/index.ts';
import type { RegistryEntry } from '../../controllers/registry-controller.ts';
import { loadConfig } from '../../runtime/process/config.ts';
import { SecurityPolicy } from '../../runtime/security/policy.ts';
import type { Service } from '../../runtime/process/service.ts';
import { McpPool, type McpServerSpec } from '../../runtime/tools/mcp.ts';
import { childPids } from '../helpers/agent-processes.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';
import { agentPid, environOf, SCRIPTED, SCRIPTED_COMMAND } from '../helpers/agents.ts';

const AGENT_SECRET = 'agent-secret-5c0ffee7d1';
const CANARY = 'service-canary-91b2';
/** What a child may hold besides what its record declares and its SVC_* identity. */
const INHERITED = ['PATH', 'HOME', 'LANG', 'TERM', 'TMPDIR', 'TZ'];
/** The MCP SDK adds these to a stdio server's environment itself (its own list, from sudo's). */
const SDK_DEFAULTS = ['LOGNAME', 'SHELL', 'USER'];

/** unexpectedKeys lists the variables of `env` that are neither inherited basics nor in `allowed`. */
const unexpectedKeys = (env: Record<string, string>, allowed: string[]) => Object.keys(env).filter((k) => !INHERITED.includes(k) && !k.startsWith('LC_') && !allowed.includes(k));

describe('Child processes: scrubbed environments, secret refs and the execution policy (real Redis, real processes)', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  let service: Service | undefined;
  let api: Client;
  let root: string;
  let dataDir: string;
  let ws: { id: string };
  /** dump is a tiny program that writes its environment as JSON to the file named by its first argument. */
  let dump: string;
  const saved: Record<string, string | undefined> = {};

  const start = async (env: Record<string, string> = {}) => {
    service = await startService(redis.url, { DATA_DIR: dataDir, ...env });
    api = new Client(service.url);
  };
  const put = async (kind: string, id: string, spec: unknown) => {
    const res = await api.put(`/api/resources/${kind}/${id}?wait=true`, { scope: { kind: 'global' }, spec, expected_version: 0 });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  };
  /** store writes a record past the API's admission (as one written under an older policy would be). */
  const store = async (kind: string, id: string, spec: unknown) => {
    const decoded = decodeSpec(kind, spec, { scope: { kind: 'global' } });
    if (!decoded.ok) throw new Error(JSON.stringify(decoded.errors));
    await service!.store!.put({ kind, id, scope: { kind: 'global' }, owner: API_OWNER, source: API_SOURCE, spec: decoded.spec, expectedVersion: 0 });
    await eventually(async () => expect((await api.get(`/api/resources/${kind}/${id}/status`)).body.status?.observed_version).to.equal(1));
  };
  const session = async (agent: string) => {
    const res = await api.post('/api/sessions', { workspace: ws.id, agent_name: agent });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.session;
  };
  const events = async (id: string) => (await api.get(`/api/sessions/${id}/events`)).body.events as any[];

  before(async () => {
    await redis.start();
    // The service's own configuration and a canary: no child may see them.
    for (const [k, v] of Object.entries({ REDIS_URL: redis.url, SVC_TEST_CANARY: CANARY, AUTH_TOKENS_FILE: '/nowhere/tokens', SVC_SECRET_AGENT_KEY: AGENT_SECRET })) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
  });
  after(async () => {
    for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
    await redis.destroy();
  });
  beforeEach(async () => {
    await redis.flush();
    root = mkdtempSync(path.join(os.tmpdir(), 'svc-sec-'));
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-sec-data-'));
    dump = path.join(root, 'dump-env.mjs');
    writeFileSync(dump, 'import { writeFileSync } from "node:fs";\nwriteFileSync(process.argv[2], JSON.stringify(process.env));\n');
    await start();
    ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
  });
  afterEach(async () => {
    await service?.stop();
    service = undefined;
    rmSync(root, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('an agent process holds its declared env, its allowed secret_env and its identity, and none of the service\'s variables; the secret is redacted from its events', async () => {
    await put('agent', 'envy', { name: 'envy', prompt: 'p', command: SCRIPTED_COMMAND, env: { AGENT_MODE: 'audit' }, secret_env: { AGENT_KEY: 'env:SVC_SECRET_AGENT_KEY' } });
    const s = await session('envy');
    expect(s.state).to.equal('active');
    const env = environOf(agentPid(s.id));
    expect(env).to.include({ AGENT_MODE: 'audit', AGENT_KEY: AGENT_SECRET, SVC_SESSION_ID: s.id, SVC_API_URL: service!.url });
    expect(env.SVC_SESSION_TOKEN).to.match(/^svc_st_/);
    expect(unexpectedKeys(env, ['AGENT_MODE', 'AGENT_KEY', 'SVC_SESSION_ID', 'SVC_API_URL', 'SVC_SESSION_TOKEN'])).to.deep.equal([]);
    for (const k of ['REDIS_URL', 'SVC_TEST_CANARY', 'AUTH_TOKENS_FILE', 'SVC_SECRET_AGENT_KEY', 'SCRIPTED_STATE_DIR']) expect(env, k).not.to.have.property(k);
    expect(JSON.stringify(env)).not.to.include(CANARY);

    const res = await fetch(`${service!.url}/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: `the key is ${AGENT_SECRET}` }) });
    await res.text();
    const all = JSON.stringify(await events(s.id));
    expect(all).to.include('the key is [REDACTED]');
    expect(all).not.to.include(AGENT_SECRET);
  });

  it('the built-in scripted agent still starts and answers in its scrubbed environment, which holds no session identity (pooled: it comes per session over ACP)', async () => {
    const s = await session('scripted');
    expect(s.state).to.equal('active');
    const pids = childPids(process.pid, SCRIPTED);
    expect(pids).to.have.length(1);
    const env = environOf(String(pids[0]));
    expect(env.SCRIPTED_STATE_DIR).to.equal(path.join(dataDir, 'scripted'));
    expect(unexpectedKeys(env, ['SVC_API_URL', 'SCRIPTED_STATE_DIR'])).to.deep.equal([]);
    const res = await fetch(`${service!.url}/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'hello' }) });
    await res.text();
    expect((await events(s.id)).some((e) => e.type === 'done')).to.equal(true);
  });

  it('a secret_env ref outside SECRET_ENV_ALLOWLIST stops the start as startup_failure naming the variable, and the agent never runs', async () => {
    const marker = path.join(root, 'agent-ran');
    await store('agent', 'leaky', { name: 'leaky', prompt: 'p', command: `touch ${marker}`, secret_env: { STOLEN: 'env:REDIS_URL' } });
    const s = await session('leaky');
    expect(s).to.include({ state: 'stopped', stop_reason: 'error' });
    expect(s.failure.kind).to.equal('startup_failure');
    expect(s.failure.summary).to.include('STOLEN').and.include('SECRET_ENV_ALLOWLIST');
    expect(s.failure.summary).not.to.include(redis.url);
    expect(existsSync(marker)).to.equal(false);
  });

  it('a stdio MCP server and a hook start from a scrubbed environment with their declared env and allowed secret_env', async () => {
    const mcpOut = path.join(root, 'mcp-env.json');
    const hookOut = path.join(root, 'hook-env.json');
    const declared = { env: { DUMP_MODE: 'on' }, secret_env: { DUMP_KEY: 'env:SVC_SECRET_AGENT_KEY' } };
    await put('mcp_server', 'dumper', { name: 'dumper', command: process.execPath, args: [dump, mcpOut], ...declared });
    await put('hook.binding', 'dumper', { name: 'dumper', event: 'tool.pre_call', mode: 'sync', command: process.execPath, args: [dump, hookOut], matcher: { tool_id: 'svc__tool_search' }, ...declared });
    expect((await api.post('/api/tools/svc__tool_search/invoke', { input: { query: 'x' } })).status).to.equal(200);
    await eventually(async () => expect(existsSync(mcpOut)).to.equal(true));
    for (const [file, extra] of [[mcpOut, SDK_DEFAULTS], [hookOut, []]] as const) {
      const env = JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
      expect(env, file).to.include({ DUMP_MODE: 'on', DUMP_KEY: AGENT_SECRET });
      expect(unexpectedKeys(env, ['DUMP_MODE', 'DUMP_KEY', ...extra]), file).to.deep.equal([]);
      expect(JSON.stringify(env), file).not.to.include(CANARY).and.not.include(redis.url);
    }
  });

  it('refs outside SECRET_ENV_ALLOWLIST do not resolve at run time: the MCP server is mcp_auth_unconfigured and not started; the hook is an error and does not run', async () => {
    const mcpOut = path.join(root, 'mcp-env.json');
    const hookOut = path.join(root, 'hook-env.json');
    await store('mcp_server', 'stealer', { name: 'stealer', command: process.execPath, args: [dump, mcpOut], secret_env: { CANARY: 'env:SVC_TEST_CANARY' } });
    await store('tool', 'stealer-echo', {
      id: 'team__stealer_echo', backend: { kind: 'mcp', mcp_server: 'stealer', mcp_tool: 'echo' }, input_schema: { type: 'object' },
      source: { kind: 'mcp', owner: 'stealer', raw_server_name: 'stealer', raw_tool_name: 'echo' }, visibility: 'session', risk: 'read', read_only: true,
    });
    await store('hook.binding', 'stealer', { name: 'stealer', event: 'tool.pre_call', mode: 'sync', command: process.execPath, args: [dump, hookOut], matcher: { tool_id: 'svc__tool_search' }, secret_env: { CANARY: 'env:SVC_TEST_CANARY' } });
    await eventually(async () => expect((await api.get('/api/tools/team__stealer_echo')).body.tool.availability.reason_codes).to.deep.equal(['mcp_auth_unconfigured']));
    const res = await api.post('/api/tools/svc__tool_search/invoke', { input: { query: 'x' } });
    expect(res.status).to.equal(200);
    expect(res.body.result.metadata.hooks[0]).to.include({ name: 'stealer', decision: 'error' });
    expect(res.body.result.metadata.hooks[0].reason).to.include('CANARY');
    expect(existsSync(mcpOut)).to.equal(false);
    expect(existsSync(hookOut)).to.equal(false);
  });

  it('a record a stricter EXEC_ALLOWLIST no longer allows is Degraded (CommandNotAllowed) at reconcile, and nothing it names runs at spawn time', async () => {
    const agentMarker = path.join(root, 'agent-ran');
    const mcpOut = path.join(root, 'mcp-env.json');
    const hookOut = path.join(root, 'hook-env.json');
    await put('agent', 'toucher', { name: 'toucher', prompt: 'p', command: `touch ${agentMarker}` });
    await put('agent', 'chained', { name: 'chained', prompt: 'p', command: `${SCRIPTED_COMMAND}; touch ${agentMarker}` });
    await put('agent', 'plain', { name: 'plain', prompt: 'p', command: SCRIPTED_COMMAND });
    await put('mcp_server', 'dumper', { name: 'dumper', command: '/bin/sh', args: ['-c', `touch ${mcpOut}`] });
    await put('tool', 'dumper-echo', {
      id: 'team__dumper_echo', backend: { kind: 'mcp', mcp_server: 'dumper', mcp_tool: 'echo' }, input_schema: { type: 'object' },
      source: { kind: 'mcp', owner: 'dumper', raw_server_name: 'dumper', raw_tool_name: 'echo' }, visibility: 'session', risk: 'read', read_only: true,
    });
    await put('hook.binding', 'shell', { name: 'shell', event: 'tool.pre_call', mode: 'sync', command: '/bin/sh', args: ['-c', `touch ${hookOut}`], matcher: { tool_id: 'svc__tool_search' } });
    await service!.stop();
    service = undefined;
    rmSync(mcpOut, { force: true });
    rmSync(hookOut, { force: true });

    // Only node may run now; the stored records stay, their registry entries too (the last good ones).
    await start({ EXEC_ALLOWLIST: process.execPath });
    for (const [kind, id, what] of [['agent', 'toucher', 'touch'], ['agent', 'chained', 'plain command line'], ['mcp_server', 'dumper', '/bin/sh'], ['hook.binding', 'shell', '/bin/sh']]) {
      const status = await eventually(async () => {
        const st = (await api.get(`/api/resources/${kind}/${id}/status`)).body.status;
        expect(st.conditions.find((c: any) => c.type === 'Degraded'), `${kind}/${id}`).to.include({ status: 'True', reason: 'CommandNotAllowed' });
        return st;
      });
      expect(status.last_error, `${kind}/${id}`).to.include(what);
    }
    expect((await api.get('/api/resources/agent/plain/status')).body.status.conditions.find((c: any) => c.type === 'Ready')).to.include({ status: 'True' });

    for (const name of ['toucher', 'chained']) {
      const s = await session(name);
      expect(s, name).to.include({ state: 'stopped', stop_reason: 'error' });
      expect(s.failure.kind, name).to.equal('startup_failure');
      expect(s.failure.summary, name).to.include('CommandNotAllowed');
    }
    // A plain command line of an allowed program runs, without a shell.
    const ok = await session('plain');
    expect(ok.state).to.equal('active');
    expect(readFileSync(`/proc/${agentPid(ok.id)}/cmdline`, 'utf8').split('\0')[0]).to.equal(process.execPath);

    await eventually(async () => expect((await api.get('/api/tools/team__dumper_echo')).body.tool.availability.reason_codes).to.deep.equal(['backend_not_executable']));
    const res = await api.post('/api/tools/svc__tool_search/invoke', { input: { query: 'x' } });
    expect(res.body.result.metadata.hooks[0]).to.include({ name: 'shell', decision: 'error' });
    expect(res.body.result.metadata.hooks[0].reason).to.include('CommandNotAllowed');
    expect(existsSync(agentMarker)).to.equal(false);
    expect(existsSync(mcpOut)).to.equal(false);
    expect(existsSync(hookOut)).to.equal(false);
  });

  describe('McpPool', () => {
    const policy = () => new SecurityPolicy(loadConfig({ REDIS_URL: redis.url, DATA_DIR: dataDir }).security);
    const entry = (out: string): RegistryEntry<McpServerSpec> => ({
      kind: 'mcp_server', id: 'dumper', scope: { kind: 'global' }, owner: API_OWNER, source: API_SOURCE, version: 1,
      spec: { name: 'dumper', transport: '', command: process.execPath, args: [dump, out] },
    } as RegistryEntry<McpServerSpec>);
    const quiet = pino({ level: 'silent' });

    it('a read never starts a server; the registry sync and a call do; close stops the sync', async () => {
      const out = path.join(root, 'started');
      const pool = new McpPool(quiet, policy());
      try {
        for (let i = 0; i < 5; i++) expect(await pool.state(entry(out))).to.include({ ready: false }).and.have.deep.property('reason_codes', ['mcp_connecting']);
        await new Promise((r) => setTimeout(r, 500));
        expect(existsSync(out)).to.equal(false);

        pool.start(async () => [entry(out)], 50);
        await eventually(async () => expect(existsSync(out)).to.equal(true));
        await eventually(async () => expect((await pool.state(entry(out))).reason_codes).to.deep.equal(['mcp_unreachable']));
      } finally {
        await pool.close();
      }
      rmSync(out);
      await new Promise((r) => setTimeout(r, 6_000));
      expect(existsSync(out), 'no retry after close').to.equal(false);

      const caller = new McpPool(quiet, policy());
      try {
        expect((await caller.state(entry(out), true)).ready).to.equal(false);
        expect(existsSync(out)).to.equal(true);
      } finally {
        await caller.close();
      }
    });
  });
});
