import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SessionStore } from '../../store/session-store.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';

/**
 * The operator run routes /api/task-runs/{id}/*, the task.run.pre_claim hook gate, 410 for a gone
 * workspace root and 503 for an unavailable identity lookup, against a real Redis.
 * Every refusal is checked to change nothing.
 */
describe('Operator task-run routes, the pre_claim gate, 410 and 503 (real Redis)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();

  const agent = async (workspace = f.ws.id) => {
    const res = await f.api.post('/api/sessions', { workspace });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const s = res.body.session;
    const headers = { 'X-SVC-Session-ID': s.id, 'X-SVC-Agent': s.agent_name };
    return { id: s.id as string, headers, call: (p: string, body: unknown = {}) => f.api.call('POST', `/api/agent/tasks/${p}`, body, headers) };
  };
  const task = async (body: Record<string, unknown> = {}) => {
    const res = await f.api.post('/api/tasks', { scope: 'workspace', workspace: f.ws.id, title: 't', ...body });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.task;
  };
  /** a task with one queued run */
  const queued = async (body: Record<string, unknown> = {}) => {
    const t = await task(body);
    const res = await f.api.post(`/api/tasks/${t.id}/start`, {});
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return { task: t, run: res.body.run };
  };
  const op = (runId: string, what: string, body: unknown = {}) => f.api.post(`/api/task-runs/${runId}/${what}`, body);
  const runOf = async (taskId: string, runId: string) => (await f.api.get(`/api/tasks/${taskId}/runs`)).body.runs.find((r: any) => r.id === runId);
  const taskOf = async (taskId: string) => (await f.api.get(`/api/tasks/${taskId}`)).body.task;
  const busTypes = async () => (await f.service.bus!.latest(1000)).map((e) => e.type);
  const putHook = async (id: string, spec: Record<string, unknown>) => {
    const res = await f.api.put(`/api/resources/hook.binding/${id}?wait=true`, { scope: { kind: 'global' }, spec: { name: id, ...spec }, expected_version: 0 });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  };

  describe('claim and start', () => {
    it('claim: queued → claimed by the operator (a lease, never a raw token); the run is gone from the queue; post_claim on the bus', async () => {
      const { task: t, run } = await queued();
      const res = await op(run.id, 'claim', {});
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.run).to.include({ id: run.id, status: 'claimed', session_id: '' });
      expect(res.body.run.claimed_by).to.deep.equal({ kind: 'human', ref: 'anonymous' });
      expect(res.body.run.claim_token_hash).to.match(/^sha256:[0-9a-f]{64}$/);
      expect(Date.parse(res.body.run.lease_until) - Date.now()).to.be.within(250_000, 301_000);
      expect(JSON.stringify(res.body)).to.not.include('svc_claim_');
      expect(res.body.task).to.include({ id: t.id, status: 'ready' });
      expect((await (await agent()).call('claim-next')).status).to.equal(204);
      const types = await busTypes();
      expect(types).to.include.members(['task.run.pre_claim', 'task.run_claimed', 'task.run.post_claim']);
      // a second claim of the now-claimed run: 409, nothing changed
      const again = await op(run.id, 'claim', {});
      expect(again.status).to.equal(409);
      expect(again.body.diagnostic.code).to.equal('invalid_transition');
      expect((await runOf(t.id, run.id)).claim_token_hash).to.equal(res.body.run.claim_token_hash);
    });

    it('claim: a repeated idempotency key returns the first result; concurrent claims of one run: exactly one wins', async () => {
      const { run } = await queued();
      const a = await op(run.id, 'claim', { idempotency_key: 'k' });
      const b = await op(run.id, 'claim', { idempotency_key: 'k' });
      expect([a.status, b.status]).to.deep.equal([200, 200]);
      expect(b.body.run.claimed_at).to.equal(a.body.run.claimed_at);
      const { task: t2, run: r2 } = await queued();
      const ag = await agent();
      const all = await Promise.all([...Array.from({ length: 6 }, () => op(r2.id, 'claim', {})), ag.call('claim-next')]);
      const won = all.filter((r) => r.status === 200);
      expect(won, JSON.stringify(all.map((r) => r.status))).to.have.length(1);
      for (const r of all) if (r.status !== 200) expect(r.status).to.be.oneOf([409, 204]);
      expect((await runOf(t2.id, r2.id)).status).to.equal('claimed');
    });

    it('claim refusals change nothing: 404 unknown run, 409 paused task / blocked task / paused scheduler, 400 bad body', async () => {
      expect((await op('run_missing', 'claim', {})).status).to.equal(404);
      const { task: t, run } = await queued();
      expect((await op(run.id, 'claim', { idempotency_key: 5 })).status).to.equal(400);
      await f.api.post(`/api/tasks/${t.id}/pause`, { reason: 'hold' });
      const paused = await op(run.id, 'claim', {});
      expect(paused.status).to.equal(409);
      expect(paused.body.diagnostic.code).to.equal('not_claimable');
      await f.api.post(`/api/tasks/${t.id}/resume`, {});
      const dep = await task({ title: 'dep' });
      await f.api.post(`/api/tasks/${t.id}/dependencies`, { depends_on_task_id: dep.id });
      expect((await op(run.id, 'claim', {})).status).to.equal(409);
      const { task: t2, run: r2 } = await queued();
      await f.api.post('/api/scheduler/pause', { reason: 'maintenance' });
      const sched = await op(r2.id, 'start', {});
      expect(sched.status).to.equal(409);
      expect(sched.body.diagnostic.code).to.equal('scheduler_paused');
      for (const [tid, rid] of [[t.id, run.id], [t2.id, r2.id]]) expect(await runOf(tid, rid)).to.include({ status: 'queued', claim_token_hash: '', session_id: '' });
      expect(await busTypes()).to.not.include('task.run_claimed');
    });

    it('start: claimed → starting (task in_progress), or queued → starting in one step; start of a running/finished run is 409', async () => {
      const { task: t, run } = await queued();
      await op(run.id, 'claim', {});
      const s = await op(run.id, 'start', {});
      expect(s.status, JSON.stringify(s.body)).to.equal(200);
      expect(s.body.run.status).to.equal('starting');
      expect(s.body.task.status).to.equal('in_progress');
      expect((await op(run.id, 'start', {})).status).to.equal(409);
      const { run: r2 } = await queued();
      const direct = await op(r2.id, 'start', {});
      expect(direct.body.run).to.include({ status: 'starting' });
      expect(direct.body.run.claimed_by).to.deep.equal({ kind: 'human', ref: 'anonymous' });
      expect(await busTypes()).to.include.members(['task.run_starting', 'task.run_claimed']);
      await op(run.id, 'complete', {});
      expect((await op(run.id, 'start', {})).status).to.equal(409);
      expect((await runOf(t.id, run.id)).status).to.equal('completed');
    });
  });

  describe('attach-session', () => {
    it('binds a session to a claimed or starting run: running; the session then heartbeats and completes it as its lease', async () => {
      const { task: t, run } = await queued();
      await op(run.id, 'start', {});
      const ag = await agent();
      const res = await op(run.id, 'attach-session', { session_id: ag.id });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.run).to.include({ status: 'running', session_id: ag.id });
      expect(res.body.run.started_at).to.not.equal('');
      expect(res.body.task.status).to.equal('in_progress');
      expect(await busTypes()).to.include.members(['task.run_session_bound', 'task.run_started']);
      // the session holds this lease: claim-next is 409, heartbeat and complete work
      expect((await ag.call('claim-next')).status).to.equal(409);
      expect((await ag.call(`${run.id}/heartbeat`, { lease_seconds: 60 })).status).to.equal(200);
      expect((await ag.call(`${run.id}/complete`, { result: 'ok' })).body.lease.status).to.equal('completed');
      expect((await taskOf(t.id)).status).to.equal('completed');
    });

    it('refusals change nothing: 400 no session_id / other workspace, 404 run or session, 409 attach_locked / queued run / session holds a lease / session not active', async () => {
      const { task: t, run } = await queued();
      const ag = await agent();
      expect((await op(run.id, 'attach-session', {})).status).to.equal(400);
      expect((await op('run_missing', 'attach-session', { session_id: ag.id })).status).to.equal(404);
      expect((await op(run.id, 'attach-session', { session_id: 'sess_missing' })).status).to.equal(404);
      const q = await op(run.id, 'attach-session', { session_id: ag.id });
      expect(q.status).to.equal(409);
      expect(q.body.diagnostic.code).to.equal('invalid_transition');
      expect(await runOf(t.id, run.id)).to.include({ status: 'queued', session_id: '' });

      const root2 = mkdtempSync(path.join(os.tmpdir(), 'svc-tasks-ws2-'));
      try {
        const ws2 = await f.api.post('/api/workspaces', { root_dir: root2 });
        expect(ws2.status, JSON.stringify(ws2.body)).to.equal(201);
        const foreign = await agent(ws2.body.workspace.id);
        await op(run.id, 'claim', {});
        const scope = await op(run.id, 'attach-session', { session_id: foreign.id });
        expect(scope.status).to.equal(400);
        expect(scope.body.diagnostic.code).to.equal('scope_binding');
      } finally {
        rmSync(root2, { recursive: true, force: true });
      }
      // the session already holds a live lease of another run
      const { run: other } = await queued();
      const held = (await ag.call('claim-next')).body.claim;
      expect(held.run.id).to.equal(other.id);
      const busy = await op(run.id, 'attach-session', { session_id: ag.id });
      expect(busy.status).to.equal(409);
      expect(busy.body.diagnostic.code).to.equal('active_lease_held');
      // a run claimed by an agent session is locked to it
      const locked = await op(other.id, 'attach-session', { session_id: (await agent()).id });
      expect(locked.status).to.equal(409);
      expect(locked.body.diagnostic.code).to.equal('attach_locked');
      // a stopped session cannot take a run
      const gone = await agent();
      await f.api.post(`/api/sessions/${gone.id}/stop`, {});
      await eventually(async () => expect((await op(run.id, 'attach-session', { session_id: gone.id })).body.diagnostic.code).to.equal('session_not_active'));
      expect(await runOf(t.id, run.id)).to.include({ status: 'claimed', session_id: '' });
      expect(await busTypes()).to.not.include('task.run_session_bound');
    });
  });

  describe('complete, fail, cancel', () => {
    it('complete ends a leased run with its result; 413 over 64 KiB and 409 for a queued run change nothing', async () => {
      const { task: t, run } = await queued();
      expect((await op(run.id, 'complete', {})).status).to.equal(409);
      await op(run.id, 'claim', {});
      const big = await op(run.id, 'complete', { result: 'x'.repeat(65 * 1024) });
      expect(big.status).to.equal(413);
      expect((await runOf(t.id, run.id)).status).to.equal('claimed');
      const ok = await op(run.id, 'complete', { result: { n: 1 } });
      expect(ok.status).to.equal(200);
      expect(ok.body.run).to.include({ status: 'completed', lease_until: '' });
      expect(ok.body.run.result).to.deep.equal({ n: 1 });
      expect(ok.body.task.status).to.equal('completed');
      expect((await op(run.id, 'complete', {})).status).to.equal(409);
      expect((await op('run_missing', 'complete', {})).status).to.equal(404);
      expect(await busTypes()).to.include.members(['task.run_completed', 'task.run.completed']);
    });

    it('fail needs an error (400), ends a leased run failed and enqueues the retry while attempts remain', async () => {
      const { task: t, run } = await queued({ max_attempts: 2 });
      await op(run.id, 'claim', {});
      const noErr = await op(run.id, 'fail', {});
      expect(noErr.status).to.equal(400);
      expect(noErr.body.diagnostic.evidence).to.have.property('error');
      expect((await runOf(t.id, run.id)).status).to.equal('claimed');
      const res = await op(run.id, 'fail', { error: 'broken', metadata: { note: 'x' } });
      expect(res.status).to.equal(200);
      expect(res.body.run).to.include({ status: 'failed', error: 'broken' });
      expect(res.body.task.status).to.equal('ready');
      const runs = (await f.api.get(`/api/tasks/${t.id}/runs`)).body.runs;
      expect(runs.map((r: any) => [r.status, r.attempt])).to.deep.include.members([['failed', 1], ['queued', 2]]);
      expect((await op(run.id, 'fail', { error: 'again' })).status).to.equal(409);
      expect((await op('run_missing', 'fail', { error: 'x' })).status).to.equal(404);
    });

    it('cancel ends a queued or leased run; a finished run is 409; the lease is released', async () => {
      const { task: t, run } = await queued();
      const c = await op(run.id, 'cancel', { reason: 'not needed' });
      expect(c.status).to.equal(200);
      expect(c.body.run).to.include({ status: 'canceled', error: 'not needed' });
      expect(c.body.task.status).to.equal('canceled');
      expect((await op(run.id, 'cancel', {})).status).to.equal(409);
      expect((await op(run.id, 'cancel', { metadata: [] })).status).to.equal(400);
      const { run: r2 } = await queued();
      const ag = await agent();
      expect((await ag.call('claim-next')).body.claim.run.id).to.equal(r2.id);
      expect((await op(r2.id, 'cancel', {})).body.run.status).to.equal('canceled');
      expect((await f.api.get('/api/scheduler')).body.scheduler.leased).to.equal(0);
      expect((await (await agent()).call('claim-next')).status).to.equal(204);
      expect((await op('run_missing', 'cancel', {})).status).to.equal(404);
      expect((await taskOf(t.id)).status).to.equal('canceled');
    });
  });

  describe('the task.run.pre_claim gate', () => {
    it('a sync deny refuses claim-next and the operator claim/start with 403 hook_denied; nothing is claimed; without it the claim goes through', async () => {
      const { task: t, run } = await queued();
      await putHook('no-claims', { event: 'task.run.pre_claim', mode: 'sync', metadata: { builtin: 'deny', reason: 'frozen' } });
      const ag = await agent();
      const denied = await ag.call('claim-next');
      expect(denied.status).to.equal(403);
      expect(denied.body.diagnostic).to.include({ code: 'hook_denied' });
      expect(denied.body.diagnostic.message).to.include('frozen');
      for (const what of ['claim', 'start']) {
        const r = await op(run.id, what, {});
        expect(r.status, what).to.equal(403);
        expect(r.body.diagnostic.code).to.equal('hook_denied');
      }
      expect(await runOf(t.id, run.id)).to.include({ status: 'queued', session_id: '', claim_token_hash: '' });
      expect(await busTypes()).to.not.include('task.run.post_claim');
      const pre = (await f.service.bus!.latest(1000)).filter((e) => e.type === 'task.run.pre_claim');
      expect(pre.length).to.be.greaterThan(0);
      expect(pre[0].data).to.include({ task_id: t.id, run_id: run.id });
      expect(pre[0].session_id).to.equal(ag.id);
      expect((await f.api.delete('/api/resources/hook.binding/no-claims?wait=true', { expected_version: 1 })).status).to.be.oneOf([200, 204]);
      const ok = await ag.call('claim-next');
      expect(ok.status).to.equal(200);
      expect(ok.body.claim.run.id).to.equal(run.id);
      expect(await busTypes()).to.include('task.run.post_claim');
    });

    it('a deny matched on autonomy.task_id refuses only that task', async () => {
      const a = await queued({ title: 'a', priority: 'low' });
      const b = await queued({ title: 'b', priority: 'urgent' });
      await putHook('not-b', { event: 'task.run.pre_claim', mode: 'sync', matcher: { autonomy: { task_id: b.task.id } }, metadata: { builtin: 'deny', reason: 'b is off' } });
      expect((await op(b.run.id, 'claim', {})).status).to.equal(403);
      expect((await op(a.run.id, 'claim', {})).status).to.equal(200);
      expect((await runOf(b.task.id, b.run.id)).status).to.equal('queued');
    });
  });

  describe('410 workspace root gone, 503 identity lookup unavailable', () => {
    it('410 on claim-next, claim, start and attach-session once the workspace root is gone; nothing changed', async () => {
      const { task: t, run } = await queued();
      const { run: r2 } = await queued();
      await op(r2.id, 'claim', {});
      const ag = await agent();
      rmSync(f.root, { recursive: true, force: true });
      const cn = await ag.call('claim-next');
      expect(cn.status).to.equal(410);
      expect(cn.body.diagnostic.code).to.equal('workspace_root_gone');
      expect((await op(run.id, 'claim', {})).status).to.equal(410);
      expect((await op(run.id, 'start', {})).status).to.equal(410);
      expect((await op(r2.id, 'attach-session', { session_id: ag.id })).status).to.equal(410);
      expect(await runOf(t.id, run.id)).to.include({ status: 'queued', session_id: '' });
      // finishing work is still allowed
      expect((await op(r2.id, 'cancel', {})).status).to.equal(200);
    });

    it('503 identity_lookup_unavailable (with Retry-After) when the session lookup fails', async () => {
      const ag = await agent();
      // NOTE: the identity check reads the session's identity fields (SessionStore.fields), not the whole session.
      const original = SessionStore.prototype.fields;
      SessionStore.prototype.fields = async function () { throw new Error('connection lost'); };
      try {
        const res = await ag.call('claim-next');
        expect(res.status).to.equal(503);
        expect(res.body.diagnostic.code).to.equal('identity_lookup_unavailable');
        expect(res.headers.get('retry-after')).to.equal('1');
      } finally {
        SessionStore.prototype.fields = original;
      }
      expect((await ag.call('claim-next')).status).to.equal(204);
    });
  });
});
