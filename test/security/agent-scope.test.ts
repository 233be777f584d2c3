import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Service } from '../../runtime/process/service.ts';
import { TSX_LOADER } from '../helpers/agents.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, startService } from '../helpers/service.ts';
import { readUiStream } from '../helpers/ui-stream.ts';

// A real ACP agent started through an agent definition's `command` (the scripted agent, run as a program).
const COMMAND_AGENT = `${process.execPath} --import ${TSX_LOADER} ${path.resolve('runtime/agents/scripted.ts')}`;

describe('Agents act only within their session (real Redis, real scripted agents over /api/agent/mcp and /api/agent/spawn)', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  let service: Service;
  let api: Client;
  let rootA: string;
  let rootB: string;
  let dataDir: string;
  let wsA: { id: string };
  let wsB: { id: string };

  before(async () => { await redis.start(); });
  after(async () => { await redis.destroy(); });
  beforeEach(async () => {
    await redis.flush();
    rootA = mkdtempSync(path.join(os.tmpdir(), 'svc-scope-a-'));
    rootB = mkdtempSync(path.join(os.tmpdir(), 'svc-scope-b-'));
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-scope-data-'));
    service = await startService(redis.url, { DATA_DIR: dataDir });
    api = new Client(service.url);
    wsA = (await api.post('/api/workspaces', { root_dir: rootA })).body.workspace;
    wsB = (await api.post('/api/workspaces', { root_dir: rootB })).body.workspace;
  });
  afterEach(async () => {
    await service.stop();
    for (const d of [rootA, rootB, dataDir]) rmSync(d, { recursive: true, force: true });
  });

  const create = async (ws: { id: string }, extra: object = {}) => {
    const res = await api.post('/api/sessions', { workspace: ws.id, ...extra });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.session as { id: string; workspace_id: string };
  };
  const prompt = async (s: { id: string; workspace_id: string }, message: string) => {
    const res = await fetch(`${service.url}/api/workspaces/${s.workspace_id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message }) });
    const { chunks } = await readUiStream(res);
    return chunks.filter((c: any) => c.type === 'text-delta').map((c: any) => c.delta).join('');
  };
  /** call makes the session's agent call a tool over its MCP server and returns the stored tool_result. */
  const call = async (s: { id: string; workspace_id: string }, tool: string, input: object) => {
    await prompt(s, `/call ${tool} ${JSON.stringify(input)}`);
    const results = (await api.get(`/api/sessions/${s.id}/events?type=tool_result`)).body.events as any[];
    return results.at(-1).content as { tool_name: string; tool_error?: boolean; tool_result: unknown };
  };
  const sessionIds = async () => ((await api.get('/api/sessions')).body.sessions as any[]).map((s) => s.id).sort();

  describe('session-scoped tools over /api/agent/mcp', () => {
    it('refuses an agent reading another session\'s recap (other workspace, and an unrelated session of its own workspace) with tool_denied/scope_mismatch, leaking nothing', async () => {
      const caller = await create(wsA);
      const neighbour = await create(wsA);
      const foreign = await create(wsB);
      await prompt(neighbour, 'neighbour-secret-5b1e');
      await prompt(foreign, 'foreign-secret-9c2d');
      const table = [
        { reason: 'a session of another workspace', target: foreign.id, secret: 'foreign-secret-9c2d' },
        { reason: 'an unrelated session of the same workspace', target: neighbour.id, secret: 'neighbour-secret-5b1e' },
        { reason: 'a session id that does not exist (same answer: ids are not disclosed)', target: 'sess-0000000000000000', secret: 'does not exist' },
      ];
      for (const { reason, target, secret } of table) {
        const out = await call(caller, 'svc__session_recap', { session_id: target });
        const text = JSON.stringify(out.tool_result);
        expect(out.tool_error, reason).to.equal(true);
        expect(text, reason).to.include('tool_denied').and.include('scope_mismatch');
        expect(text, reason).to.not.include(secret).and.not.include('recent_messages');
      }
      // Its own recap is what the tool is for.
      await prompt(caller, 'caller-note-77aa');
      const own = await call(caller, 'svc__session_recap', {});
      expect(own.tool_error).to.not.equal(true);
      expect(JSON.stringify(own.tool_result)).to.include('caller-note-77aa');
    });

    it('lets an agent read the sessions it spawned, but not a child read its parent or sibling', async () => {
      const parent = await create(wsA);
      const said = [await prompt(parent, '/spawn scripted'), await prompt(parent, '/spawn scripted')];
      const [childId, siblingId] = said.map((s) => s.split(' ').at(-1)!);
      expect(childId).to.match(/^sess-/);
      const child = { id: childId, workspace_id: wsA.id };
      await prompt(child, 'child-note-3f3f');
      await prompt(parent, 'parent-note-4e4e');

      const down = await call(parent, 'svc__session_recap', { session_id: childId });
      expect(down.tool_error).to.not.equal(true);
      expect(JSON.stringify(down.tool_result)).to.include('child-note-3f3f');

      for (const [reason, target] of [['its parent', parent.id], ['its sibling', siblingId]]) {
        const up = await call(child, 'svc__session_recap', { session_id: target });
        expect(up.tool_error, reason).to.equal(true);
        expect(JSON.stringify(up.tool_result), reason).to.include('scope_mismatch').and.not.include('parent-note-4e4e');
      }
    });

    it('refuses every agent-facing tool that takes a session or workspace when it names another one', async () => {
      const caller = await create(wsA);
      const foreign = await create(wsB);
      await prompt(foreign, 'foreign-secret-1a1a');
      const visible = (await api.get(`/api/workspaces/${wsA.id}/sessions/${caller.id}/tools`)).body.tools as any[];
      const scoped = visible.filter((t) => ['session_id', 'workspace_id', 'workspace'].some((f) => f in (t.descriptor.input_schema.properties ?? {})));
      // The built-in session tool is among them; a new tool with such a field is covered by this test too.
      expect(scoped.map((t) => t.descriptor.tool_id)).to.include('svc__session_recap');
      for (const t of scoped) {
        const props = t.descriptor.input_schema.properties;
        const input = Object.fromEntries(Object.keys(props).filter((f) => ['session_id', 'workspace_id', 'workspace'].includes(f)).map((f) => [f, f === 'session_id' ? foreign.id : wsB.id]));
        const out = await call(caller, t.descriptor.tool_id, input);
        expect(out.tool_error, t.descriptor.tool_id).to.equal(true);
        expect(JSON.stringify(out.tool_result), t.descriptor.tool_id).to.not.include('foreign-secret-1a1a');
      }
    });

    it('keeps operator invocations (no session token) able to read any session as today', async () => {
      const caller = await create(wsA);
      const foreign = await create(wsB);
      await prompt(foreign, 'foreign-visible-to-operator');
      const res = await api.post('/api/tools/svc__session_recap/invoke', { session_id: caller.id, input: { session_id: foreign.id } });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(JSON.stringify(res.body.result)).to.include('foreign-visible-to-operator');
    });
  });

  describe('spawn', () => {
    const putAgent = async (name: string, spec: object) => {
      const res = await api.put(`/api/resources/agent/${name}?wait=true`, { scope: { kind: 'global' }, spec: { name, prompt: 'p', ...spec }, expected_version: 0 });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
    };

    it('refuses an agent spawning an agent definition with a command (403 spawn_command_agent_denied), even when the workspace config names it, and creates no session', async () => {
      await putAgent('runner', { command: COMMAND_AGENT });
      const parent = await create(wsA);
      const before = await sessionIds();
      const said = await prompt(parent, '/spawn runner');
      expect(said).to.match(/^spawn failed: 403 spawn_command_agent_denied/);
      expect(await sessionIds()).to.deep.equal(before);
      // A workspace's own configuration cannot grant it: agents write to the workspace directory.
      mkdirSync(path.join(rootA, '.svc'), { recursive: true });
      writeFileSync(path.join(rootA, '.svc', 'config.yaml'), 'roles:\n  spawn:\n    agent: runner\n');
      expect((await api.get(`/api/roles/spawn?workspace=${wsA.id}`)).body.role.agent).to.equal('runner');
      expect(await prompt(parent, '/spawn runner')).to.match(/^spawn failed: 403 spawn_command_agent_denied/);
      expect(await sessionIds()).to.deep.equal(before);
    });

    it('still spawns the built-in agent and command-less definitions, and a command agent the global spawn role names', async () => {
      await putAgent('plain', {});
      await putAgent('runner', { command: COMMAND_AGENT });
      const parent = await create(wsA);
      expect(await prompt(parent, '/spawn plain')).to.match(/^spawned child session sess-/);
      writeFileSync(path.join(dataDir, 'config.yaml'), 'roles:\n  spawn:\n    agent: runner\n');
      const said = await prompt(parent, '/spawn runner');
      expect(said).to.match(/^spawned child session sess-/);
      const child = (await api.get(`/api/sessions/${said.split(' ').at(-1)}`)).body.session;
      expect(child).to.include({ agent_name: 'runner', type: 'spawned', state: 'active' });
      expect(child.lineage.parent_session_id).to.equal(parent.id);
    });
  });
});
