import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';

/** An agent session of the fixture workspace and its identity headers (AUTH_MODE=none). */
async function agent(f: ServiceFixture, workspace = f.ws.id) {
  const res = await f.api.post('/api/sessions', { workspace });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  const s = res.body.session;
  const headers = { 'X-SVC-Session-ID': s.id, 'X-SVC-Agent': s.agent_name };
  return {
    id: s.id as string,
    headers,
    call: (path: string, body: unknown = {}) => f.api.call('POST', `/api/agent/tasks/${path}`, body, headers),
  };
}

async function task(f: ServiceFixture, body: Record<string, unknown> = {}) {
  const res = await f.api.post('/api/tasks', { scope: 'workspace', workspace: f.ws.id, title: 't', ...body });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return res.body.task;
}

async function startRun(f: ServiceFixture, id: string, body: Record<string, unknown> = {}) {
  const res = await f.api.post(`/api/tasks/${id}/start`, body);
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return res.body.run;
}

const busTypes = async (f: ServiceFixture) => (await f.service.bus!.latest(500)).map((e) => e.type);

describe('Tasks, runs and leases (real Redis)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();

  describe('tasks', () => {
    it('creates a task ready, a draft as draft; publish works only from draft and enqueues a run', async () => {
      const t = await task(f);
      expect(t).to.include({ status: 'ready', scope: 'workspace', workspace_id: f.ws.id, priority: 'medium', max_attempts: 3, effective_paused: false });
      const d = await task(f, { draft: true });
      expect(d.status).to.equal('draft');
      expect((await f.api.post(`/api/tasks/${d.id}/start`, {})).status).to.equal(409);
      const pub = await f.api.post(`/api/tasks/${d.id}/publish`, {});
      expect(pub.status).to.equal(200);
      expect(pub.body.task.status).to.equal('ready');
      expect(pub.body.run).to.include({ status: 'queued', attempt: 1, task_id: d.id });
      expect((await f.api.post(`/api/tasks/${d.id}/publish`, {})).status).to.equal(409);
      expect((await f.api.get(`/api/tasks/${d.id}/runs`)).body.runs).to.have.length(1);
      expect(await busTypes(f)).to.include.members(['task.created', 'task.published', 'task.run_enqueued']);
    });

    it('publishes a new task\'s events in the order they happened: created, then its run enqueued', async () => {
      const t = await task(f, { auto_enqueue_on_ready: true });
      const mine = (await f.service.bus!.latest(500)).filter((e) => e.data.task_id === t.id && e.source === 'tasks' && !e.type.startsWith('task.run.'));
      expect(mine.map((e) => e.type)).to.deep.equal(['task.created', 'task.run_enqueued']);
    });

    it('refuses bad input with 400 naming the field, and changes nothing', async () => {
      const r1 = await f.api.post('/api/tasks', { scope: 'workspace', title: 'x' });
      expect(r1.status).to.equal(400);
      expect(r1.body.diagnostic.evidence).to.have.property('workspace');
      const r2 = await f.api.post('/api/tasks', { scope: 'global' });
      expect(r2.status).to.equal(400);
      expect(r2.body.diagnostic.evidence).to.have.property('title');
      expect((await f.api.post('/api/tasks', { scope: 'global', title: 'x', priority: 'huge' })).body.diagnostic.evidence).to.have.property('priority');
      expect((await f.api.post('/api/tasks', { scope: 'global', title: 'x', max_attempts: 11 })).status).to.equal(400);
      const t = await task(f);
      const p = await f.api.patch(`/api/tasks/${t.id}`, { scope: 'global' });
      expect(p.status).to.equal(400);
      expect(p.body.diagnostic.code).to.equal('immutable_field');
      expect((await f.api.get('/api/tasks')).body.tasks).to.have.length(1);
      expect((await f.api.get('/api/tasks/nope')).status).to.equal(404);
    });

    it('lists with filters and a cursor; PATCH changes fields', async () => {
      for (let n = 0; n < 5; n++) await task(f, { title: `t${n}`, owner: { kind: 'human', ref: n % 2 ? 'ann' : 'bob' } });
      await task(f, { draft: true });
      const page1 = await f.api.get('/api/tasks?limit=2');
      expect(page1.body.tasks).to.have.length(2);
      const page2 = await f.api.get(`/api/tasks?limit=10&cursor=${page1.body.next_cursor}`);
      expect(page2.body.tasks).to.have.length(4);
      expect((await f.api.get('/api/tasks?status=draft')).body.tasks).to.have.length(1);
      expect((await f.api.get('/api/tasks?owner=ann')).body.tasks).to.have.length(2);
      const t = page1.body.tasks[0];
      const p = await f.api.patch(`/api/tasks/${t.id}`, { title: 'renamed', priority: 'urgent', clear_owner: true });
      expect(p.body.task).to.include({ title: 'renamed', priority: 'urgent', owner: null });
    });

    it('dependencies block a task until the dependency completes; a cycle is 422 and changes nothing', async () => {
      const a = await task(f, { title: 'a' });
      const b = await task(f, { title: 'b' });
      const c = await task(f, { title: 'c' });
      expect((await f.api.post(`/api/tasks/${b.id}/dependencies`, { depends_on_task_id: a.id })).body.task.status).to.equal('blocked');
      expect((await f.api.post(`/api/tasks/${c.id}/dependencies`, { depends_on_task_id: b.id })).body.task.status).to.equal('blocked');
      const cyc = await f.api.post(`/api/tasks/${a.id}/dependencies`, { depends_on_task_id: c.id });
      expect(cyc.status).to.equal(422);
      expect(cyc.body.diagnostic.code).to.equal('dependency_cycle');
      expect((await f.api.post(`/api/tasks/${a.id}/dependencies`, { depends_on_task_id: a.id })).status).to.equal(422);
      expect((await f.api.get(`/api/tasks/${a.id}`)).body.task.depends_on).to.deep.equal([]);
      expect((await f.api.post(`/api/tasks/${a.id}/dependencies`, { depends_on_task_id: 'missing' })).status).to.equal(404);

      // b's run waits (blocked tasks are not claimable); a's run is claimed and completed → b becomes ready.
      await startRun(f, b.id);
      await startRun(f, a.id);
      const ag = await agent(f);
      const claim = await ag.call('claim-next');
      expect(claim.body.claim.task.id).to.equal(a.id);
      expect((await ag.call(`${claim.body.claim.run.id}/complete`, { result: { ok: true } })).status).to.equal(200);
      expect((await f.api.get(`/api/tasks/${a.id}`)).body.task.status).to.equal('completed');
      expect((await f.api.get(`/api/tasks/${b.id}`)).body.task.status).to.equal('ready');
      expect((await f.api.get(`/api/tasks/${c.id}`)).body.task.status).to.equal('blocked');
      expect((await ag.call('claim-next')).body.claim.task.id).to.equal(b.id);
    });

    it('a repeated idempotency key returns the first result and enqueues nothing more', async () => {
      const t = await task(f);
      const r1 = await startRun(f, t.id, { idempotency_key: 'k1' });
      const r2 = await startRun(f, t.id, { idempotency_key: 'k1' });
      expect(r2.id).to.equal(r1.id);
      // another key is another start: refused while the first run is live (one task, one live run)
      const r3 = await f.api.post(`/api/tasks/${t.id}/start`, { idempotency_key: 'k2' });
      expect(r3.status).to.equal(409);
      expect(r3.body.diagnostic.evidence.run_id).to.equal(r1.id);
      expect((await f.api.get(`/api/tasks/${t.id}/runs`)).body.runs).to.have.length(1);
      // concurrent repeats of one key: still one run
      const t2 = await task(f);
      const same = await Promise.all(Array.from({ length: 8 }, () => f.api.post(`/api/tasks/${t2.id}/runs`, { idempotency_key: 'x' })));
      expect(new Set(same.map((r) => r.body.run.id)).size).to.equal(1);
      expect((await f.api.get(`/api/tasks/${t2.id}/runs`)).body.runs).to.have.length(1);
    });

    it('manual approval blocks until approved; reject cancels the waiting run; cancel is sticky', async () => {
      const t = await task(f, { approval_policy: 'manual', auto_enqueue_on_ready: true });
      expect(t.status).to.equal('blocked');
      const ag = await agent(f);
      expect((await ag.call('claim-next')).status).to.equal(204);
      const ap = await f.api.post(`/api/tasks/${t.id}/approve`, {});
      expect(ap.status).to.equal(201);
      expect(ap.body.task.status).to.equal('ready');
      expect((await f.api.post(`/api/tasks/${t.id}/approve`, {})).status).to.equal(409);
      const t2 = await task(f, { approval_policy: 'manual', auto_enqueue_on_ready: true });
      expect((await f.api.post(`/api/tasks/${t2.id}/reject`, {})).body.task.status).to.equal('canceled');
      const c = await f.api.post(`/api/tasks/${t.id}/cancel`, { reason: 'no' });
      expect(c.body.task.status).to.equal('canceled');
      expect((await f.api.post(`/api/tasks/${t.id}/start`, {})).status).to.equal(409);
      expect((await ag.call('claim-next')).status).to.equal(204);
    });
  });

  describe('claim-next, heartbeat, complete, fail, release', () => {
    it('claims atomically, never returns the raw claim token, one lease per session, heartbeat extends, complete ends', async () => {
      const t = await task(f);
      await startRun(f, t.id);
      const ag = await agent(f);
      const res = await ag.call('claim-next', { lease_seconds: 60 });
      expect(res.status).to.equal(200);
      const { claim } = res.body;
      expect(claim.run).to.include({ status: 'claimed', session_id: ag.id });
      expect(claim.lease).to.include({ task_id: t.id, run_id: claim.run.id, status: 'claimed', session_id: ag.id });
      expect(claim.lease.claim_token_hash).to.match(/^sha256:[0-9a-f]{64}$/);
      expect(JSON.stringify(res.body)).to.not.include('svc_claim_');
      expect(Date.parse(claim.lease.lease_until) - Date.now()).to.be.within(50_000, 61_000);
      // a second claim of the same session: 409 even though another run is claimable
      await startRun(f, (await task(f)).id);
      expect((await ag.call('claim-next')).status).to.equal(409);
      const hb = await ag.call(`${claim.run.id}/heartbeat`, { lease_seconds: 600 });
      expect(hb.status).to.equal(200);
      expect(Date.parse(hb.body.lease.lease_until) - Date.now()).to.be.greaterThan(500_000);
      const done = await ag.call(`${claim.run.id}/complete`, { result: { answer: 42 } });
      expect(done.body.lease.status).to.equal('completed');
      expect((await f.api.get(`/api/tasks/${t.id}`)).body.task.status).to.equal('completed');
      expect((await ag.call(`${claim.run.id}/complete`, {})).status).to.equal(409);
      // the lease is gone, so the session may claim again
      expect((await ag.call('claim-next')).status).to.equal(200);
      expect(await busTypes(f)).to.include.members(['task.run_claimed', 'task.run_lease_extended', 'task.run_completed']);
    });

    it('fail retries while attempts remain (retry chain), then the task fails', async () => {
      const t = await task(f, { max_attempts: 2 });
      const first = await startRun(f, t.id);
      const ag = await agent(f);
      const c1 = (await ag.call('claim-next')).body.claim;
      expect((await ag.call(`${c1.run.id}/fail`, {})).status).to.equal(422);
      expect((await ag.call(`${c1.run.id}/fail`, { error: 'boom' })).body.lease.status).to.equal('failed');
      expect((await f.api.get(`/api/tasks/${t.id}`)).body.task.status).to.equal('ready');
      const c2 = (await ag.call('claim-next')).body.claim;
      expect(c2.run).to.include({ attempt: 2, previous_run_id: first.id });
      await ag.call(`${c2.run.id}/fail`, { error: 'boom again' });
      expect((await f.api.get(`/api/tasks/${t.id}`)).body.task.status).to.equal('failed');
      expect((await ag.call('claim-next')).status).to.equal(204);
    });

    it('release puts the run back in the queue with every lease field cleared', async () => {
      const t = await task(f);
      await startRun(f, t.id);
      const a1 = await agent(f);
      const a2 = await agent(f);
      const c = (await a1.call('claim-next')).body.claim;
      expect((await a2.call('claim-next')).status).to.equal(204);
      const rel = await a1.call(`${c.run.id}/release`, { reason: 'busy' });
      expect(rel.body.lease).to.include({ status: 'queued' });
      const run = (await f.api.get(`/api/tasks/${t.id}/runs`)).body.runs[0];
      expect(run).to.include({ status: 'queued', session_id: '', claim_token_hash: '', claimed_at: '', heartbeat_at: '', lease_until: '', error: '' });
      expect(run.claimed_by).to.equal(null);
      expect((await a2.call('claim-next')).body.claim.run.id).to.equal(c.run.id);
    });

    it('orders by priority, then preferred capabilities, then queued_at; filters by required capabilities and priority_min', async () => {
      const low = await task(f, { title: 'low', priority: 'low' });
      const med1 = await task(f, { title: 'med1' });
      const med2 = await task(f, { title: 'med2', preferred_capabilities: ['gpu'] });
      const urgentGpu = await task(f, { title: 'urgent-gpu', priority: 'urgent', required_capabilities: ['gpu'] });
      for (const t of [low, med1, med2, urgentGpu]) await startRun(f, t.id);
      const order: string[] = [];
      const plain = await agent(f);
      const gpu = await agent(f);
      // priority_min above every run a plain agent may take: nothing
      expect((await plain.call('claim-next', { priority_min: 30 })).status).to.equal(204);
      const g1 = (await gpu.call('claim-next', { required_capabilities: ['gpu'] })).body.claim;
      order.push(g1.task.title);
      await gpu.call(`${g1.run.id}/complete`);
      const g2 = (await gpu.call('claim-next', { required_capabilities: ['gpu'] })).body.claim;
      order.push(g2.task.title);
      await gpu.call(`${g2.run.id}/complete`);
      const p1 = (await plain.call('claim-next')).body.claim;
      order.push(p1.task.title);
      await plain.call(`${p1.run.id}/complete`);
      const p2 = (await plain.call('claim-next')).body.claim;
      order.push(p2.task.title);
      expect(order).to.deep.equal(['urgent-gpu', 'med2', 'med1', 'low']);
    });

    it('scope: a workspace claim sees only its workspace tasks; workspace_id null claims global tasks', async () => {
      const g = await f.api.post('/api/tasks', { scope: 'global', title: 'g' });
      await startRun(f, g.body.task.id);
      const ag = await agent(f);
      expect((await ag.call('claim-next')).status).to.equal(204);
      expect((await ag.call('claim-next', { workspace_id: null })).body.claim.task.id).to.equal(g.body.task.id);
    });

    it('a paused task or paused ancestor and a paused scheduler make runs unclaimable', async () => {
      const parent = await task(f, { title: 'parent' });
      const child = (await f.api.post(`/api/tasks/${parent.id}/children`, { scope: 'workspace', workspace: f.ws.id, title: 'child' })).body.task;
      expect(child.parent_task_id).to.equal(parent.id);
      await startRun(f, child.id);
      expect((await f.api.post(`/api/tasks/${parent.id}/pause`, {})).status).to.equal(400);
      await f.api.post(`/api/tasks/${parent.id}/pause`, { reason: 'hold' });
      expect((await f.api.get(`/api/tasks/${child.id}`)).body.task).to.include({ effective_paused: true, paused_by_task_id: parent.id });
      const ag = await agent(f);
      expect((await ag.call('claim-next')).status).to.equal(204);
      await f.api.post(`/api/tasks/${parent.id}/resume`, {});
      expect((await f.api.post('/api/scheduler/pause', { reason: 'maintenance' })).body.scheduler.paused).to.equal(true);
      expect((await ag.call('claim-next')).status).to.equal(204);
      const s = await f.api.get('/api/scheduler');
      expect(s.body.scheduler).to.include({ paused: true, queued: 1, leased: 0 });
      expect((await f.api.get('/api/scheduler/backlog')).body.backlog.map((r: any) => r.task_id)).to.deep.equal([child.id]);
      await f.api.post('/api/scheduler/resume', {});
      expect((await ag.call('claim-next')).body.claim.task.id).to.equal(child.id);
      expect(await busTypes(f)).to.include.members(['task.paused', 'task.resumed', 'task.child_created', 'scheduler.paused', 'scheduler.resumed']);
    });

    it('drain stops new claims and completes when no run is leased', async () => {
      const t = await task(f);
      await startRun(f, t.id);
      await startRun(f, (await task(f)).id);
      const ag = await agent(f);
      const c = (await ag.call('claim-next')).body.claim;
      await f.api.post('/api/scheduler/drain', {});
      const other = await agent(f);
      expect((await other.call('claim-next')).status).to.equal(204);
      await ag.call(`${c.run.id}/complete`);
      await eventually(async () => expect(await busTypes(f)).to.include('scheduler.drain_completed'));
    });

    it('wait:true long-polls and wakes when a run is enqueued; 204 at the deadline', async () => {
      const ag = await agent(f);
      const t0 = Date.now();
      expect((await ag.call('claim-next', { wait: true, wait_seconds: 1 })).status).to.equal(204);
      expect(Date.now() - t0).to.be.greaterThan(900);
      const t = await task(f);
      const pending = ag.call('claim-next', { wait: true, wait_seconds: 30 });
      await new Promise((r) => setTimeout(r, 300));
      await startRun(f, t.id);
      const res = await pending;
      expect(res.status).to.equal(200);
      expect(res.body.claim.task.id).to.equal(t.id);
    });

    it('a long poll whose client hung up claims nothing: a run enqueued afterwards stays queued for the next claimer', async () => {
      const ag = await agent(f);
      const t = await task(f);
      const hangUp = new AbortController();
      const gone = fetch(`${f.service.url}/api/agent/tasks/claim-next`, {
        method: 'POST', headers: { 'content-type': 'application/json', ...ag.headers }, body: JSON.stringify({ wait: true, wait_seconds: 30 }), signal: hangUp.signal,
      }).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 300));
      hangUp.abort();
      await gone;
      await new Promise((r) => setTimeout(r, 300));
      await startRun(f, t.id);
      await new Promise((r) => setTimeout(r, 500));
      expect((await f.api.get(`/api/tasks/${t.id}/runs`)).body.runs.map((r: { status: string }) => r.status)).to.deep.equal(['queued']);
      const next = await (await agent(f)).call('claim-next');
      expect(next.status).to.equal(200);
      expect(next.body.claim.task.id).to.equal(t.id);
    });

    it('an expired lease is requeued by the controller with task.run_lease_expired, and the old holder cannot complete', async () => {
      const t = await task(f);
      await startRun(f, t.id);
      const ag = await agent(f);
      const c = (await ag.call('claim-next', { lease_seconds: 1 })).body.claim;
      await eventually(async () => {
        const run = (await f.api.get(`/api/tasks/${t.id}/runs`)).body.runs[0];
        expect(run.status).to.equal('queued');
      }, 5000);
      expect(await busTypes(f)).to.include('task.run_lease_expired');
      expect((await ag.call(`${c.run.id}/complete`)).status).to.equal(409);
      const again = (await ag.call('claim-next')).body.claim;
      expect(again.run.id).to.equal(c.run.id);
    });
  });

  describe('the error table of the agent task routes', () => {
    it('401 identity required, stale or mismatched; 403 another workspace', async () => {
      const ag = await agent(f);
      expect((await f.api.call('POST', '/api/agent/tasks/claim-next', {})).status).to.equal(401);
      const stale = await f.api.call('POST', '/api/agent/tasks/claim-next', {}, { 'X-SVC-Session-ID': 'sess_missing', 'X-SVC-Agent': 'scripted' });
      expect(stale.status).to.equal(401);
      expect(stale.body.diagnostic.code).to.equal('identity_stale');
      const mism = await f.api.call('POST', '/api/agent/tasks/claim-next', {}, { ...ag.headers, 'X-SVC-Agent': 'other' });
      expect(mism.status).to.equal(401);
      expect(mism.body.diagnostic.code).to.equal('identity_mismatch');
      expect((await f.api.call('POST', '/api/agent/tasks/claim-next', {}, { Authorization: 'Bearer nope' })).status).to.equal(401);
      expect((await ag.call('claim-next', { workspace_id: 'ws_other' })).status).to.equal(403);
      expect((await f.api.call('POST', '/api/agent/tasks/claim-next', {}, { ...ag.headers, 'X-SVC-Workspace-ID': 'ws_other' })).status).to.equal(403);
      await f.api.post(`/api/sessions/${ag.id}/stop`, {});
      await eventually(async () => expect((await ag.call('claim-next')).status).to.equal(401));
    });

    it('422 on bad agent input (lease_seconds < 0 or > 86400, types); 404 unknown run; 409 not the caller\'s lease; 413 result > 64 KiB; 204 nothing claimable', async () => {
      const ag = await agent(f);
      const other = await agent(f);
      expect((await ag.call('claim-next')).status).to.equal(204);
      for (const body of [{ lease_seconds: -1 }, { lease_seconds: 86_401 }, { wait: 'yes' }, { required_capabilities: 'gpu' }]) {
        const r = await ag.call('claim-next', body);
        expect(r.status, JSON.stringify(body)).to.equal(422);
        expect(Object.keys(r.body.diagnostic.evidence)).to.have.length(1);
      }
      const t = await task(f);
      await startRun(f, t.id);
      expect((await ag.call('run_missing/heartbeat')).status).to.equal(404);
      const c = (await ag.call('claim-next', { lease_seconds: 86_400 })).body.claim;
      expect((await other.call(`${c.run.id}/complete`)).status).to.equal(409);
      expect((await other.call(`${c.run.id}/heartbeat`)).status).to.equal(409);
      const big = await ag.call(`${c.run.id}/complete`, { result: 'x'.repeat(65 * 1024) });
      expect(big.status).to.equal(413);
      expect((await f.api.get(`/api/tasks/${t.id}/runs`)).body.runs[0].status).to.equal('claimed');
      expect((await ag.call(`${c.run.id}/heartbeat`, { lease_seconds: -5 })).status).to.equal(422);
    });

    it('operator force: reasons required (422), bulk ≤ 50 (422), retry chain ≤ 10 (422), 10 per minute (429), invalid transition 409', async () => {
      const t = await task(f, { max_attempts: 1 });
      const run = await startRun(f, t.id);
      const ag = await agent(f);
      expect((await f.api.post(`/api/runs/${run.id}/release`, {})).status).to.equal(409);
      await ag.call('claim-next');
      const noReason = await f.api.post(`/api/runs/${run.id}/fail`, {});
      expect(noReason.status).to.equal(422);
      expect(noReason.body.diagnostic.evidence).to.have.property('reason');
      expect((await f.api.get(`/api/tasks/${t.id}/runs`)).body.runs[0].status).to.equal('claimed');
      const forced = await f.api.post(`/api/runs/${run.id}/fail`, { reason: 'stuck' });
      expect(forced.status).to.equal(200);
      expect(forced.body.run).to.include({ status: 'failed', failure_kind: 'operator_forced' });
      expect((await f.api.get(`/api/tasks/${t.id}`)).body.task.status).to.equal('failed');
      expect((await f.api.post('/api/runs/bulk/release', { run_ids: Array.from({ length: 51 }, (_, n) => `r${n}`) })).status).to.equal(422);
      expect((await f.api.post('/api/runs/bulk/fail', { run_ids: ['a'] })).status).to.equal(422);
      const bulk = await f.api.post('/api/runs/bulk/release', { run_ids: [run.id, 'run_missing'] });
      expect(bulk.body.results.map((r: any) => [r.run_id, r.ok, r.status])).to.deep.equal([[run.id, false, 409], ['run_missing', false, 404]].sort((a: any, b: any) => (a[0] < b[0] ? -1 : 1)));
      // attempts are used up (max_attempts 1): a retry is refused and stores nothing
      const spent = await f.api.post(`/api/runs/${run.id}/retry`, {});
      expect(spent.status).to.equal(409);
      expect(spent.body.diagnostic).to.deep.include({ code: 'attempts_exhausted' });
      expect((await f.api.get(`/api/tasks/${t.id}/runs`)).body.runs).to.have.length(1);
      // retry chain: each retry is a new run pointing at the last; the 10th run cannot be retried again
      const long = await task(f, { max_attempts: 10 });
      const first = await startRun(f, long.id);
      expect((await f.api.post(`/api/runs/${first.id}/fail`, { reason: 'stuck' })).status).to.equal(200);
      let last = first.id;
      let code = 0;
      for (let n = 0; n < 10; n++) {
        const r = await f.api.post(`/api/runs/${last}/retry`, {});
        code = r.status;
        if (r.status !== 201) break;
        last = r.body.run.id;
        // NOTE: the chain needs more force operations than the rate limit allows in a minute; reset the window.
        // KEYS reads one node: on a Redis Cluster the counters sit on every master, so ask each one.
        const redis = f.service.tasks!.store.redis as any;
        for (const node of typeof redis.nodes === 'function' ? redis.nodes('master') : [redis]) {
          for (const k of await node.keys('*force:*')) await redis.del(k);
        }
        expect((await f.api.post(`/api/runs/${last}/fail`, { reason: 'again' })).status).to.equal(200);
      }
      expect(code).to.equal(422);
      // rate limit: 10 force operations per minute per actor and task have been used by now → 429
      const t2 = await task(f);
      const r2 = await startRun(f, t2.id);
      const a2 = await agent(f);
      // NOTE: the counter is per fixed minute: the 11 operations start well inside one, so none is granted by a new minute.
      const left = 60_000 - (Date.now() % 60_000);
      if (left < 20_000) await new Promise((r) => setTimeout(r, left + 100));
      let status = 0;
      for (let n = 0; n < 11 && status !== 429; n++) {
        await a2.call('claim-next');
        status = (await f.api.post(`/api/runs/${r2.id}/release`, { reason: 'r' })).status;
      }
      expect(status).to.equal(429);
      expect(await busTypes(f)).to.include.members(['task.run_operator_forced_fail', 'task.run_operator_retry', 'task.run_released']);
    });
  });
});
