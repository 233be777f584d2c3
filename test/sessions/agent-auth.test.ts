import { expect } from 'chai';
import path from 'node:path';
import { childPids } from '../helpers/agent-processes.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { readUiStream } from '../helpers/ui-stream.ts';

const SCRIPTED = path.resolve('runtime/agents/scripted.ts');
/** agentPids lists the built-in agent's processes this (in-process) service runs. */
const agentPids = () => childPids(process.pid, SCRIPTED);
const API_KEY = 'scripted-key-4d2e81';
const REJECTED_KEY = 'rejected-key-9b7c03';
/** The service's secrets that agent records' `env:` refs resolve (SECRET_ENV_ALLOWLIST defaults to SVC_SECRET_*). */
const SECRETS = { SVC_SECRET_SCRIPTED_KEY: API_KEY, SVC_SECRET_SCRIPTED_REJECTED_KEY: REJECTED_KEY };
/** An agent record running the built-in agent (no command) that advertises the `api-key` ACP auth method. */
const keyed = <T extends { name: string }>(over: T) => ({ prompt: 'p', provider: 'local', env: { SCRIPTED_AUTH_METHODS: 'api-key' }, ...over });

describe('ACP agent authentication (real Redis, real scripted agent processes)', function () {
  this.timeout(120_000);
  const f = new ServiceFixture().install();
  const saved: Record<string, string | undefined> = {};

  before(() => {
    for (const [k, v] of Object.entries(SECRETS)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
  });
  after(() => {
    for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
  });
  afterEach(async () => {
    // NOTE: runs after the fixture's own hook has stopped the service.
    await eventually(async () => expect(agentPids(), 'agent processes left after stop').to.deep.equal([]));
  });

  const define = async (agent: object) => {
    const res = await f.api.post('/api/agents', { scope: 'global', agent });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  };
  const create = async (agent: string) => {
    const res = await f.api.post('/api/sessions', { workspace: f.ws.id, agent_name: agent });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.session;
  };
  const prompt = async (id: string, message: string) => {
    const res = await fetch(`${f.service.url}/api/workspaces/${f.ws.id}/sessions/${id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message }) });
    const { chunks } = await readUiStream(res);
    return chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta as string);
  };
  const events = async (id: string) => (await f.api.get(`/api/sessions/${id}/events`)).body.events as any[];

  it('authenticates a process with the record\'s auth_method before session/new, once for all the sessions it hosts', async () => {
    await define(keyed({ name: 'keyed', auth_method: 'api-key', secret_env: { SCRIPTED_API_KEY: 'env:SVC_SECRET_SCRIPTED_KEY' } }));
    const a = await create('keyed');
    const b = await create('keyed');
    for (const s of [a, b]) expect(s, JSON.stringify(s.failure)).to.include({ state: 'active', badge: 'idle' });
    expect(agentPids()).to.have.length(1);
    expect(await prompt(a.id, '/auth')).to.deep.equal(['authenticated with api-key (1 authenticate calls)']);
    expect(await prompt(b.id, '/auth')).to.deep.equal(['authenticated with api-key (1 authenticate calls)']);
  });

  it('authenticates the new process of a session woken from idle suspension before its session/load', async () => {
    await f.restart({ SESSION_IDLE_SUSPEND: '300ms' });
    await define(keyed({ name: 'keyed', auth_method: 'api-key', secret_env: { SCRIPTED_API_KEY: 'env:SVC_SECRET_SCRIPTED_KEY' } }));
    const s = await create('keyed');
    expect(await prompt(s.id, 'before')).to.deep.equal(['before']);
    const [first] = agentPids();
    await eventually(async () => expect(agentPids()).to.deep.equal([]), 20_000, 100);
    expect(await prompt(s.id, '/auth')).to.deep.equal(['authenticated with api-key (1 authenticate calls)']);
    expect(agentPids()).to.have.length(1).and.not.include(first);
    expect(await prompt(s.id, '/history')).to.deep.equal(['before | /auth']);
    expect((await f.api.get(`/api/sessions/${s.id}`)).body.session).to.include({ state: 'active', acp_session_id: s.acp_session_id });
  });

  const refusals = [
    {
      reason: 'an agent that advertises auth methods needs the record to name one',
      agent: keyed({ name: 'unnamed', secret_env: { SCRIPTED_API_KEY: 'env:SVC_SECRET_SCRIPTED_KEY' } }),
      want: ['requires authentication', 'api-key', 'names no auth_method'],
    },
    {
      reason: 'the named method must be one the agent advertises',
      agent: keyed({ name: 'unknown', auth_method: 'oauth', secret_env: { SCRIPTED_API_KEY: 'env:SVC_SECRET_SCRIPTED_KEY' } }),
      want: ['auth_method "oauth" is not one the agent advertises (api-key)'],
    },
    {
      reason: 'authenticate fails without the credential, and the agent\'s message says why',
      agent: keyed({ name: 'keyless', auth_method: 'api-key' }),
      want: ['authenticate with auth_method "api-key"', 'failed', 'SCRIPTED_API_KEY is not set'],
    },
    {
      reason: 'a refused credential the agent quotes in its message is redacted',
      agent: keyed({ name: 'rejected', auth_method: 'api-key', secret_env: { SCRIPTED_API_KEY: 'env:SVC_SECRET_SCRIPTED_REJECTED_KEY' } }),
      want: ['authenticate with auth_method "api-key"', 'api key [REDACTED] was rejected'],
    },
  ];
  for (const r of refusals) {
    it(`stops the start as error/provider_auth_failure when ${r.reason}; no ACP session is opened`, async () => {
      await define(r.agent);
      const s = await create(r.agent.name);
      expect(s).to.include({ state: 'stopped', stop_reason: 'error', stop_detail: 'agent authentication failed', badge: 'failed', acp_session_id: '' });
      expect(s.failure.kind).to.equal('provider_auth_failure');
      for (const w of r.want) expect(s.failure.summary).to.include(w);
      const all = await events(s.id);
      expect(all.map((e) => e.type)).to.deep.equal(['session_stopped']);
      expect(JSON.stringify(all)).not.to.include(REJECTED_KEY).and.not.to.include(API_KEY);
      await eventually(async () => expect(agentPids()).to.deep.equal([]));
    });
  }
});
