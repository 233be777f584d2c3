import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eventually } from '../helpers/service.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { readUiStream } from '../helpers/ui-stream.ts';

describe('Conformance: sessions and workspaces as the spec says', function () {
  this.timeout(90_000);
  const f = new ServiceFixture().install();

  const create = async () => (await f.api.post('/api/sessions', { workspace: f.ws.id })).body.session;
  // NOTE: asks for JSON as svcctl and curl --json do: a prompt to a busy session then answers 202, not its turn's stream.
  const prompt = (id: string, message: string) => fetch(`${f.service.url}/api/workspaces/${f.ws.id}/sessions/${id}/prompt`, {
    method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify({ message }),
  });
  const queuedMarkers = async (id: string) => ((await f.api.get(`/api/sessions/${id}/events?type=transcript_marker.created`)).body.events as any[])
    .filter((e) => e.content.kind === 'transcript_marker.prompt_queued').length;

  it('deleting a workspace stops its live sessions first (user_canceled, "workspace deleted")', async () => {
    const [a, b] = [await create(), await create()];
    expect((await f.api.delete(`/api/workspaces/${f.ws.id}`)).status).to.equal(204);
    for (const s of [a, b]) {
      const now = (await f.api.get(`/api/sessions/${s.id}`)).body.session;
      expect(now).to.include({ state: 'stopped', stop_reason: 'user_canceled', stop_detail: 'workspace deleted' });
    }
    expect((await f.api.get(`/api/workspaces/${f.ws.id}`)).status).to.equal(404);
  });

  it('refuses the 11th queued prompt and queued text over 64 KiB with 413, queueing nothing more', async () => {
    const s = await create();
    const running = prompt(s.id, '/sleep 30000');
    await eventually(async () => expect((await f.api.get(`/api/sessions/${s.id}`)).body.session.badge).to.equal('running'));
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) statuses.push((await prompt(s.id, `queued ${i}`)).status);
    expect(statuses).to.deep.equal([...Array(10).fill(202), 413, 413]);
    const big = await prompt(s.id, 'x'.repeat(70_000));
    expect(big.status).to.equal(413);
    await eventually(async () => expect(await queuedMarkers(s.id)).to.equal(10));
    // A cancel empties the queue: the next queued prompt is accepted again.
    expect((await f.api.post(`/api/workspaces/${f.ws.id}/sessions/${s.id}/prompt/cancel`, {})).status).to.be.below(300);
    await readUiStream(await running);
    const next = prompt(s.id, '/sleep 30000');
    await eventually(async () => expect((await f.api.get(`/api/sessions/${s.id}`)).body.session.badge).to.equal('running'));
    expect((await prompt(s.id, 'after the cancel')).status).to.equal(202);
    await f.api.post(`/api/workspaces/${f.ws.id}/sessions/${s.id}/prompt/cancel`, {});
    await readUiStream(await next);
  });

  it('a queued prompt that runs gives its place back', async () => {
    const s = await create();
    const first = prompt(s.id, '/sleep 3000');
    await eventually(async () => expect((await f.api.get(`/api/sessions/${s.id}`)).body.session.badge).to.equal('running'));
    for (let i = 0; i < 10; i++) expect((await prompt(s.id, `q${i}`)).status).to.equal(202);
    await readUiStream(await first);
    // NOTE: all 11 turns done (the session is briefly idle between queued turns, too).
    await eventually(async () => expect((await f.api.get(`/api/sessions/${s.id}/events?type=done`)).body.events).to.have.length(11));
    const again = prompt(s.id, '/sleep 30000');
    await eventually(async () => expect((await f.api.get(`/api/sessions/${s.id}`)).body.session.badge).to.equal('running'));
    expect((await prompt(s.id, 'fits again')).status).to.equal(202);
    await f.api.post(`/api/workspaces/${f.ws.id}/sessions/${s.id}/prompt/cancel`, {});
    await readUiStream(await again);
  });

  it('a prompt or cancel to a session that is not active is 400, like approve', async () => {
    const s = await create();
    await f.api.post(`/api/workspaces/${f.ws.id}/sessions/${s.id}/stop`, {});
    const table: [string, unknown][] = [
      [`/api/workspaces/${f.ws.id}/sessions/${s.id}/prompt`, { message: 'hi' }],
      [`/api/workspaces/${f.ws.id}/sessions/${s.id}/prompt/cancel`, {}],
      [`/api/workspaces/${f.ws.id}/sessions/${s.id}/approve`, { decision: 'allow-once', request_id: 'perm-x' }],
    ];
    for (const [p, body] of table) {
      const res = await f.api.post(p, body);
      expect(res.status, p).to.equal(400);
      expect(res.body.diagnostic.code, p).to.equal('session_not_active');
    }
  });

  it('PATCH refuses root_dir, unknown fields and a default_agent that does not exist, changing nothing', async () => {
    const table: { reason: string; body: object; field: string }[] = [
      { reason: 'root_dir cannot change', body: { root_dir: '/tmp' }, field: 'root_dir' },
      { reason: 'an unknown field', body: { colour: 'blue' }, field: 'colour' },
      { reason: 'a default_agent nobody defines', body: { default_agent: 'ghost' }, field: 'default_agent' },
    ];
    for (const t of table) {
      const res = await f.api.patch(`/api/workspaces/${f.ws.id}`, { name: 'renamed', ...t.body });
      expect(res.status, t.reason).to.equal(422);
      expect(res.body.diagnostic.evidence, t.reason).to.have.property(t.field);
    }
    expect((await f.api.get(`/api/workspaces/${f.ws.id}`)).body.workspace).to.deep.equal(f.ws);
    const other = mkdtempSync(path.join(os.tmpdir(), 'svc-conf-other-'));
    const created = await f.api.post('/api/workspaces', { root_dir: other, default_agent: 'ghost' });
    rmSync(other, { recursive: true, force: true });
    expect(created.status).to.equal(422);
    expect(created.body.diagnostic.evidence).to.have.property('default_agent');
    const ok = await f.api.patch(`/api/workspaces/${f.ws.id}`, { default_agent: 'scripted' });
    expect(ok.status).to.equal(200);
    expect(ok.body.workspace.default_agent).to.equal('scripted');
  });

  it('resumable=true lists stopped sessions and active ones open to an explicit attach', async () => {
    const live = await create();
    const stopped = await create();
    await f.api.post(`/api/workspaces/${f.ws.id}/sessions/${stopped.id}/stop`, {});
    const ids = (await f.api.get('/api/sessions?resumable=true')).body.sessions.map((s: any) => s.id).sort();
    expect(ids).to.deep.equal([live.id, stopped.id].sort());
  });
});
