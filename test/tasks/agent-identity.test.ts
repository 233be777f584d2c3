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

/**
 * The agent routes with the per-session token (an agent of its own process holds it), with operator
 * authentication on (AUTH_MODE=token): there the identity headers are not accepted; and the svc__autonomy tools
 * over /api/agent/mcp.
 */
describe('Agent identity for /api/agent/tasks/* (session token, AUTH_MODE=token) and the svc__autonomy tools', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  let service: Service;
  let api: Client;
  let token: string;
  let sessionId: string;
  let wsId: string;
  let tokens: string;
  const agentCall = (p: string, body: unknown, headers: Record<string, string>) => api.call('POST', `/api/agent/tasks/${p}`, body, headers);

  before(async () => {
    await redis.start();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-tasks-id-'));
    writeFileSync(path.join(dataDir, 'config.yaml'), 'tools:\n  permission_mode: approve-all\n');
    tokens = path.join(dataDir, 'tokens.yaml');
    writeFileSync(tokens, `tokens:\n  - {name: ops, role: admin, sha256: ${sha256('o-secret')}}\n`);
    service = await startService(redis.url, { DATA_DIR: dataDir, AUTH_MODE: 'token', AUTH_TOKENS_FILE: tokens, WORKSPACE_ROOTS: os.tmpdir(), EXEC_ALLOWLIST: process.execPath });
    api = new Client(service.url);
    const op = { Authorization: 'Bearer o-secret' };
    const ws = (await api.call('POST', '/api/workspaces', { root_dir: mkdtempSync(path.join(os.tmpdir(), 'svc-tasks-id-ws-')) }, op)).body.workspace;
    wsId = ws.id;
    const ag = await api.call('POST', '/api/agents', { scope: 'global', agent: { name: 'solo', prompt: 'p', provider: 'local', command: SCRIPTED_COMMAND, toolsets: ['svc__autonomy', 'svc__tasks'] } }, op);
    expect(ag.status, JSON.stringify(ag.body)).to.be.oneOf([200, 201]);
    const s = await api.call('POST', '/api/sessions', { workspace: ws.id, agent_name: 'solo' }, op);
    expect(s.status, JSON.stringify(s.body)).to.equal(201);
    sessionId = s.body.session.id;
    token = await eventually(async () => sessionToken(sessionId));
    // the operator (not the agent) makes the work
    for (const title of ['one', 'two']) {
      const t = await api.call('POST', '/api/tasks', { scope: 'workspace', workspace: ws.id, title, auto_enqueue_on_ready: true }, op);
      expect(t.status, JSON.stringify(t.body)).to.equal(201);
    }
  });
  after(async () => {
    await service?.stop();
    await redis.stop();
  });

  it('refuses the identity headers when operator authentication is on (401), and a foreign or missing token', async () => {
    const h = await agentCall('claim-next', {}, { 'X-SVC-Session-ID': sessionId, 'X-SVC-Agent': 'solo' });
    expect(h.status).to.equal(401);
    expect(h.body.diagnostic.code).to.equal('identity_required');
    expect((await agentCall('claim-next', {}, { Authorization: 'Bearer o-secret' })).status).to.equal(401);
    // the operator routes still need the operator token
    expect((await api.call('GET', '/api/tasks')).status).to.equal(401);
  });

  it('claims, heartbeats and completes with the session token; the claim carries only the token hash', async () => {
    const auth = { Authorization: `Bearer ${token}` };
    const c = await agentCall('claim-next', { wait: true }, auth);
    expect(c.status, JSON.stringify(c.body)).to.equal(200);
    expect(c.body.claim.lease.session_id).to.equal(sessionId);
    expect(JSON.stringify(c.body)).to.not.include(token).and.not.include('svc_claim_');
    expect((await agentCall(`${c.body.claim.run.id}/heartbeat`, {}, auth)).status).to.equal(200);
    expect((await agentCall(`${c.body.claim.run.id}/complete`, { result: 'done' }, auth)).body.lease.status).to.equal('completed');
  });

  it('the svc__autonomy tools claim and complete over /api/agent/mcp for the calling session', async () => {
    const mcp = new McpClient({ name: 'tasks-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${service.url}/api/agent/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    try {
      const claimed = await mcp.callTool({ name: 'svc__task_run_claim_next', arguments: {} });
      expect(claimed.isError ?? false, JSON.stringify(claimed.content)).to.equal(false);
      const claim = (claimed.structuredContent as any).claim;
      expect(claim.lease).to.include({ session_id: sessionId, status: 'claimed' });
      expect(claim.task).to.include({ title: 'two', workspace_id: wsId });
      const done = await mcp.callTool({ name: 'svc__task_run_complete', arguments: { run_id: claim.run.id, result: { ok: 1 } } });
      expect((done.structuredContent as any).lease.status).to.equal('completed');
      const none = await mcp.callTool({ name: 'svc__task_run_claim_next', arguments: {} });
      expect((none.structuredContent as any).claim).to.equal(null);
      const stale = await mcp.callTool({ name: 'svc__task_run_heartbeat', arguments: { run_id: claim.run.id } });
      expect(stale.isError).to.equal(true);
    } finally {
      await mcp.close();
    }
  });

  it('reads only the session for a token it accepted before, and refuses that token once the session stops or is resumed with another', async () => {
    const op = { Authorization: 'Bearer o-secret' };
    const auth = { Authorization: `Bearer ${token}` };
    // NOTE: OBJECT IDLETIME counts whole seconds since the key was last read or written: 0 had any call read it.
    const admin = redis.client();
    const tokenKey = `svc:{sessions}:token:${sha256(token)}`;
    try {
      expect((await agentCall('claim-next', {}, auth)).status).to.equal(204);
      await new Promise((ok) => setTimeout(ok, 2100));
      for (let i = 0; i < 5; i++) expect((await agentCall('claim-next', {}, auth)).status).to.equal(204);
      expect(await admin.object('IDLETIME', tokenKey), 'seconds since the token key was read').to.be.at.least(2);
    } finally {
      admin.disconnect();
    }
    expect((await api.call('POST', `/api/sessions/${sessionId}/stop`, {}, op)).status).to.equal(204);
    const stopped = await agentCall('claim-next', {}, auth);
    expect(stopped.status).to.equal(401);
    expect(stopped.body.diagnostic.code).to.equal('unauthenticated');
    expect((await api.call('POST', `/api/sessions/${sessionId}/resume`, {}, op)).body.session.state).to.equal('active');
    const fresh = await eventually(async () => { const t = sessionToken(sessionId); expect(t).to.not.equal(token); return t; });
    expect((await agentCall('claim-next', {}, auth)).status, 'the token of the run before the resume').to.equal(401);
    expect((await agentCall('claim-next', {}, { Authorization: `Bearer ${fresh}` })).status).to.equal(204);
  });

  it('another process that kept the session\'s identity refuses its token once the session stops, and takes the next run\'s', async () => {
    const op = { Authorization: 'Bearer o-secret' };
    // NOTE: an api-only process of its own (own connections and subscription) on the same Redis.
    const other = await startService(redis.url, { DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'svc-tasks-id-2-')), AUTH_MODE: 'token', AUTH_TOKENS_FILE: tokens, SVC_ROLES: 'api' });
    try {
      const there = new Client(other.url);
      // NOTE: a heartbeat of a run that does not exist: 404 once the caller's identity passed, 401 before.
      const beat = (t: string) => there.call('POST', '/api/agent/tasks/run_missing/heartbeat', {}, { Authorization: `Bearer ${t}` });
      const live = sessionToken(sessionId);
      expect((await beat(live)).status).to.equal(404);
      expect((await beat(live)).status).to.equal(404);
      expect((await api.call('POST', `/api/sessions/${sessionId}/stop`, {}, op)).status).to.equal(204);
      const stopped = await beat(live);
      expect(stopped.status).to.equal(401);
      expect(stopped.body.diagnostic.code).to.equal('unauthenticated');
      expect((await api.call('POST', `/api/sessions/${sessionId}/resume`, {}, op)).body.session.state).to.equal('active');
      const fresh = await eventually(async () => { const t = sessionToken(sessionId); expect(t).to.not.equal(live); return t; });
      expect((await beat(fresh)).status).to.equal(404);
      expect((await beat(live)).status, 'the token of the run before the resume').to.equal(401);
    } finally {
      await other.stop();
    }
  });
});
