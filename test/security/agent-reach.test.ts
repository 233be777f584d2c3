import { expect } from 'chai';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Service } from '../../runtime/process/service.ts';
import { sha256 } from '../../runtime/process/auth.ts';
import { SCRIPTED_COMMAND, sessionToken } from '../helpers/agents.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';
import { readUiStream } from '../helpers/ui-stream.ts';
import { loopDef } from '../loops/helpers.ts';

const SECRET = 'secret-of-a-3f7e19';
const READ_SECRET = '/call svc__workspace_read_file {"path":"secret.txt"}';

/**
 * The attacks of an agent over /api/agent/mcp on what lies outside its session: two workspaces, an agent session in
 * A (its agent denies svc__workspace_read_file) calling the service's tools with B's ids, and starting work (a loop
 * that starts a loop, a loop with an agent node, an automation job) that would read the file it may not read.
 * Each is refused and leaves nothing changed; the same call on its own workspace, or the operator's, still works.
 */
describe('Agent tools reach only the session\'s workspace, and what an agent starts runs under its policy (real Redis, a real agent over /api/agent/mcp)', function () {
  this.timeout(180_000);
  const redis = new RedisServer();
  const op = { Authorization: 'Bearer o-secret' };
  let service: Service;
  let api: Client;
  let dataDir: string;
  let rootA: string;
  let rootB: string;
  let wsA: string;
  let wsB: string;
  let sessionId: string;
  let mcp: McpClient;

  const call = async (name: string, args: Record<string, unknown>) => mcp.callTool({ name, arguments: args }) as Promise<{ isError?: boolean; content: { text?: string }[]; structuredContent?: any }>;
  const text = (r: { content: { text?: string }[] }) => r.content.map((c) => c.text ?? '').join('\n');
  const get = async (p: string) => {
    const res = await api.call('GET', p, undefined, op);
    expect(res.status, `${p}: ${JSON.stringify(res.body)}`).to.equal(200);
    return res.body;
  };
  const post = async (p: string, body: unknown) => {
    const res = await api.call('POST', p, body, op);
    expect(res.status, `${p}: ${JSON.stringify(res.body)}`).to.be.oneOf([200, 201, 202]);
    return res.body;
  };
  const addLoop = async (ws: string, def: Record<string, unknown>) => post(`/api/workspaces/${ws}/loops`, { definition: def });
  const loopRun = async (ws: string, id: string) => get(`/api/workspaces/${ws}/loop-runs/${id}`);
  const ended = async (ws: string, id: string) => eventually(async () => {
    const d = await loopRun(ws, id);
    expect(d.run.status).to.be.oneOf(['done', 'failed', 'blocked', 'no-op']);
    return d;
  }, 60_000);
  /** prompt sends a session a prompt as the operator and answers the text the agent said. */
  const prompt = async (ws: string, sid: string, message: string) => {
    const res = await fetch(`${service.url}/api/workspaces/${ws}/sessions/${sid}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json', ...op }, body: JSON.stringify({ message }) });
    const { chunks } = await readUiStream(res);
    return chunks.filter((c: any) => c.type === 'text-delta').map((c: any) => c.delta).join('');
  };
  /** toolResults are the tool results a session's agent recorded (its /call answers). */
  const toolResults = async (sid: string) => ((await get(`/api/sessions/${sid}/events?type=tool_result`)).events as any[]).map((e) => e.content as { tool_error?: boolean; tool_result: unknown });
  /** loopSessions are the sessions a loop run's agent nodes opened (named after the run). */
  const loopSessions = async (runId: string) => ((await get('/api/sessions')).sessions as any[]).filter((s) => String(s.name).startsWith(`loop ${runId} `));

  before(async () => {
    await redis.start();
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-reach-'));
    writeFileSync(path.join(dataDir, 'config.yaml'), 'tools:\n  permission_mode: approve-all\n');
    const tokens = path.join(dataDir, 'tokens.yaml');
    writeFileSync(tokens, `tokens:\n  - {name: ops, role: admin, sha256: ${sha256('o-secret')}}\n`);
    service = await startService(redis.url, { DATA_DIR: dataDir, AUTH_MODE: 'token', AUTH_TOKENS_FILE: tokens, WORKSPACE_ROOTS: os.tmpdir(), EXEC_ALLOWLIST: process.execPath });
    api = new Client(service.url);
    rootA = mkdtempSync(path.join(os.tmpdir(), 'svc-reach-a-'));
    rootB = mkdtempSync(path.join(os.tmpdir(), 'svc-reach-b-'));
    writeFileSync(path.join(rootA, 'secret.txt'), SECRET);
    // Workspace A asks approval of every call that is not a read; the attacking agent's own mode lets its calls through.
    mkdirSync(path.join(rootA, '.svc'));
    writeFileSync(path.join(rootA, '.svc', 'config.yaml'), 'tools:\n  permission_mode: approve-reads\n');
    wsA = (await post('/api/workspaces', { root_dir: rootA })).workspace.id;
    wsB = (await post('/api/workspaces', { root_dir: rootB })).workspace.id;
    await post('/api/agents', { scope: 'global', agent: { name: 'reacher', prompt: 'p', provider: 'local', command: SCRIPTED_COMMAND, deny_tools: ['svc__workspace_read_file'], permissions: 'approve-all' } });
    sessionId = (await post('/api/sessions', { workspace: wsA, agent_name: 'reacher' })).session.id;
    const token = await eventually(async () => sessionToken(sessionId));
    mcp = new McpClient({ name: 'reach-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${service.url}/api/agent/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    // The agent itself may not read the file: every attack below tries to get round that.
    const direct = await call('svc__workspace_read_file', { path: 'secret.txt' });
    expect(direct.isError).to.equal(true);
    expect(text(direct)).to.include('policy_denied').and.not.include(SECRET);
  });
  after(async () => {
    await mcp?.close();
    await service?.stop();
    await redis.destroy();
    for (const d of [rootA, rootB, dataDir]) if (d) rmSync(d, { recursive: true, force: true });
  });

  describe('another workspace\'s resources answer as missing ones, and are left as they were', () => {
    it('svc__task_read, svc__task_run_list and svc__task_cancel on workspace B\'s task: the answer of an id that does not exist, the task and its run not cancelled', async () => {
      const theirs = (await post('/api/tasks', { scope: 'workspace', workspace: wsB, title: 'theirs', description: 'b-task-note-51c0' })).task;
      await post(`/api/tasks/${theirs.id}/start`, {});
      const before = { task: (await get(`/api/tasks/${theirs.id}`)).task, runs: (await get(`/api/tasks/${theirs.id}/runs`)).runs };
      expect(before.runs).to.have.length(1);
      const missing = 'task-that-does-not-exist';
      for (const tool of ['svc__task_read', 'svc__task_run_list', 'svc__task_cancel']) {
        const foreign = await call(tool, { id: theirs.id });
        const absent = await call(tool, { id: missing });
        expect(foreign.isError, tool).to.equal(true);
        expect(text(foreign), tool).to.not.include('b-task-note-51c0').and.not.include(before.runs[0].id);
        expect(text(foreign).replaceAll(theirs.id, 'ID'), tool).to.equal(text(absent).replaceAll(missing, 'ID'));
      }
      expect((await get(`/api/tasks/${theirs.id}`)).task).to.deep.equal(before.task);
      expect((await get(`/api/tasks/${theirs.id}/runs`)).runs).to.deep.equal(before.runs);

      // The same tools on a task of its own workspace do their work.
      const mine = (await post('/api/tasks', { scope: 'workspace', workspace: wsA, title: 'mine' })).task;
      const read = await call('svc__task_read', { id: mine.id });
      expect(read.isError ?? false, text(read)).to.equal(false);
      expect(read.structuredContent.task.id).to.equal(mine.id);
      const cancel = await call('svc__task_cancel', { id: mine.id });
      expect(cancel.isError ?? false, text(cancel)).to.equal(false);
      expect((await get(`/api/tasks/${mine.id}`)).task.status).to.equal('canceled');
    });

    it('svc__task_run_release and svc__task_run_complete on workspace B\'s run: the answer of a run that does not exist, the run unchanged', async () => {
      const theirs = (await post('/api/tasks', { scope: 'workspace', workspace: wsB, title: 'leased elsewhere' })).task;
      await post(`/api/tasks/${theirs.id}/start`, {});
      const [run] = (await get(`/api/tasks/${theirs.id}/runs`)).runs;
      for (const tool of ['svc__task_run_release', 'svc__task_run_complete']) {
        const foreign = await call(tool, { run_id: run.id });
        const absent = await call(tool, { run_id: 'run-that-does-not-exist' });
        expect(foreign.isError, tool).to.equal(true);
        expect(text(foreign).replaceAll(run.id, 'ID'), tool).to.equal(text(absent).replaceAll('run-that-does-not-exist', 'ID'));
      }
      expect((await get(`/api/tasks/${theirs.id}/runs`)).runs).to.deep.equal([run]);
    });

    it('svc__automation_jobs_trigger does not point a global job at workspace B: the answer of a workspace that does not exist, no run anywhere', async () => {
      const res = await api.call('PUT', '/api/resources/automation.job/nightly', {
        scope: { kind: 'global' }, spec: { name: 'nightly', agent_name: 'scripted', prompt: 'hello', enabled: false, schedule: { mode: 'every', interval: '1h' } }, expected_version: 0,
      }, op);
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      for (const ref of [wsB, rootB]) {
        const redirected = await call('svc__automation_jobs_trigger', { id: 'nightly', workspace_id: ref });
        const absent = await call('svc__automation_jobs_trigger', { id: 'nightly', workspace_id: 'ws-that-does-not-exist' });
        expect(redirected.isError, ref).to.equal(true);
        expect(text(redirected).replaceAll(ref, 'WS'), ref).to.equal(text(absent).replaceAll('ws-that-does-not-exist', 'WS'));
      }
      expect((await get('/api/automation/jobs/nightly/history?limit=1000')).runs).to.deep.equal([]);

      // Fired in its own workspace (named, or by default), the job runs there.
      const own = await call('svc__automation_jobs_trigger', { id: 'nightly', workspace_id: wsA });
      expect(own.isError ?? false, text(own)).to.equal(false);
      expect(own.structuredContent.run.workspace_id).to.equal(wsA);
      const runs = (await get('/api/automation/jobs/nightly/history?limit=1000')).runs as any[];
      expect(runs.map((r) => r.workspace_id)).to.deep.equal([wsA]);
    });

    it('a global job\'s history and last run show the agent only its own workspace\'s runs', async () => {
      const res = await api.call('PUT', '/api/resources/automation.job/shared', {
        scope: { kind: 'global' }, spec: { name: 'shared', agent_name: 'scripted', prompt: 'b-run-prompt', enabled: false, schedule: { mode: 'every', interval: '1h' } }, expected_version: 0,
      }, op);
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      const fired = (await post('/api/automation/jobs/shared/trigger', { workspace_id: wsB })).run;
      const history = await call('svc__automation_jobs_history', { id: 'shared' });
      expect(history.structuredContent.runs).to.deep.equal([]);
      const job = await call('svc__automation_jobs_get', { id: 'shared' });
      expect(job.structuredContent.job.last_run).to.equal(null);
      const run = await call('svc__automation_runs_get', { id: fired.id });
      const absent = await call('svc__automation_runs_get', { id: 'run-that-does-not-exist' });
      expect(run.isError).to.equal(true);
      expect(text(run).replaceAll(fired.id, 'ID')).to.equal(text(absent).replaceAll('run-that-does-not-exist', 'ID'));
    });
  });

  describe('what the agent starts runs under its policy, narrowed, never widened', () => {
    it('a loop it starts whose run-loop node starts a loop that reads the file: the inner tool node is denied, the file unread; the operator\'s run reads it', async () => {
      await addLoop(wsA, loopDef('reader', [{ id: 'read', kind: 'svc__workspace_read_file', params: { path: 'secret.txt' } }]));
      await addLoop(wsA, loopDef('outer', [{ id: 'inner', kind: 'run-loop', loop: 'reader' }]));
      const started = await call('svc__loop_run_start', { loop: 'outer' });
      expect(started.isError ?? false, text(started)).to.equal(false);
      const outer = await ended(wsA, started.structuredContent.run.id);
      expect(outer.run.status).to.equal('failed');
      const children = ((await get(`/api/workspaces/${wsA}/loop-runs?loop=reader`)).runs as any[]).filter((r) => r.parent_loop_run_id === outer.run.id);
      // One child per attempt of the run-loop node: each denied.
      expect(children).to.not.have.length(0);
      for (const c of children) {
        const child = await ended(wsA, c.id);
        expect(child.run.status).to.equal('failed');
        expect(child.generations[0].outputs.find((o: any) => o.node_id === 'read').error).to.match(/^tool_denied/).and.include('policy_denied');
        expect(JSON.stringify(child)).to.not.include(SECRET);
      }
      expect(JSON.stringify(outer)).to.not.include(SECRET);

      const mine = (await post(`/api/workspaces/${wsA}/loops/outer/run`, {})).run;
      expect((await ended(wsA, mine.id)).run.status).to.equal('done');
      const opChild = ((await get(`/api/workspaces/${wsA}/loop-runs?loop=reader`)).runs as any[]).find((r) => r.parent_loop_run_id === mine.id);
      expect(JSON.stringify(await ended(wsA, opChild.id))).to.include(SECRET);
    });

    it('a loop it starts whose agent node runs an unrestricted agent: that session is held to the starter\'s policy (session_denied), the file unread; the operator\'s run reads it', async () => {
      await addLoop(wsA, loopDef('delegate', [{ id: 'ask', kind: 'run-agent', prompt: READ_SECRET }]));
      const started = await call('svc__loop_run_start', { loop: 'delegate' });
      expect(started.isError ?? false, text(started)).to.equal(false);
      const runId = started.structuredContent.run.id;
      await ended(wsA, runId);
      const [s] = await loopSessions(runId);
      expect(s.lineage.started_by_session_id).to.equal(sessionId);
      const [result] = await eventually(async () => {
        const rows = await toolResults(s.id);
        expect(rows).to.have.length(1);
        return rows;
      });
      expect(result.tool_error).to.equal(true);
      expect(JSON.stringify(result.tool_result)).to.include('session_denied').and.not.include(SECRET);

      const mine = (await post(`/api/workspaces/${wsA}/loops/delegate/run`, {})).run;
      await ended(wsA, mine.id);
      const [opSession] = await loopSessions(mine.id);
      const [opResult] = await eventually(async () => {
        const rows = await toolResults(opSession.id);
        expect(rows).to.have.length(1);
        return rows;
      });
      expect(JSON.stringify(opResult.tool_result)).to.include(SECRET);
    });

    it('a job it fires runs its session under the firing agent\'s policy: the job\'s read is denied (session_denied); the operator\'s fire reads it', async () => {
      const res = await api.call('PUT', '/api/resources/automation.job/peek', {
        scope: { kind: 'workspace', id: wsA }, spec: { name: 'peek', agent_name: 'scripted', prompt: READ_SECRET, enabled: false, schedule: { mode: 'every', interval: '1h' } }, expected_version: 0,
      }, op);
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      const resultOf = async (runId: string) => {
        const run = await eventually(async () => {
          const r = (await get(`/api/automation/runs/${runId}`)).run;
          expect(r.status).to.be.oneOf(['succeeded', 'failed']);
          return r;
        }, 60_000);
        const [row] = await eventually(async () => {
          const rows = await toolResults(run.session_id);
          expect(rows).to.have.length(1);
          return rows;
        });
        return row;
      };
      const fired = await call('svc__automation_jobs_trigger', { id: 'peek' });
      expect(fired.isError ?? false, text(fired)).to.equal(false);
      const denied = await resultOf(fired.structuredContent.run.id);
      expect(denied.tool_error).to.equal(true);
      expect(JSON.stringify(denied.tool_result)).to.include('session_denied').and.not.include(SECRET);

      const mine = (await post('/api/automation/jobs/peek/trigger', {})).run;
      expect(JSON.stringify((await resultOf(mine.id)).tool_result)).to.include(SECRET);
    });

    it('a session it spawns, running an unrestricted agent, is held to its policy: the read is denied (session_denied)', async () => {
      const said = await prompt(wsA, sessionId, '/spawn scripted');
      expect(said).to.match(/^spawned child session sess-/);
      const child = said.split(' ').at(-1)!;
      await prompt(wsA, child, READ_SECRET);
      const rows = await toolResults(child);
      expect(rows).to.have.length(1);
      expect(rows[0].tool_error).to.equal(true);
      expect(JSON.stringify(rows[0].tool_result)).to.include('session_denied').and.not.include(SECRET);
    });

    it('a task it creates and starts is worked under its policy: the session holding the run\'s lease is denied the read (session_denied) until it lets the lease go', async () => {
      const created = await call('svc__task_create', { title: 'read the secret for me', start: true });
      expect(created.isError ?? false, text(created)).to.equal(false);
      // The worker's own agent may read the file, and its mutating calls need no approval.
      const agent = await api.call('PUT', '/api/resources/agent/worker?wait=true', { scope: { kind: 'global' }, spec: { name: 'worker', prompt: 'p', permissions: 'approve-all' }, expected_version: 0 }, op);
      expect(agent.status, JSON.stringify(agent.body)).to.equal(201);
      const worker = (await post('/api/sessions', { workspace: wsA, agent_name: 'worker' })).session.id;
      await prompt(wsA, worker, '/call svc__task_run_claim_next {}');
      const [claimed] = await toolResults(worker);
      expect(claimed.tool_error ?? false, JSON.stringify(claimed)).to.equal(false);
      const { claim } = JSON.parse((claimed.tool_result as { content: string }).content);
      expect(claim.task.id).to.equal(created.structuredContent.task.id);
      const runId = claim.run.id;
      await prompt(wsA, worker, READ_SECRET);
      const denied = (await toolResults(worker))[1];
      expect(denied.tool_error).to.equal(true);
      expect(JSON.stringify(denied.tool_result)).to.include('session_denied').and.not.include(SECRET);

      // Its own work again once the lease is given back: the same read goes through.
      await prompt(wsA, worker, `/call svc__task_run_release {"run_id":"${runId}"}`);
      const released = (await toolResults(worker))[2];
      expect(released.tool_error ?? false, JSON.stringify(released.tool_result)).to.equal(false);
      await prompt(wsA, worker, READ_SECRET);
      expect(JSON.stringify((await toolResults(worker))[3].tool_result)).to.include(SECRET);
    });

    it('svc__loop_run_approve does not let the agent approve a tool call a run waits on: refused, the run still waiting, no file written; an operator\'s approve writes it', async () => {
      await addLoop(wsA, loopDef('writer', [{ id: 'write', kind: 'svc__workspace_write_file', params: { path: 'approved.txt', content: 'x' } }]));
      const run = (await post(`/api/workspaces/${wsA}/loops/writer/run`, {})).run;
      await eventually(async () => expect((await loopRun(wsA, run.id)).run).to.include({ status: 'needs-approval', active_gate_id: 'write' }));
      const approve = await call('svc__loop_run_approve', { run_id: run.id, gate_id: 'write', decision: 'approve' });
      expect(approve.isError).to.equal(true);
      expect(text(approve)).to.include('only an operator');
      expect((await loopRun(wsA, run.id)).run).to.include({ status: 'needs-approval', active_gate_id: 'write' });
      expect(existsSync(path.join(rootA, 'approved.txt'))).to.equal(false);

      await post(`/api/workspaces/${wsA}/loop-runs/${run.id}/approve`, { gate_id: 'write', decision: 'approve' });
      expect((await ended(wsA, run.id)).run.status).to.equal('done');
      expect(existsSync(path.join(rootA, 'approved.txt'))).to.equal(true);
    });
  });
});
