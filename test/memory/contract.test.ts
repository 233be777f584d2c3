import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { sha256 } from '../../runtime/process/auth.ts';
import { ServiceFixture } from '../helpers/fixture.ts';

/** Every memory route answers errors as `{code, message, details}` and nothing else. */
const memoryShape = (res: { status: number; body: any }, why: string) => {
  expect(res.body, why).to.be.an('object');
  expect(Object.keys(res.body).sort(), `${why}: ${JSON.stringify(res.body)}`).to.deep.equal(['code', 'details', 'message']);
  expect(res.body.code, why).to.match(/^memory\./);
};

/** The memory family keeps its contract: one reading of dry_run, notes kept, names checked, one error shape. */
describe('Memory routes keep the contract (real Redis, real HTTP)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();

  /** snapshot is every memory, decision, daily log and ledger key in Redis with its value. */
  const snapshot = async () => {
    const r = f.redis.client();
    try {
      const keys = [...(await r.keys('svc:{mem}*')), ...(await r.keys('svc:{s:*}:ledger')), ...(await r.keys('svc:{ledgers}*'))].sort();
      return JSON.stringify(await Promise.all(keys.map(async (k) => [k, await r.dump(k)])));
    } finally {
      r.disconnect();
    }
  };
  const write = (over: Record<string, unknown> = {}) =>
    f.api.post('/api/memory', { scope: 'workspace', workspace_id: f.ws.id, type: 'project', name: 'build tool', content: 'The project builds with make.', ...over });
  const filenames = async (q = '') => ((await f.api.get(`/api/memory${q}`)).body.memories as { filename: string }[]).map((m) => m.filename).sort();
  /** stoppedLedger stops a fresh session (its ledger is written at stop) and dates the ledger three hours back. */
  const stoppedLedger = async (): Promise<string> => {
    const s = await f.api.post('/api/sessions', { workspace: f.ws.id });
    expect(s.status, JSON.stringify(s.body)).to.equal(201);
    expect((await f.api.post(`/api/sessions/${s.body.session.id}/stop`, {})).status).to.equal(204);
    const r = f.redis.client();
    await r.zadd('svc:{ledgers}:index', Date.now() - 3 * 3_600_000, s.body.session.id);
    r.disconnect();
    return s.body.session.id;
  };

  it('dry_run has one reading on every route that has it: the query as the body, a disagreement 422 naming it, and a dry run changes nothing', async () => {
    const add = await write();
    expect(add.status, JSON.stringify(add.body)).to.equal(200);
    const ledger = await stoppedLedger();
    const ledgerUrl = `/api/workspaces/${f.ws.id}/memory/sessions/${ledger}/ledger`;
    expect((await f.api.get(ledgerUrl)).status).to.equal(200);
    const before = await snapshot();
    const routes: { reason: string; method: string; path: string; body: Record<string, unknown>; dry: (b: any) => void }[] = [
      { reason: 'prune counts what it would remove', method: 'POST', path: '/api/memory/sessions/prune', body: { older_than_hours: 2 }, dry: (b) => expect(b).to.include({ dry_run: true, pruned_sessions: 1 }) },
      { reason: 'a write decides and stores nothing', method: 'POST', path: '/api/memory', body: { scope: 'global', type: 'user', name: 'tone', content: 'Prefers a dry tone.' }, dry: (b) => expect(b).to.include({ dry_run: true, applied: false }) },
      { reason: 'a patch decides and stores nothing', method: 'PATCH', path: '/api/memory/project_build_tool.md', body: { scope: 'workspace', workspace_id: f.ws.id, content: 'Bazel.' }, dry: (b) => expect(b).to.include({ dry_run: true, applied: false }) },
      { reason: 'a promote decides and stores nothing', method: 'POST', path: '/api/memory/promote', body: { filename: 'project_build_tool.md', from: { scope: 'workspace', workspace_id: f.ws.id }, to: { scope: 'global' } }, dry: (b) => expect(b).to.include({ dry_run: true, applied: false }) },
      { reason: 'a revert decides and stores nothing', method: 'POST', path: `/api/memory/decisions/${add.body.decision.id}/revert`, body: {}, dry: (b) => expect(b).to.include({ dry_run: true, reverted: false }) },
    ];
    for (const r of routes) {
      for (const q of ['?dry_run=true', '?dry_run=1']) {
        const res = await f.api.call(r.method, r.path + q, r.body);
        expect(res.status, `${r.reason} (${q}): ${JSON.stringify(res.body)}`).to.equal(200);
        r.dry(res.body);
      }
      const both = await f.api.call(r.method, `${r.path}?dry_run=true`, { ...r.body, dry_run: true });
      expect(both.status, `${r.reason}: the same in both`).to.equal(200);
      r.dry(both.body);
      for (const [q, b] of [['?dry_run=true', false], ['?dry_run=false', true]] as const) {
        const res = await f.api.call(r.method, r.path + q, { ...r.body, dry_run: b });
        expect(res.status, `${r.reason}: query ${q} with body ${b}`).to.equal(422);
        memoryShape(res, r.reason);
        expect(res.body.details.fields).to.have.keys('dry_run');
      }
      const bad = await f.api.call(r.method, `${r.path}?dry_run=maybe`, r.body);
      expect(bad.status, `${r.reason}: dry_run=maybe`).to.equal(400);
      memoryShape(bad, r.reason);
      expect(await snapshot(), `${r.reason}: nothing changed`).to.equal(before);
    }
    const noDry: [string, Record<string, unknown> | undefined][] = [
      ['/api/memory/ad-hoc', { scope: 'global', content: 'A note taken for real.' }],
      ['/api/memory/search', { query_text: 'make' }],
      ['/api/memory/dreams/trigger', { workspace_id: f.ws.id, force: true }],
      ['/api/memory/dreams/dream_x/retry', {}],
      ['/api/memory/sessions/repair', undefined],
    ];
    for (const [p, body] of noDry) {
      const res = await f.api.call('POST', `${p}?dry_run=true`, body);
      expect(res.status, `${p} has no dry run: ${JSON.stringify(res.body)}`).to.equal(422);
      memoryShape(res, p);
      expect(res.body.details.fields).to.have.keys('dry_run');
    }
    expect(await snapshot(), 'a route without a dry run did not act for real').to.equal(before);
    expect((await f.api.get('/api/memory/dreams')).body.dreams).to.deep.equal([]);
    expect((await f.api.get(ledgerUrl)).status, 'the ledger is still there').to.equal(200);
    const wet = await f.api.post('/api/memory/sessions/prune?dry_run=false', { older_than_hours: 2 });
    expect(wet.body).to.include({ dry_run: false, pruned_sessions: 1 });
    expect((await f.api.get(ledgerUrl)).status).to.equal(404);
  });

  it('keeps every ad-hoc note that is not a true duplicate, each in the file its path names; a duplicate is refused with its reason and the existing file', async () => {
    const notes = [
      'Deploys of the api service go out on Tuesdays.',
      'Deploys of the web service go out on Thursdays.',
      'Rollbacks of the api service need a second reviewer.',
      'The api service deploys need a green canary first.',
    ];
    const paths: string[] = [];
    const reasons: string[] = [];
    for (const content of notes) {
      const res = await f.api.post('/api/memory/ad-hoc', { scope: 'workspace', workspace_id: f.ws.id, content });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.accepted, content).to.equal(true);
      paths.push(res.body.path);
      reasons.push(res.body.reason);
    }
    expect(reasons, 'a kept note has no refusal reason').to.deep.equal(notes.map(() => ''));
    expect(new Set(paths).size).to.equal(notes.length);
    expect(await filenames(`?workspace_id=${f.ws.id}`)).to.deep.equal([...paths].sort());
    const before = await snapshot();
    const dup = await f.api.post('/api/memory/ad-hoc', { scope: 'workspace', workspace_id: f.ws.id, content: '  deploys of the API service go out on tuesdays. ' });
    expect(dup.status).to.equal(200);
    expect(dup.body.accepted).to.equal(false);
    expect(dup.body.reason).to.match(/duplicate/);
    expect(dup.body.path, 'names the note that holds the content').to.equal(paths[0]);
    const after = await f.api.get(`/api/memory?workspace_id=${f.ws.id}`);
    expect(after.body.memories.map((m: { filename: string }) => m.filename).sort()).to.deep.equal([...paths].sort());
    expect(JSON.parse(before).filter(([k]: [string]) => k.includes(':m:'))).to.deep.equal(JSON.parse(await snapshot()).filter(([k]: [string]) => k.includes(':m:')));
  });

  it('refuses an agent_name or workspace_id that is not a name, on every route that takes one, with 422 naming the field; nothing is written', async () => {
    await write();
    const before = await snapshot();
    for (const bad of ['..', 'a/b', 'a\\b', '../x', '.hidden', 'a b']) {
      const q = encodeURIComponent(bad);
      const cases: { route: string; call: () => Promise<{ status: number; body: any }>; field: string }[] = [
        { route: 'write', call: () => f.api.post('/api/memory', { scope: 'agent', agent_name: bad, type: 'user', name: 'n', content: 'Some fact.' }), field: 'agent_name' },
        { route: 'write (workspace)', call: () => f.api.post('/api/memory', { scope: 'workspace', workspace_id: bad, type: 'project', name: 'n', content: 'Some fact.' }), field: 'workspace_id' },
        { route: 'ad-hoc', call: () => f.api.post('/api/memory/ad-hoc', { scope: 'agent', agent_name: bad, content: 'Some note.' }), field: 'agent_name' },
        { route: 'patch', call: () => f.api.patch('/api/memory/project_build_tool.md', { scope: 'agent', agent_name: bad, workspace_id: f.ws.id, content: 'x' }), field: 'agent_name' },
        { route: 'promote to', call: () => f.api.post('/api/memory/promote', { filename: 'project_build_tool.md', from: { scope: 'workspace', workspace_id: f.ws.id }, to: { scope: 'agent', agent_name: bad } }), field: 'to.agent_name' },
        { route: 'promote from', call: () => f.api.post('/api/memory/promote', { filename: 'project_build_tool.md', from: { scope: 'agent', agent_name: bad }, to: { scope: 'global' } }), field: 'from.agent_name' },
        { route: 'search', call: () => f.api.post('/api/memory/search', { query_text: 'make', agent_name: bad }), field: 'agent_name' },
        { route: 'search (workspace)', call: () => f.api.post('/api/memory/search', { query_text: 'make', workspace_id: bad }), field: 'workspace_id' },
        { route: 'list (workspace)', call: () => f.api.get(`/api/memory?workspace=${q}`), field: 'workspace_id' },
        { route: 'list', call: () => f.api.get(`/api/memory?agent_name=${q}`), field: 'agent_name' },
        { route: 'list (alias)', call: () => f.api.get(`/api/memory?agent=${q}`), field: 'agent_name' },
        { route: 'daily', call: () => f.api.get(`/api/memory/daily?agent_name=${q}`), field: 'agent_name' },
        { route: 'decisions', call: () => f.api.get(`/api/memory/decisions?agent_name=${q}`), field: 'agent_name' },
        { route: 'dreams', call: () => f.api.get(`/api/memory/dreams?agent=${q}`), field: 'agent_name' },
        { route: 'dream trigger', call: () => f.api.post('/api/memory/dreams/trigger', { scope: 'agent', agent_name: bad, force: true }), field: 'agent_name' },
      ];
      for (const c of cases) {
        const res = await c.call();
        const why = `${c.route} with ${JSON.stringify(bad)}`;
        expect(res.status, `${why}: ${JSON.stringify(res.body)}`).to.equal(422);
        memoryShape(res, why);
        expect(res.body.details.fields, why).to.have.keys(c.field);
      }
    }
    expect(await snapshot()).to.equal(before);
    expect((await f.api.get('/api/memory/dreams')).body.dreams).to.deep.equal([]);
  });

  it('an unknown body field is 422 naming it on every memory route; 405 and its Allow name only what a path takes; errors keep one shape', async () => {
    await write();
    const before = await snapshot();
    const posts: [string, string, Record<string, unknown>][] = [
      ['POST', '/api/memory', { scope: 'global', type: 'user', name: 'n', content: 'Fact.' }],
      ['POST', '/api/memory/ad-hoc', { scope: 'global', content: 'Note.' }],
      ['POST', '/api/memory/search', { query_text: 'make' }],
      ['POST', '/api/memory/promote', { filename: 'project_build_tool.md', from: { scope: 'workspace', workspace_id: f.ws.id }, to: { scope: 'global' } }],
      ['PATCH', '/api/memory/project_build_tool.md', { scope: 'workspace', workspace_id: f.ws.id, content: 'Bazel.' }],
      ['POST', '/api/memory/decisions/dec_x/revert', {}],
      ['POST', '/api/memory/sessions/prune', { older_than_hours: 1 }],
      ['POST', '/api/memory/dreams/trigger', { workspace_id: f.ws.id }],
      ['POST', '/api/memory/dreams/dream_x/retry', {}],
      ['POST', `/api/workspaces/${f.ws.id}/memory/sessions/s-x/replay`, {}],
    ];
    for (const [method, p, body] of posts) {
      const res = await f.api.call(method, p, { ...body, bogus_field: 1 });
      expect(res.status, `${method} ${p}: ${JSON.stringify(res.body)}`).to.equal(422);
      memoryShape(res, p);
      expect(res.body.details, p).to.include({ bogus_field: 'unknown field' });
    }
    expect(await snapshot()).to.equal(before);

    const allowed: [string, string, string][] = [
      ['PUT', '/api/memory/config', 'GET, HEAD'],
      ['PATCH', '/api/memory/config', 'GET, HEAD'],
      ['DELETE', '/api/memory/decisions', 'GET, HEAD'],
      ['GET', '/api/memory/search', 'POST'],
      ['GET', '/api/memory/ad-hoc', 'POST'],
      ['GET', '/api/memory/promote', 'POST'],
      ['DELETE', '/api/memory/dreams/trigger', 'POST'],
      ['POST', '/api/memory/dreams/status', 'GET, HEAD'],
      ['GET', '/api/memory/sessions/prune', 'POST'],
      ['PUT', '/api/memory/project_build_tool.md', 'PATCH'],
      ['DELETE', `/api/workspaces/${f.ws.id}/memory/sessions/s-x/ledger`, 'GET, HEAD'],
    ];
    for (const [method, p, allow] of allowed) {
      const res = await f.api.call(method, p);
      expect(res.status, `${method} ${p}`).to.equal(405);
      memoryShape(res, `${method} ${p}`);
      expect(res.body.code).to.equal('memory.method_not_allowed');
      expect(res.headers.get('allow')?.split(', ').sort(), `${method} ${p}`).to.deep.equal(allow.split(', ').sort());
    }
    const missing = await f.api.get('/api/memory/dreams/nope');
    expect(missing.status).to.equal(404);
    memoryShape(missing, 'an unknown dream path');
    expect(await snapshot()).to.equal(before);
  });

  it('GET /api/memory/config carries every section of the contract, the dream settings in effect among them', async () => {
    const { status, body } = await f.api.get('/api/memory/config');
    expect(status).to.equal(200);
    expect(body.config).to.include.keys('controller', 'daily', 'decisions', 'dream', 'enabled', 'extractor', 'file', 'global_dir', 'provider', 'recall', 'session', 'workspace');
    expect(body.config.dream).to.include({ enabled: true, agent: 'scripted', check_interval: '30m', debounce: '10m', min_hours: 24, min_sessions: 3, prompt_version: 'dream.v1' });
    expect(body.config.dream.gates).to.deep.equal({ min_recall_count: 2, min_score: 0.75, min_unpromoted: 5 });
    expect(body.config.dream.scoring).to.deep.equal({ recency_half_life_days: 14, weights: { frequency: 0.3, relevance: 0.35, recency: 0.2, freshness: 0.15 } });
    expect(body.config.session).to.include({ ledger_format: 'jsonl', unbound_partition: '_unbound' });
    for (const k of ['cold_archive_days', 'hard_delete_days', 'max_archive_bytes']) expect(body.config.session[k], k).to.be.a('number');
    for (const k of ['events_purge_grace', 'ledger_root']) expect(body.config.session[k], k).to.be.a('string');
    expect(body.config.workspace).to.have.keys('auto_create', 'toml_path');
    expect(body.config.workspace.auto_create).to.equal(false);
    expect(body.config.global_dir).to.be.a('string').and.not.equal('');
    expect(body.locked_paths).to.include('dream.min_hours');
  });

  it('an idempotency key keeps the content it was first given: the same content again is 200 with the first decision, other content 409 naming the key and stored nowhere', async () => {
    const first = await write({ idempotency_key: 'k-1' });
    expect(first.status).to.equal(200);
    const again = await write({ idempotency_key: 'k-1' });
    expect(again.status, 'the same key with the same content').to.equal(200);
    expect(again.body).to.include({ applied: false });
    expect(again.body.decision.id).to.equal(first.body.decision.id);
    const before = await snapshot();
    const other = await write({ idempotency_key: 'k-1', content: 'The project builds with bazel.' });
    expect(other.status, JSON.stringify(other.body)).to.equal(409);
    memoryShape(other, 'reused key');
    expect(other.body.code).to.equal('memory.conflict');
    expect(other.body.details).to.include({ idempotency_key: 'k-1', decision_id: first.body.decision.id });
    const dryOther = await write({ idempotency_key: 'k-1', content: 'The project builds with bazel.', dry_run: true });
    expect(dryOther.status, `a dry run answers as the write would: ${JSON.stringify(dryOther.body)}`).to.equal(409);
    const drySame = await write({ idempotency_key: 'k-1', dry_run: true });
    expect(drySame.status).to.equal(200);
    expect(drySame.body.decision.id).to.equal(first.body.decision.id);
    expect(await snapshot(), 'the new content is not stored').to.equal(before);
  });

  it('filters decisions by reason (the words it contains, any case); a reason no decision has lists none', async () => {
    await write();
    await f.api.post('/api/memory/ad-hoc', { scope: 'global', content: 'Prefers tabs.' });
    await f.api.post('/api/memory/ad-hoc', { scope: 'global', content: 'prefers TABS.' });
    const dups = await f.api.get('/api/memory/decisions?reason=DUPLICATE');
    expect(dups.body.decisions.map((d: { op: string; reason: string }) => [d.op, d.reason])).to.deep.equal([['noop', 'exact duplicate memory content']]);
    const all = await f.api.get('/api/memory/decisions');
    expect(all.body.decisions).to.have.length(3);
    expect((await f.api.get('/api/memory/decisions?reason=no-such-reason')).body.decisions).to.deep.equal([]);
  });

  it('an unknown workspace is 404 naming it on every route that takes one, reads as writes, and nothing is written', async () => {
    await write();
    const nowhere = 'ws-nowhere';
    const unknown: [string, () => Promise<{ status: number; body: any }>][] = [
      ['list', () => f.api.get(`/api/memory?workspace_id=${nowhere}`)],
      ['list (alias)', () => f.api.get(`/api/memory?workspace=${nowhere}`)],
      ['daily', () => f.api.get(`/api/memory/daily?workspace_id=${nowhere}`)],
      ['decisions', () => f.api.get(`/api/memory/decisions?workspace_id=${nowhere}`)],
      ['search', () => f.api.post('/api/memory/search', { query_text: 'make', workspace_id: nowhere })],
      ['dreams', () => f.api.get(`/api/memory/dreams?workspace=${nowhere}`)],
      ['dream trigger', () => f.api.post('/api/memory/dreams/trigger', { workspace_id: nowhere, force: true })],
      ['write', () => write({ workspace_id: nowhere })],
      ['ad-hoc', () => f.api.post('/api/memory/ad-hoc', { scope: 'workspace', workspace_id: nowhere, content: 'Note.' })],
      ['patch', () => f.api.patch('/api/memory/project_build_tool.md', { scope: 'workspace', workspace_id: nowhere, content: 'x' })],
      ['promote', () => f.api.post('/api/memory/promote', { filename: 'project_build_tool.md', from: { scope: 'workspace', workspace_id: f.ws.id }, to: { scope: 'workspace', workspace_id: nowhere } })],
    ];
    const settled = await snapshot();
    for (const [route, call] of unknown) {
      const res = await call();
      expect(res.status, `${route}: ${JSON.stringify(res.body)}`).to.equal(404);
      memoryShape(res, route);
      expect(res.body.message, route).to.match(/^workspace ".+" does not exist$/);
    }
    expect(await snapshot()).to.equal(settled);
    expect((await f.api.get('/api/memory/dreams')).body.dreams).to.deep.equal([]);
  });

  it('a 404 names the scope as the user knows it: global, or the workspace id', async () => {
    const gone = await f.api.patch('/api/memory/nothing_here.md', { scope: 'global', content: 'x' });
    expect(gone.status).to.equal(404);
    expect(gone.body.message).to.equal('memory "nothing_here.md" does not exist in global');
    const inWs = await f.api.post('/api/memory/promote', { filename: 'nothing_here.md', from: { scope: 'workspace', workspace_id: f.ws.id }, to: { scope: 'global' } });
    expect(inWs.body.message).to.equal(`memory "nothing_here.md" does not exist in workspace ${f.ws.id}`);
    expect(JSON.stringify([gone.body, inWs.body])).to.not.match(/"[gw]:|\bin g\b/);
  });
});

