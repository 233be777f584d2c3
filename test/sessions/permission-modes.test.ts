import { expect } from 'chai';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { decodeSpec } from '../../codecs/index.ts';
import { childPids } from '../helpers/agent-processes.ts';
import { SCRIPTED } from '../helpers/agents.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { readUiStream } from '../helpers/ui-stream.ts';

/** agentPids lists the built-in agent's processes this (in-process) service runs. */
const agentPids = () => childPids(process.pid, SCRIPTED);

describe('Agent permission modes, deny_tools on agent tools, tool identity and client file access (real Redis, real scripted agent)', function () {
  this.timeout(120_000);
  const f = new ServiceFixture().install();

  afterEach(() => eventually(async () => expect(agentPids(), 'agent processes left after stop').to.deep.equal([])));

  const define = async (agent: Record<string, unknown>) => {
    const res = await f.api.post('/api/agents', { scope: 'global', agent: { prompt: 'p', provider: 'local', ...agent } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  };
  const create = async (agent: string) => {
    const res = await f.api.post('/api/sessions', { workspace: f.ws.id, agent_name: agent });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.session.state, JSON.stringify(res.body.session.failure)).to.equal('active');
    return res.body.session as { id: string };
  };
  const prompt = async (id: string, message: string) => {
    const res = await fetch(`${f.service.url}/api/workspaces/${f.ws.id}/sessions/${id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message }) });
    const { chunks } = await readUiStream(res);
    return chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta as string);
  };
  const events = async (id: string, q = '') => (await f.api.get(`/api/sessions/${id}/events${q}`)).body.events as any[];
  const permissions = async (id: string) => (await events(id, '?type=permission')).map((e) => e.content);
  /** noPending: nothing is left for a person to approve (the approve route finds no pending request). */
  const noPending = async (id: string) => {
    const res = await f.api.post(`/api/sessions/${id}/approve`, { turn_id: 'any', decision: 'allow-once' });
    expect(res.status, JSON.stringify(res.body)).to.equal(409);
  };

  it('deny-all rejects every tool before a person is asked, with the reject option the agent offered', async () => {
    await define({ name: 'denier', permissions: 'deny-all' });
    const s = await create('denier');
    expect(await prompt(s.id, '/ask read Read read a.txt\n/ask edit Write write a.txt')).to.deep.equal(['Read rejected (reject_once)', 'Write rejected (reject_once)']);
    const p = await permissions(s.id);
    expect(p.map((c) => [c.action, c.decision, c.decided_by, c.tool_name])).to.deep.equal([
      ['resolved', 'reject-once', 'permission_mode', 'Read'], ['resolved', 'reject-once', 'permission_mode', 'Write'],
    ]);
    expect(p.filter((c) => c.action === 'request'), 'nobody was asked').to.deep.equal([]);
    await noPending(s.id);
  });

  it('approve-all approves every tool without waiting for a person', async () => {
    await define({ name: 'trusting', permissions: 'approve-all' });
    const s = await create('trusting');
    expect(await prompt(s.id, '/ask edit Write write a.txt\n/ask execute Bash rm -rf build')).to.deep.equal(['Write allowed (allow_once)', 'Bash allowed (allow_once)']);
    const p = await permissions(s.id);
    expect(p.map((c) => [c.action, c.decision, c.decided_by])).to.deep.equal([['resolved', 'allow-once', 'permission_mode'], ['resolved', 'allow-once', 'permission_mode']]);
    await noPending(s.id);
  });

  it('approve-reads (and an agent with no mode) approves the read kinds and asks a person for the rest', async () => {
    for (const [name, permissionsMode] of [['reader', 'approve-reads'], ['plain', undefined]] as const) {
      await define({ name, ...(permissionsMode ? { permissions: permissionsMode } : {}) });
      const s = await create(name);
      const turn = prompt(s.id, '/ask search Grep grep foo\n/ask edit Write write a.txt');
      const request = await eventually(async () => {
        const r = (await permissions(s.id)).find((c) => c.action === 'request');
        expect(r).to.not.equal(undefined);
        return r;
      });
      expect(request).to.include({ tool_name: 'Write', kind: 'edit', title: 'write a.txt' });
      const auto = (await permissions(s.id)).filter((c) => c.action === 'resolved');
      expect(auto.map((c) => [c.tool_name, c.decision, c.decided_by])).to.deep.equal([['Grep', 'allow-once', 'permission_mode']]);
      const ok = await f.api.post(`/api/sessions/${s.id}/approve`, { request_id: request.request_id, decision: 'reject-always' });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
      expect(await turn).to.deep.equal(['Grep allowed (allow_once)', 'Write rejected (reject_always)']);
      const last = (await permissions(s.id)).at(-1);
      expect(last).to.include({ action: 'resolved', decision: 'reject-always', decided_by: 'operator', tool_name: 'Write', kind: 'edit' });
      await noPending(s.id);
    }
  });

  it('deny_tools rejects an agent tool by its name even under approve-all, and leaves its other tools alone', async () => {
    await define({ name: 'no-bash', permissions: 'approve-all', deny_tools: ['agent__bash'] });
    const s = await create('no-bash');
    expect(await prompt(s.id, '/ask execute Bash ls\n/ask edit Write write a.txt')).to.deep.equal(['Bash rejected (reject_once)', 'Write allowed (allow_once)']);
    const p = await permissions(s.id);
    expect(p.map((c) => [c.tool_name, c.decision, c.decided_by])).to.deep.equal([['Bash', 'reject-once', 'agent_deny_tools'], ['Write', 'allow-once', 'permission_mode']]);
    expect(p[0].reason_codes).to.deep.equal(['policy_denied']);
  });

  it('the tool policy\'s tools.deny rejects an agent tool by its name; the workspace file\'s list replaces the global one', async () => {
    writeFileSync(path.join(f.dataDir, 'config.yaml'), 'tools:\n  deny: [agent__write]\n');
    await define({ name: 'policed', permissions: 'approve-all' });
    const s = await create('policed');
    expect(await prompt(s.id, '/ask edit Write write a.txt\n/ask execute Bash ls')).to.deep.equal(['Write rejected (reject_once)', 'Bash allowed (allow_once)']);
    expect((await permissions(s.id)).map((c) => [c.tool_name, c.decided_by])).to.deep.equal([['Write', 'tool_policy'], ['Bash', 'permission_mode']]);
    mkdirSync(path.join(f.root, '.svc'), { recursive: true });
    writeFileSync(path.join(f.root, '.svc', 'config.yaml'), 'tools:\n  deny: [agent__bash]\n');
    expect(await prompt(s.id, '/ask edit Write write a.txt\n/ask execute Bash ls')).to.deep.equal(['Write allowed (allow_once)', 'Bash rejected (reject_once)']);
    await noPending(s.id);
  });

  it('tool events carry the agent\'s tool name and ACP kind, and a result the name of its call', async () => {
    await define({ name: 'namer', permissions: 'approve-all' });
    const s = await create('namer');
    await prompt(s.id, '/ask execute Bash npm test -- --grep foo');
    const calls = await events(s.id, '?type=tool_call');
    expect(calls.map((e) => [e.content.tool_name, e.content.kind, e.content.title])).to.deep.equal([['Bash', 'execute', 'npm test -- --grep foo']]);
    const results = await events(s.id, '?type=tool_result');
    expect(results.map((e) => [e.content.tool_name, e.content.tool_call_id])).to.deep.equal([['Bash', calls[0].content.tool_call_id]]);
    expect(results[0].content.tool_name, 'not the title').to.not.equal('npm test -- --grep foo');
  });

  it('a missing file read through the client answers resource-not-found (-32002), an existing one its content', async () => {
    writeFileSync(path.join(f.root, 'here.txt'), 'hello');
    const s = await create('scripted');
    expect(await prompt(s.id, '/read here.txt\n/read missing.txt')).to.deep.equal(['read: hello', 'read error -32002']);
  });

  it('client_capabilities {fs: false} declines the client file methods; a bad value is 422 naming the field', async () => {
    writeFileSync(path.join(f.root, 'here.txt'), 'hello');
    await define({ name: 'nofs', client_capabilities: { fs: false } });
    const s = await create('nofs');
    expect(await prompt(s.id, '/read here.txt')).to.deep.equal(['read error -32601']);
    const bad = await f.api.post('/api/agents', { scope: 'global', agent: { name: 'badfs', prompt: 'p', provider: 'local', client_capabilities: { fs: 'no' } } });
    expect(bad.status).to.equal(422);
    expect(JSON.stringify(bad.body)).to.include('client_capabilities.fs');
    const names = ((await f.api.get('/api/agents')).body.agents as { name: string }[]).map((a) => a.name);
    expect(names, 'nothing stored').to.include('nofs').and.not.include('badfs');
  });

  it('client_capabilities canonicalizes: both offered is omitted, one declined keeps both flags, unknown keys are refused', () => {
    const spec = (caps: unknown) => decodeSpec('agent', { name: 'a', prompt: 'p', client_capabilities: caps }, { scope: { kind: 'global' } }) as any;
    expect(spec({ fs: true }).spec).not.to.have.property('client_capabilities');
    expect(spec({ fs: { read: true } }).spec).not.to.have.property('client_capabilities');
    expect(spec({ fs: { write: false } }).spec.client_capabilities).to.deep.equal({ fs: { read: true, write: false } });
    expect(spec({ fs: false }).spec.client_capabilities).to.deep.equal({ fs: false });
    for (const [bad, field] of [[{ fs: { exec: true } }, 'client_capabilities.fs.exec'], [{ terminal: true }, 'client_capabilities.terminal'], ['yes', 'client_capabilities'], [{ fs: { read: 'no' } }, 'client_capabilities.fs.read']] as const) {
      const r = spec(bad);
      expect(r.ok, JSON.stringify(bad)).to.equal(false);
      expect(JSON.stringify(r.errors)).to.include(field);
    }
  });
});
