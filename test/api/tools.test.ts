import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { readUiStream } from '../helpers/ui-stream.ts';

const FIXTURE = path.resolve('test/helpers/mcp-server.ts');
const SECRET = 'fixture-secret-6f1d2c9a';
const stdioServer = (name: string, secretRef = 'env:SVC_SECRET_TEST_FIXTURE') => ({
  name, command: process.execPath, args: ['--import', 'tsx', FIXTURE], secret_env: { FIXTURE_TOKEN: secretRef },
});

/** startHttpFixture runs the fixture MCP server on streamable HTTP and returns its URL. */
async function startHttpFixture(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, 'http'], { stdio: ['ignore', 'pipe', 'inherit'] });
  for await (const line of createInterface({ input: child.stdout! })) {
    const m = /^PORT (\d+)$/.exec(line);
    if (m) return { url: `http://127.0.0.1:${m[1]}/mcp`, child };
  }
  throw new Error('the HTTP fixture exited before listening');
}

describe('Tools and toolsets (HTTP, real Redis, real MCP servers over stdio and HTTP)', function () {
  this.timeout(120_000);
  const f = new ServiceFixture().install();
  let http: { url: string; child: ChildProcess };

  const put = async (kind: string, id: string, spec: unknown, scope: unknown = { kind: 'global' }) => {
    const res = await f.api.put(`/api/resources/${kind}/${id}?wait=true`, { scope, spec, expected_version: 0 });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  };
  const config = (yaml: string, file = path.join(f.dataDir, 'config.yaml')) => {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, yaml);
  };
  const session = async () => (await f.api.post('/api/sessions', { workspace: f.ws.id })).body.session as { id: string };
  const invoke = (id: string, body: object) => f.api.post(`/api/tools/${id}/invoke`, body);
  // NOTE: MCP servers start in the background after their record is written (reads never start them), so a test
  // waits until the server's tools are listed.
  const listed = (id: string) => eventually(async () => {
    const res = await f.api.get(`/api/tools/${id}`);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body.tool;
  });

  before(async () => {
    process.env.SVC_SECRET_TEST_FIXTURE = SECRET;
    http = await startHttpFixture();
  });
  after(() => {
    http.child.kill();
    delete process.env.SVC_SECRET_TEST_FIXTURE;
  });
  beforeEach(() => writeFileSync(path.join(f.root, 'notes.md'), '# Notes\nalpha line\nthe Beta line\n'));

  describe('native tools', () => {
    it('lists built-ins with honest flags; workspace tools need a workspace in the context', async () => {
      const bare = (await f.api.get('/api/tools')).body.tools as any[];
      const read = bare.find((t) => t.descriptor.tool_id === 'svc__workspace_read_file');
      expect(read.descriptor).to.include({ read_only: true, destructive: false, open_world: false, risk: 'read', visibility: 'session' });
      expect(read.descriptor.backend.kind).to.equal('native_go');
      expect(read.descriptor.source).to.include({ kind: 'builtin', owner: 'daemon' });
      expect(read.descriptor.input_schema.required).to.deep.equal(['path']);
      expect(read.descriptor.input_schema_digest).to.match(/^sha256:[0-9a-f]{64}$/);
      expect(read.availability).to.include({ registered: true, executable: false });
      expect(read.decision).to.include({ callable: false, availability_result: 'unavailable' });
      expect(read.decision.reason_codes).to.deep.equal(['dependency_missing']);
      const scoped = (await f.api.get(`/api/tools/svc__workspace_read_file?workspace_id=${f.ws.id}`)).body.tool;
      expect(scoped.decision).to.include({ callable: true, approval_required: false, availability_result: 'allowed' });
      const write = (await f.api.get(`/api/tools/svc__workspace_write_file?workspace_id=${f.ws.id}`)).body.tool;
      expect(write.descriptor).to.include({ read_only: false, risk: 'mutating' });
      expect(write.decision).to.include({ callable: true, approval_required: true, system_permission_mode: 'approve-reads' });
    });

    it('invokes read, list and search inside the root and refuses a path that leaves it', async () => {
      const read = await invoke('svc__workspace_read_file', { workspace_id: f.ws.id, input: { path: 'notes.md' } });
      expect(read.status).to.equal(200);
      expect(read.body).to.include({ tool_id: 'svc__workspace_read_file', status: 'completed', truncated: false });
      expect(read.body.result.content[0].text).to.equal('# Notes\nalpha line\nthe Beta line\n');
      expect(read.body.events.map((e: any) => e.kind)).to.deep.equal(['tool.call_started', 'tool.call_completed']);
      const list = await invoke('svc__workspace_list_files', { workspace_id: f.ws.id, input: {} });
      expect(list.body.result.structured.entries).to.deep.equal([{ name: 'notes.md', type: 'file', size: 33 }]);
      const search = await invoke('svc__workspace_search_text', { workspace_id: f.ws.id, input: { query: 'beta' } });
      expect(search.body.result.structured.matches).to.deep.equal([{ path: 'notes.md', line: 3, text: 'the Beta line' }]);

      const escape = await invoke('svc__workspace_read_file', { workspace_id: f.ws.id, input: { path: '../../../../etc/hostname' } });
      expect(escape.status).to.equal(403);
      expect(escape.body.error).to.include({ code: 'tool_denied', tool_id: 'svc__workspace_read_file' });
      expect(escape.body.error.reason_codes).to.deep.equal(['scope_mismatch']);
      expect(JSON.stringify(escape.body)).not.to.include('content');
    });

    it('validates input against input_schema: 400 naming the path, and the tool does not run', async () => {
      const res = await invoke('svc__workspace_write_file', { workspace_id: f.ws.id, input: { path: 'new.txt', content: 7 } });
      expect(res.status).to.equal(400);
      expect(res.body.error).to.include({ code: 'tool_invalid_input', tool_id: 'svc__workspace_write_file' });
      expect(res.body.error.reason_codes).to.deep.equal(['schema_invalid']);
      expect(res.body.error.details.errors).to.deep.include({ path: '/content', message: 'must be string' });
      expect(res.body.error.details.events.map((e: any) => e.kind)).to.deep.equal(['tool.call_started', 'tool.call_failed']);
      expect(existsSync(path.join(f.root, 'new.txt'))).to.equal(false);
    });

    it('skill tools list and read the skills of the context', async () => {
      const list = await invoke('svc__skill_list', { workspace_id: f.ws.id, input: {} });
      expect(list.status).to.equal(200);
      expect(list.body.result.structured.skills.map((s: any) => s.name)).to.include.members(['svc-resources', 'svc-sessions']);
      const view = await invoke('svc__skill_view', { input: { name: 'svc-resources' } });
      expect(view.body.result.content[0].text).to.match(/^---\nname: svc-resources/);
      const missing = await invoke('svc__skill_view', { input: { name: 'nope' } });
      expect(missing.status).to.equal(400);
      expect(missing.body.error.details).to.include({ code: 'skill_not_found', name: 'nope' });
    });

    it('answers an unknown tool with the tools-family 404 body', async () => {
      for (const res of [await f.api.get('/api/tools/svc__nope'), await invoke('svc__nope', { input: {} })]) {
        expect(res.status).to.equal(404);
        expect(res.body).to.deep.equal({ error: { code: 'tool_not_found', details: {}, layer: '', message: 'tool not found', reason_codes: ['tool_unknown'], tool_id: 'svc__nope' } });
      }
    });
  });

  describe('approvals', () => {
    it('a tool needing approval refuses without a token (202) and runs once with a valid one', async () => {
      const s = await session();
      const input = { path: 'made.txt', content: 'hello' };
      const bare = await invoke('svc__workspace_write_file', { session_id: s.id, input });
      expect(bare.status).to.equal(202);
      expect(bare.body.error).to.include({ code: 'tool_approval_required', layer: 'approval' });
      expect(bare.body.error.reason_codes).to.deep.equal(['approval_token_missing', 'approval_required']);
      expect(existsSync(path.join(f.root, 'made.txt'))).to.equal(false);

      const approval = await f.api.post('/api/tools/svc__workspace_write_file/approvals', { session_id: s.id, input });
      expect(approval.status).to.equal(201);
      expect(approval.body.approval).to.have.keys('approval_token', 'expires_at', 'input_digest', 'tool_id');
      expect(approval.body.approval.approval_token).to.match(/^[A-Za-z0-9_-]{43}$/);
      const ok = await invoke('svc__workspace_write_file', { session_id: s.id, input, approval_token: approval.body.approval.approval_token });
      expect(ok.status).to.equal(200);
      expect(ok.body.events.map((e: any) => e.approval_mode)).to.include('token');
      expect(readFileSync(path.join(f.root, 'made.txt'), 'utf8')).to.equal('hello');

      writeFileSync(path.join(f.root, 'made.txt'), 'changed');
      rmSync(path.join(f.root, 'made.txt'));
      const replay = await invoke('svc__workspace_write_file', { session_id: s.id, input, approval_token: approval.body.approval.approval_token });
      expect(replay.status).to.equal(403);
      expect(replay.body.error.reason_codes).to.deep.equal(['approval_token_replayed', 'approval_required']);
      expect(existsSync(path.join(f.root, 'made.txt'))).to.equal(false);
    });

    it('refuses a token presented with another input, by another session, or after it expired', async () => {
      const [s1, s2] = [await session(), await session()];
      const input = { path: 'a.txt', content: 'A' };
      const token = (await f.api.post('/api/tools/svc__workspace_write_file/approvals', { session_id: s1.id, input })).body.approval.approval_token;
      const other = await invoke('svc__workspace_write_file', { session_id: s1.id, input: { ...input, content: 'B' }, approval_token: token });
      expect(other.status).to.equal(403);
      expect(other.body.error.reason_codes[0]).to.equal('approval_token_mismatch');
      const foreign = await invoke('svc__workspace_write_file', { session_id: s2.id, input, approval_token: token });
      expect(foreign.body.error.reason_codes[0]).to.equal('approval_token_mismatch');
      const unknown = await invoke('svc__workspace_write_file', { session_id: s1.id, input, approval_token: 'x'.repeat(43) });
      expect(unknown.body.error.reason_codes[0]).to.equal('approval_token_mismatch');
      expect(existsSync(path.join(f.root, 'a.txt'))).to.equal(false);
      // A mismatch does not use the token up: the right call still succeeds.
      expect((await invoke('svc__workspace_write_file', { session_id: s1.id, input, approval_token: token })).status).to.equal(200);

      config('tools:\n  approval_timeout: 1ms\n', path.join(f.root, '.svc', 'config.yaml'));
      const late = (await f.api.post('/api/tools/svc__workspace_write_file/approvals', { session_id: s1.id, input: { path: 'b.txt', content: 'B' } })).body.approval;
      await new Promise((r) => setTimeout(r, 20));
      const expired = await invoke('svc__workspace_write_file', { session_id: s1.id, input: { path: 'b.txt', content: 'B' }, approval_token: late.approval_token });
      expect(expired.status).to.equal(403);
      expect(expired.body.error.reason_codes[0]).to.equal('approval_token_expired');
      expect(existsSync(path.join(f.root, 'b.txt'))).to.equal(false);
    });

    it('requires session_id and a matching input_digest to issue a token', async () => {
      const missing = await f.api.post('/api/tools/svc__workspace_write_file/approvals', { input: {} });
      expect(missing.status).to.equal(400);
      expect(missing.body.error.details).to.deep.equal({ session_id: 'is required' });
      const s = await session();
      const bad = await f.api.post('/api/tools/svc__workspace_write_file/approvals', { session_id: s.id, input: { a: 1 }, input_digest: 'sha256:00' });
      expect(bad.status).to.equal(400);
      expect(bad.body.error.reason_codes).to.deep.equal(['approval_token_mismatch']);
    });
  });

  describe('MCP servers', () => {
    it('lists and calls the tools of a stdio server; secret_env values are redacted from results', async () => {
      config('tools:\n  trusted_sources: [fixture]\n');
      await put('mcp_server', 'fixture', stdioServer('fixture'));
      await listed('mcp__fixture__echo');
      const tools = (await f.api.get('/api/tools')).body.tools as any[];
      const echo = tools.find((t) => t.descriptor.tool_id === 'mcp__fixture__echo');
      expect(echo.descriptor.backend).to.include({ kind: 'mcp', mcp_server: 'fixture', mcp_tool: 'echo' });
      expect(echo.descriptor.source).to.include({ kind: 'mcp', owner: 'fixture', raw_tool_name: 'echo', resource_id: 'fixture' });
      expect(echo.decision).to.include({ callable: true, approval_required: false, source_policy_result: 'trusted' });
      const note = tools.find((t) => t.descriptor.tool_id === 'mcp__fixture__write_note');
      expect(note.descriptor).to.include({ read_only: false, destructive: false, risk: 'mutating' });
      expect(note.decision.approval_required).to.equal(true);

      const res = await invoke('mcp__fixture__echo', { input: { text: 'hi there' } });
      expect(res.status).to.equal(200);
      expect(res.body.result.content).to.deep.equal([{ type: 'text', text: 'hi there' }]);
      expect(res.body.result.structured).to.deep.equal({ echoed: 'hi there' });

      const who = await invoke('mcp__fixture__whoami', { input: {} });
      expect(who.status).to.equal(200);
      expect(JSON.stringify(who.body)).not.to.include(SECRET);
      expect(who.body.result.content[0].text).to.equal('started with token [REDACTED]');
      expect(who.body.result.structured).to.deep.equal({ user: 'fixture', api_token: '[REDACTED]' });
      expect(who.body.result.redactions.map((r: any) => [r.path, r.reason])).to.deep.equal([['/content/0/text', 'secret_value'], ['/structured/api_token', 'secret_field']]);

      const failed = await invoke('mcp__fixture__fail', { input: {} });
      expect(failed.status).to.equal(502);
      expect(failed.body.error.code).to.equal('tool_backend_failed');
      expect(failed.body.error.details.result.content[0].text).to.equal('the fixture failed on purpose');
    });

    it('cuts a result at max_result_bytes and says so', async () => {
      config('tools:\n  trusted_sources: [fixture]\n  max_result_bytes: 1000\n');
      await put('mcp_server', 'fixture', stdioServer('fixture'));
      await listed('mcp__fixture__big');
      const res = await invoke('mcp__fixture__big', { input: { bytes: 5000 } });
      expect(res.status).to.equal(200);
      expect(res.body.truncated).to.equal(true);
      expect(res.body.result).to.include({ bytes: 5000, truncated: true });
      expect(res.body.result.content[0].text).to.have.length(1000);
      expect(res.body.events.map((e: any) => e.kind)).to.deep.equal(['tool.call_started', 'tool.call_completed', 'tool.result_truncated']);
      expect(res.body.events[2].reason_codes).to.deep.equal(['result_budget_exceeded']);
      const small = await invoke('mcp__fixture__big', { input: { bytes: 10 } });
      expect(small.body.truncated).to.equal(false);
    });

    it('calls a tool over streamable HTTP, with approval for an untrusted source', async () => {
      await put('mcp_server', 'remote', { name: 'remote', transport: 'http', url: http.url });
      const view = await listed('mcp__remote__echo');
      expect(view.decision).to.include({ callable: true, approval_required: true, source_policy_result: 'approval_required' });
      const s = await session();
      const input = { text: 'over http' };
      expect((await invoke('mcp__remote__echo', { session_id: s.id, input })).status).to.equal(202);
      const token = (await f.api.post('/api/tools/mcp__remote__echo/approvals', { session_id: s.id, input })).body.approval.approval_token;
      // NOTE: no retry: a listed tool stays listed while its server stays up (the fixture is stateless, no session to
      // lose), and a token is used up by the first call that reaches the server. A full cluster run once saw 404 for
      // 15 s here: the catalog had cached a snapshot of a server's earlier states under the pool's newer version.
      const res = await invoke('mcp__remote__echo', { session_id: s.id, input, approval_token: token });
      if (res.status !== 200) {
        const [tool, record] = await Promise.all([f.api.get('/api/tools/mcp__remote__echo'), f.api.get('/api/resources/mcp_server/remote/status')]);
        expect(res.status, JSON.stringify({ invoke: res.body, tool: tool.body, status: record.body.status })).to.equal(200);
      }
      expect(res.body.result.structured).to.deep.equal({ echoed: 'over http' });
    });

    it('a server whose command does not exist leaves its tools unavailable (backend_not_executable), and lists still answer', async () => {
      await put('mcp_server', 'gone', { name: 'gone', command: path.join(f.root, 'no-such-binary') });
      await put('tool', 'gone-echo', {
        id: 'team__gone_echo', backend: { kind: 'mcp', mcp_server: 'gone', mcp_tool: 'echo' }, input_schema: { type: 'object' },
        source: { kind: 'mcp', owner: 'gone', raw_server_name: 'gone', raw_tool_name: 'echo' }, visibility: 'session', risk: 'read', read_only: true,
      });
      const list = await eventually(async () => {
        const res = await f.api.get('/api/tools');
        expect(res.status).to.equal(200);
        const view = res.body.tools.find((t: any) => t.descriptor.tool_id === 'team__gone_echo');
        expect(view.availability.reason_codes).to.deep.equal(['backend_not_executable']);
        return res;
      });
      expect(list.body.tools.some((t: any) => t.descriptor.tool_id.startsWith('mcp__gone__'))).to.equal(false);
      const res = await invoke('team__gone_echo', { input: {} });
      expect(res.status).to.equal(422);
      expect(res.body.error).to.include({ code: 'tool_unavailable', layer: 'availability' });
    });

    it('a server whose secret_env does not resolve is not started and its tools are unavailable', async () => {
      await put('mcp_server', 'locked', stdioServer('locked', 'env:SVC_SECRET_TEST_UNSET'));
      await put('tool', 'team-echo', {
        id: 'team__echo', backend: { kind: 'mcp', mcp_server: 'locked', mcp_tool: 'echo' }, input_schema: { type: 'object' },
        source: { kind: 'mcp', owner: 'locked', raw_server_name: 'locked', raw_tool_name: 'echo' }, visibility: 'session', risk: 'read', read_only: true,
      });
      const view = await eventually(async () => {
        const tool = (await f.api.get('/api/tools/team__echo')).body.tool;
        expect(tool.availability.reason_codes).to.deep.equal(['mcp_auth_unconfigured']);
        return tool;
      });
      expect(view.availability).to.include({ executable: false, available: false });
      const res = await invoke('team__echo', { input: {} });
      expect(res.status).to.equal(422);
      expect(res.body.error).to.include({ code: 'tool_unavailable', layer: 'source_policy' });
    });
  });

  describe('pipeline layers over HTTP', () => {
    it('an agent\'s allow-list, deny list and toolsets change the answer for that agent only', async () => {
      await put('agent', 'reader', { name: 'reader', prompt: 'p', toolsets: ['svc__catalog'], deny_tools: ['svc__tool_info'] });
      const as = (await f.api.get('/api/tools?agent_name=reader')).body.tools as any[];
      const by = (id: string) => as.find((t) => t.descriptor.tool_id === id).decision;
      expect(by('svc__tool_search')).to.include({ callable: true, agent_policy_result: 'allowed' });
      expect(by('svc__tool_info')).to.include({ callable: false, agent_policy_result: 'denied' });
      expect(by('svc__session_recap')).to.include({ callable: false, agent_policy_result: 'denied' });
      expect(by('svc__session_recap').reason_codes).to.deep.equal(['policy_denied']);
      expect((await f.api.get('/api/tools/svc__session_recap')).body.tool.decision.callable).to.equal(true);
      const denied = await invoke('svc__tool_info', { agent_name: 'reader', input: { tool_id: 'svc__tool_search' } });
      expect(denied.status).to.equal(403);
      expect(denied.body.error).to.include({ code: 'tool_denied', layer: 'registry_policy' });
      expect((await f.api.get('/api/tools?agent_name=ghost')).status).to.equal(404);
    });

    it('global and workspace configuration: deny patterns and the permission mode', async () => {
      config('tools:\n  deny: ["svc__session_*"]\n');
      const global = (await f.api.get('/api/tools/svc__session_recap')).body.tool.decision;
      expect(global).to.include({ callable: false, registry_policy_result: 'denied' });
      config('tools:\n  permission_mode: deny-all\n', path.join(f.root, '.svc', 'config.yaml'));
      const local = (await f.api.get(`/api/tools/svc__tool_search?workspace_id=${f.ws.id}`)).body.tool.decision;
      expect(local).to.include({ approval_required: true, system_permission_mode: 'deny-all' });
      expect((await f.api.get('/api/tools/svc__tool_search')).body.tool.decision.approval_required).to.equal(false);
    });

    it('a sync tool.pre_call hook can deny a call; a required hook that times out denies, an optional one does not', async () => {
      const script = 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const e=JSON.parse(s);'
        + 'if(String(e.input.path).includes("private"))console.log(JSON.stringify({decision:"deny",reason:"private files stay private"}));})';
      await put('hook.binding', 'guard', { name: 'guard', event: 'tool.pre_call', mode: 'sync', command: process.execPath, args: ['-e', script], matcher: { tool_id: 'svc__workspace_*' } });
      writeFileSync(path.join(f.root, 'private.txt'), 'keep out');
      const denied = await invoke('svc__workspace_read_file', { workspace_id: f.ws.id, input: { path: 'private.txt' } });
      expect(denied.status).to.equal(403);
      expect(denied.body.error).to.include({ code: 'tool_denied', layer: 'hook' });
      expect(denied.body.error.details).to.include({ hook: 'guard', reason: 'private files stay private' });
      expect(JSON.stringify(denied.body)).not.to.include('keep out');
      const allowed = await invoke('svc__workspace_read_file', { workspace_id: f.ws.id, input: { path: 'notes.md' } });
      expect(allowed.status).to.equal(200);
      expect(allowed.body.result.metadata.hooks.map((h: any) => [h.name, h.decision])).to.deep.equal([['guard', 'allow']]);
      // Not matched: other tools never run the hook.
      expect((await invoke('svc__tool_search', { input: { query: 'x' } })).body.result.metadata.hooks).to.deep.equal([]);

      const sleeper = ['-e', 'setTimeout(()=>{}, 5000)'];
      await put('hook.binding', 'slow-optional', { name: 'slow-optional', event: 'tool.pre_call', mode: 'sync', command: process.execPath, args: sleeper, timeout: '200ms', matcher: { tool_id: 'svc__tool_search' } });
      const optional = await invoke('svc__tool_search', { input: { query: 'x' } });
      expect(optional.status).to.equal(200);
      expect(optional.body.result.metadata.hooks[0]).to.include({ name: 'slow-optional', decision: 'error' });
      await put('hook.binding', 'slow-required', { name: 'slow-required', event: 'tool.pre_call', mode: 'sync', required: true, command: process.execPath, args: sleeper, timeout: '200ms', matcher: { tool_id: 'svc__tool_search' } });
      const required = await invoke('svc__tool_search', { input: { query: 'x' } });
      expect(required.status).to.equal(403);
      expect(required.body.error.details).to.include({ hook: 'slow-required' });
    });

    it('conflicting ids are marked conflicted and refuse to run', async () => {
      const spec = (id: string) => ({ id, backend: { kind: 'native_go', native_name: 'tool_search' }, input_schema: { type: 'object' }, source: { kind: 'extension', owner: 'ext' }, visibility: 'session', risk: 'read', read_only: true });
      await put('tool', 'one', spec('team__search'));
      await put('tool', 'two', spec('team__search'));
      await put('tool', 'squat', spec('svc__tool_search_v2'));
      const view = (await f.api.get('/api/tools/team__search')).body.tool;
      expect(view.availability).to.include({ conflicted: true });
      expect(view.decision.reason_codes).to.include('conflicted_id');
      const res = await invoke('team__search', { input: {} });
      expect(res.status).to.equal(409);
      expect(res.body.error.code).to.equal('tool_conflict');
      expect((await f.api.get('/api/tools/svc__tool_search_v2')).body.tool.decision.reason_codes).to.include('reserved_namespace');
    });
  });

  describe('search, session routes and toolsets', () => {
    it('ranks search results: exact id, then id, title, hints and description matches', async () => {
      const ids = async (query: string, limit?: number) => ((await f.api.post('/api/tools/search', { query, limit })).body.tools as any[]).map((t) => t.descriptor.tool_id);
      expect(await ids('svc__tool_info')).to.deep.equal(['svc__tool_info']);
      expect((await ids('grep'))[0]).to.equal('svc__workspace_search_text');
      expect(await ids('file', 2)).to.have.length(2);
      expect(await ids('zzz-nothing')).to.deep.equal([]);
      expect((await ids('')).length).to.equal((await f.api.get('/api/tools')).body.tools.length);
      expect((await f.api.post('/api/tools/search', {})).status).to.equal(400);
    });

    it('session routes list only what the session can see and call, and check the body scope', async () => {
      await put('agent', 'narrow', { name: 'narrow', prompt: 'p', deny_tools: ['svc__workspace_write_file'] });
      const s = await session();
      const all = ((await f.api.get(`/api/workspaces/${f.ws.id}/sessions/${s.id}/tools`)).body.tools as any[]).map((t) => t.descriptor.tool_id);
      expect(all).to.include.members(['svc__workspace_read_file', 'svc__workspace_write_file', 'svc__session_recap']);
      const narrow = ((await f.api.get(`/api/workspaces/${f.ws.id}/sessions/${s.id}/tools?agent_name=narrow`)).body.tools as any[]).map((t) => t.descriptor.tool_id);
      expect(narrow).to.include('svc__workspace_read_file').and.not.include('svc__workspace_write_file');
      const found = await f.api.post(`/api/workspaces/${f.ws.id}/sessions/${s.id}/tools/search`, { query: 'recap' });
      expect(found.body.tools.map((t: any) => t.descriptor.tool_id)).to.deep.equal(['svc__session_recap']);
      const mismatch = await f.api.post(`/api/workspaces/${f.ws.id}/sessions/${s.id}/tools/search`, { query: 'x', session_id: 'other' });
      expect(mismatch.status).to.equal(400);
      expect(mismatch.body.error.reason_codes).to.deep.equal(['scope_mismatch']);
      const recap = await invoke('svc__session_recap', { session_id: s.id, input: {} });
      expect(recap.status).to.equal(200);
      expect(recap.body.result.structured.session.id).to.equal(s.id);
    });

    it('toolsets expand built-in and configured sets and report unknown members and cycles', async () => {
      config('tools:\n  toolsets:\n    team__base: {tools: [svc__tool_search], toolsets: [svc__workspace]}\n    team__loop: {toolsets: [team__loop2]}\n    team__loop2: {toolsets: [team__loop, team__ghost]}\n');
      const all = (await f.api.get('/api/toolsets')).body.toolsets as any[];
      expect(all.map((t) => t.id)).to.include.members(['svc__bootstrap', 'svc__catalog', 'svc__sessions', 'svc__workspace', 'team__base']);
      const base = (await f.api.get('/api/toolsets/team__base')).body.toolset;
      expect(base).to.deep.include({ status: 'expanded', reason_codes: [], tools: ['svc__tool_search'], toolsets: ['svc__workspace'] });
      expect(base.expanded_tools).to.deep.equal(['svc__tool_search', 'svc__workspace_list_files', 'svc__workspace_read_file', 'svc__workspace_search_text', 'svc__workspace_write_file']);
      const loop = (await f.api.get('/api/toolsets/team__loop')).body.toolset;
      expect(loop.status).to.equal('degraded');
      expect(loop.reason_codes).to.have.members(['toolset_cycle', 'toolset_unknown']);
      expect((await f.api.get('/api/toolsets/team__nope')).status).to.equal(404);
    });
  });

  describe('session agents call tools over MCP', () => {
    const prompt = (sid: string, message: string) => fetch(`${f.service.url}/api/workspaces/${f.ws.id}/sessions/${sid}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message }) }).then(readUiStream);
    const results = async (sid: string) => ((await f.api.get(`/api/sessions/${sid}/events?type=tool_result`)).body.events as any[]).map((e) => e.content);

    it('the agent gets the service\'s tools as an MCP server and its calls go through the session\'s policy', async () => {
      await put('agent', 'careful', { name: 'careful', prompt: 'p', deny_tools: ['svc__workspace_search_text'] });
      const s = (await f.api.post('/api/sessions', { workspace: f.ws.id, agent_name: 'careful' })).body.session;
      await prompt(s.id, '/call svc__workspace_read_file {"path":"notes.md"}\n/call svc__workspace_write_file {"path":"x.txt","content":"x"}\n/call svc__workspace_search_text {"query":"alpha"}');
      const [read, write, search] = await results(s.id);
      expect(read.tool_name).to.equal('svc__workspace_read_file');
      expect(JSON.stringify(read.tool_result)).to.include('alpha line');
      expect(read.tool_error).to.not.equal(true);
      expect(write.tool_error).to.equal(true);
      expect(JSON.stringify(write.tool_result)).to.include('tool_approval_required');
      expect(existsSync(path.join(f.root, 'x.txt'))).to.equal(false);
      expect(search.tool_error).to.equal(true);
      expect(JSON.stringify(search.tool_result)).to.include('tool_denied');
    });

    it('refuses the MCP endpoint without a live session token', async () => {
      const res = await fetch(`${f.service.url}/api/agent/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: 'Bearer svc_st_nope' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) });
      expect(res.status).to.equal(401);
    });
  });
});