describe('Memory routes answer authentication and roles in the family shape (AUTH_MODE=token)', function () {
  this.timeout(60_000);
  const TOKENS = { admin: 'a-secret', reader: 'r-secret' } as const;
  const f = new ServiceFixture({
    workspace: false,
    env: ({ dataDir }) => {
      const file = path.join(dataDir, 'tokens.yaml');
      writeFileSync(file, `tokens:\n${Object.entries(TOKENS).map(([role, s]) => `  - {name: ${role}, role: ${role}, sha256: ${sha256(s)}}`).join('\n')}\n`);
      return { AUTH_MODE: 'token', AUTH_TOKENS_FILE: file };
    },
  }).install();

  it('401 without a token and 403 for a reader that writes are {code, message, details}, on the ledger routes under a workspace too', async () => {
    const id = 'ws-any';
    const reader = { Authorization: `Bearer ${TOKENS.reader}` };
    const cases: [string, string, unknown, Record<string, string>, number][] = [
      ['GET', `/api/workspaces/${id}/memory/sessions/s-1/ledger`, undefined, {}, 401],
      ['POST', `/api/workspaces/${id}/memory/sessions/s-1/replay`, {}, {}, 401],
      ['POST', `/api/workspaces/${id}/memory/sessions/s-1/replay`, {}, reader, 403],
      ['GET', '/api/memory', undefined, {}, 401],
      ['POST', '/api/memory/sessions/prune', { older_than_hours: 1 }, reader, 403],
      ['POST', '/api/memory', { scope: 'global', type: 'user', name: 'n', content: 'Fact.' }, reader, 403],
    ];
    for (const [method, p, body, headers, status] of cases) {
      const res = await f.api.call(method, p, body, headers);
      expect(res.status, `${method} ${p}`).to.equal(status);
      memoryShape(res, `${method} ${p}`);
      expect(res.body.code).to.equal(status === 401 ? 'memory.unauthorized' : 'memory.forbidden');
    }
    expect((await f.api.call('GET', '/api/memory', undefined, reader)).body.memories).to.deep.equal([]);
  });
});
