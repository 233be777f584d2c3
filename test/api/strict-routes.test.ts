import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ServiceFixture } from '../helpers/fixture.ts';

/**
 * Each row: a write whose body has a misspelt field, the field path a strict write must name, and how to read the
 * state it would change (equal before and after a refusal).
 */
describe('Routes with a body refuse unknown fields (strict by default, ?field_validation=warn|ignore)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();
  let dir = '';
  beforeEach(() => { dir = mkdtempSync(path.join(os.tmpdir(), 'strict-')); });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const state = async () => JSON.stringify([
    (await f.api.get('/api/workspaces')).body, (await f.api.get('/api/sessions')).body.sessions?.length, (await f.api.get('/api/tasks')).body, (await f.api.get('/api/scheduler')).body,
  ]);
  const task = async () => (await f.api.post('/api/tasks', { title: 'T', scope: 'workspace', workspace: f.ws.id })).body.task;
  const rows = (): { reason: string; call: (q: string) => Promise<{ status: number; body: any; headers: Headers }>; field: string; applied: number[] }[] => [
    { reason: 'POST /api/workspaces', call: (q) => f.api.post(`/api/workspaces${q}`, { root_dir: dir, nmae: 'x' }), field: 'nmae', applied: [201] },
    { reason: 'PATCH /api/workspaces/{id}', call: (q) => f.api.call('PATCH', `/api/workspaces/${f.ws.id}${q}`, { name: 'renamed', defualt_agent: 'x' }, { 'content-type': 'application/merge-patch+json' }), field: 'defualt_agent', applied: [200] },
    { reason: 'POST /api/sessions ({"agent":"esb"} for agent_name)', call: (q) => f.api.post(`/api/sessions${q}`, { workspace: f.ws.id, agent: 'esb' }), field: 'agent', applied: [201] },
    { reason: 'POST /api/tasks', call: (q) => f.api.post(`/api/tasks${q}`, { title: 'A', scope: 'workspace', workspace: f.ws.id, priorty: 'high' }), field: 'priorty', applied: [201] },
    { reason: 'POST /api/scheduler/pause', call: (q) => f.api.post(`/api/scheduler/pause${q}`, { reasn: 'maintenance' }), field: 'reasn', applied: [200] },
  ];

  it('strict: each is 422 naming the unknown field, and nothing changes', async () => {
    for (const r of rows()) {
      const before = await state();
      const res = await r.call('');
      expect(res.status, r.reason).to.equal(422);
      expect(res.body.diagnostic.code, r.reason).to.equal('unknown_field');
      expect(res.body.diagnostic.evidence, r.reason).to.have.property(r.field, 'unknown field');
      expect(await state(), r.reason).to.equal(before);
    }
  });

  it('PATCH /api/tasks/{id}: an unknown field is 422 and the task is unchanged', async () => {
    const t = await task();
    const res = await f.api.call('PATCH', `/api/tasks/${t.id}`, { titel: 'B' }, { 'content-type': 'application/merge-patch+json' });
    expect(res.status).to.equal(422);
    expect(res.body.diagnostic.evidence).to.have.property('titel');
    expect((await f.api.get(`/api/tasks/${t.id}`)).body.task.title).to.equal('T');
  });

  it('warn: each is applied without the field, with a Warning header naming it; ignore: applied silently', async () => {
    for (const r of rows()) {
      const res = await r.call('?field_validation=warn');
      expect(r.applied, `${r.reason} ${JSON.stringify(res.body)}`).to.include(res.status);
      expect(res.headers.get('warning'), r.reason).to.equal(`299 - "unknown field \\"${r.field}\\""`);
    }
    const again = await f.api.post('/api/workspaces?field_validation=ignore', { root_dir: mkdtempSync(path.join(os.tmpdir(), 'strict-')), nmae: 'x' });
    expect(again.status).to.equal(201);
    expect(again.headers.get('warning')).to.equal(null);
    rmSync(again.body.workspace.root_dir, { recursive: true, force: true });
  });
});
