import { expect } from 'chai';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Service } from '../../runtime/process/service.ts';
import { sha256 } from '../../runtime/process/auth.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';
import { SCRIPTED_COMMAND, sessionToken } from '../helpers/agents.ts';
import { loopDef, t } from './helpers.ts';

/**
 * The svc__loops tools over /api/agent/mcp with the calling session's token, operator authentication on: an agent
 * lists, reads, starts and approves runs of its own session's workspace, and of no other.
 */
describe('svc__loops agent tools (session token, AUTH_MODE=token)', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  let service: Service;
  let api: Client;
  let token: string;
  let sessionId: string;
  let wsA: string;
  let wsB: string;
  const op = { Authorization: 'Bearer o-secret' };
  let mcp: McpClient;

  const gated = (name: string) => loopDef(name, [
    t('work', [], 'built {{ .inputs.what }}'),
    { id: 'review', kind: 'gate', depends_on: ['work'], criteria: [{ type: 'human', prompt: 'ship it?' }] },
  ], { inputs: { what: { type: 'string', default: 'x' } } });
  const call = async (name: string, args: Record<string, unknown>) => mcp.callTool({ name, arguments: args });
  const run = async (ws: string, id: string) => (await api.call('GET', `/api/workspaces/${ws}/loop-runs/${id}`, undefined, op)).body;

  before(async () => {
    await redis.start();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-loop-tools-'));
    writeFileSync(path.join(dataDir, 'config.yaml'), 'tools:\n  permission_mode: approve-all\n');
    const tokens = path.join(dataDir, 'tokens.yaml');
    writeFileSync(tokens, `tokens:\n  - {name: ops, role: admin, sha256: ${sha256('o-secret')}}\n`);
    service = await startService(redis.url, { DATA_DIR: dataDir, AUTH_MODE: 'token', AUTH_TOKENS_FILE: tokens, WORKSPACE_ROOTS: os.tmpdir(), EXEC_ALLOWLIST: process.execPath });
    api = new Client(service.url);
    const ws = async () => (await api.call('POST', '/api/workspaces', { root_dir: mkdtempSync(path.join(os.tmpdir(), 'svc-loop-tools-ws-')) }, op)).body.workspace.id as string;
    wsA = await ws();
    wsB = await ws();
    for (const [w, name] of [[wsA, 'gated'], [wsB, 'elsewhere']]) {
      const res = await api.call('POST', `/api/workspaces/${w}/loops`, { definition: gated(name) }, op);
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
    }
    const ag = await api.call('POST', '/api/agents', { scope: 'global', agent: { name: 'looper', prompt: 'p', provider: 'local', command: SCRIPTED_COMMAND, toolsets: ['svc__loops'] } }, op);
    expect(ag.status, JSON.stringify(ag.body)).to.be.oneOf([200, 201]);
    const s = await api.call('POST', '/api/sessions', { workspace: wsA, agent_name: 'looper' }, op);
    expect(s.status, JSON.stringify(s.body)).to.equal(201);
    sessionId = s.body.session.id;
    token = await eventually(async () => sessionToken(sessionId));
    mcp = new McpClient({ name: 'loops-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${service.url}/api/agent/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  });
  after(async () => {
    await mcp?.close();
    await service?.stop();
    await redis.stop();
  });

  it('lists the svc__loops tools to the session', async () => {
    const names = (await mcp.listTools()).tools.map((x) => x.name);
    expect(names).to.include.members(['svc__loop_run_list', 'svc__loop_run_get', 'svc__loop_run_start', 'svc__loop_run_approve']);
  });

  it('starts a run in its own workspace (recorded as started by its session), reads it, finds it as its own, and approves its gate', async () => {
    const started = await call('svc__loop_run_start', { loop: 'gated', inputs: { what: 'docs' } });
    expect(started.isError ?? false, JSON.stringify(started.content)).to.equal(false);
    const r = (started.structuredContent as any).run;
    expect(r).to.include({ workspace_id: wsA, loop_name: 'gated', started_by_kind: 'agent_session', started_by_ref: sessionId, started_origin_kind: 'session', started_origin_ref: sessionId });
    await eventually(async () => expect((await run(wsA, r.id)).run.status).to.equal('needs-approval'));

    const mine = (await call('svc__loop_run_list', { mine: true })).structuredContent as any;
    expect(mine.runs.map((x: any) => x.id)).to.deep.equal([r.id]);
    expect(mine.aggregates).to.include({ total: 1, live: 1 });
    const got = (await call('svc__loop_run_get', { run_id: r.id })).structuredContent as any;
    expect(got.run).to.include({ id: r.id, status: 'needs-approval', active_gate_id: 'review' });

    const wrong = await call('svc__loop_run_approve', { run_id: r.id, gate_id: 'work', decision: 'approve' });
    expect(wrong.isError).to.equal(true);
    expect((await run(wsA, r.id)).run.status).to.equal('needs-approval');
    const ok = await call('svc__loop_run_approve', { run_id: r.id, gate_id: 'review', decision: 'approve' });
    expect(ok.isError ?? false, JSON.stringify(ok.content)).to.equal(false);
    await eventually(async () => expect((await run(wsA, r.id)).run.status).to.equal('done'));
  });

  it('never reaches another workspace\'s loops or runs', async () => {
    const other = await api.call('POST', `/api/workspaces/${wsB}/loops/elsewhere/run`, {}, op);
    expect(other.status, JSON.stringify(other.body)).to.equal(201);
    await eventually(async () => expect((await run(wsB, other.body.run.id)).run.status).to.equal('needs-approval'));
    const get = await call('svc__loop_run_get', { run_id: other.body.run.id });
    expect(get.isError).to.equal(true);
    const approve = await call('svc__loop_run_approve', { run_id: other.body.run.id, gate_id: 'review', decision: 'approve' });
    expect(approve.isError).to.equal(true);
    expect((await run(wsB, other.body.run.id)).run.status).to.equal('needs-approval');
    const start = await call('svc__loop_run_start', { loop: 'elsewhere' });
    expect(start.isError).to.equal(true);
    const listed = (await call('svc__loop_run_list', {})).structuredContent as any;
    expect(listed.runs.map((x: any) => x.workspace_id)).to.not.include(wsB);
    expect((await api.call('GET', `/api/workspaces/${wsB}/loop-runs`, undefined, op)).body.runs).to.have.length(1);
  });

  it('a run the agent starts calls its tool nodes in the agent\'s context: a tool outside its toolsets is denied, and only that run fails', async () => {
    const def = loopDef('writer', [{ id: 'write', kind: 'svc__workspace_write_file', params: { path: 'w.txt', content: 'x' } }]);
    expect((await api.call('POST', `/api/workspaces/${wsA}/loops`, { definition: def }, op)).status).to.equal(201);
    const started = (await call('svc__loop_run_start', { loop: 'writer' })).structuredContent as any;
    await eventually(async () => expect((await run(wsA, started.run.id)).run.status).to.equal('failed'));
    const d = await run(wsA, started.run.id);
    expect(d.generations[0].outputs.find((o: any) => o.node_id === 'write').error).to.match(/^tool_denied/);
    // The operator's run of the same loop is not narrowed (approve-all: the write goes through).
    const mine = await api.call('POST', `/api/workspaces/${wsA}/loops/writer/run`, {}, op);
    await eventually(async () => expect((await run(wsA, mine.body.run.id)).run.status).to.equal('done'));
  });

  it('without the session token the agent endpoint refuses (401)', async () => {
    const res = await api.call('POST', '/api/agent/mcp', { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { accept: 'application/json, text/event-stream' });
    expect(res.status).to.equal(401);
  });
});
