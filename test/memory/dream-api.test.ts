import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { MemoryService } from '../../runtime/memory/memory-service.ts';
import { Keys } from '../../store/keys.ts';
import { MemoryStore, memoryId, partitionKey } from '../../store/memory-store.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';

const FACTS = [
  ['Build tool', 'The project builds with make; make test runs the unit tests.'],
  ['Node versions', 'CI runs Node 20 and Node 24 on every pull request.'],
  ['Redis keys', 'Every Redis key of a family sits under one hash tag so scripts touch one slot.'],
  ['Review habit', 'Reviews ask for a test that fails without the change.'],
  ['Release notes', 'Release notes are written from merged pull request titles.'],
];

describe('Dreams over HTTP: gates, one run per scope, promotion through the decision controller, retry (real Redis, scripted dream agent)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();
  let redis: Redis;
  let memory: MemoryService;
  let store: MemoryStore;
  beforeEach(() => {
    redis = f.redis.client();
    store = new MemoryStore(redis, new Keys());
    memory = new MemoryService({ store });
  });
  afterEach(() => redis.quit());

  const part = () => partitionKey({ scope: 'workspace', workspace_id: f.ws.id, agent_name: '', agent_tier: '' });
  /** recalled writes the facts as workspace memories and records two recalls of each (what search does on a hit). */
  const recalled = async (facts = FACTS) => {
    const ids: string[] = [];
    for (const [name, content] of facts) {
      const { decision, applied } = await memory.write({ scope: 'workspace', workspace_id: f.ws.id, type: 'project', name, content }, { origin: 'http' });
      expect(applied, JSON.stringify(decision)).to.equal(true);
      ids.push(memoryId(part(), decision.target_filename));
    }
    for (let i = 0; i < 2; i++) await store.recordRecall(ids.map((id) => ({ id, score: 0.9 })), new Date().toISOString());
    return ids;
  };
  const trigger = (body: object) => f.api.post('/api/memory/dreams/trigger', body);
  const settled = (id: string) => eventually(async () => {
    const res = await f.api.get(`/api/memory/dreams/${id}`);
    expect(res.body.dream.status, JSON.stringify(res.body)).to.not.equal('running');
    return res.body.dream;
  }, 30_000, 100);
  const busTypes = async () => (await redis.xrange('svc:{bus}:events', '-', '+')).map(([, fields]) => JSON.parse(fields[1]) as { type: string; data: Record<string, unknown> });

  it('is gated without force (min_sessions: no session stopped yet): not triggered, a reason, nothing stored', async () => {
    await recalled();
    const res = await trigger({ workspace_id: f.ws.id });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body).to.include({ triggered: false });
    expect(res.body.reason).to.match(/min_sessions is 3/);
    expect(res.body.dream).to.include({ status: 'idle', scope: 'workspace', workspace_id: f.ws.id, id: '' });
    expect((await f.api.get('/api/memory/dreams')).body.dreams).to.deep.equal([]);
    expect((await busTypes()).filter((e) => e.type.startsWith('memory.dream'))).to.deep.equal([]);
  });

  it('force runs the dream agent and promotes the candidates through the controller (origin dreaming); a second run finds nothing left to promote', async () => {
    const ids = await recalled();
    const res = await trigger({ workspace_id: f.ws.id, force: true });
    expect(res.body.triggered, JSON.stringify(res.body)).to.equal(true);
    expect(res.body.dream.status).to.equal('running');
    expect(Date.parse(res.body.dream.lock_until)).to.be.greaterThan(Date.parse(res.body.dream.started_at));
    const dream = await settled(res.body.dream.id);
    expect(dream, JSON.stringify(dream)).to.include({ status: 'promoted', candidate_count: 5, promoted_count: 5, failure_reason: '' });
    // The synthesis is a memory of the scope, written by the controller with the dream's decision.
    const synth = (await store.partitionMemories(part())).find((m) => m.provenance.source_actor === 'dreaming');
    expect(synth, 'synthesis memory').to.not.equal(undefined);
    expect(dream.artifact_paths).to.deep.equal([synth!.filename]);
    for (const [name] of FACTS) expect(synth!.content).to.include(`- ${name}:`);
    const decision = await store.decision(dream.decision_id);
    expect(decision?.decision).to.include({ origin: 'dreaming', op: 'add' });
    // The dream agent ran as a real session, now stopped (its ledger written).
    const session = (await f.api.get(`/api/sessions/${dream.session_id}`)).body.session;
    expect(session).to.include({ state: 'stopped', agent_name: 'scripted', origin: 'memory.dream' });
    expect((await f.api.get(`/api/workspaces/${f.ws.id}/memory/sessions/${dream.session_id}/ledger`)).status).to.equal(200);
    const events = (await busTypes()).filter((e) => e.type.startsWith('memory.dream')).map((e) => [e.type, e.data.dream_id]);
    expect(events).to.deep.equal([['memory.dream.run.started', dream.id], ['memory.dream.run.promoted', dream.id]]);
    // Every candidate is marked promoted: the next run has none and promotes nothing.
    expect(Object.keys(await redis.hgetall(`svc:{dream:${part()}}:promoted`)).sort()).to.deep.equal([...ids].sort());
    const again = await trigger({ workspace_id: f.ws.id, force: true });
    const second = await settled(again.body.dream.id);
    expect(second).to.include({ status: 'skipped', candidate_count: 0, promoted_count: 0 });
    expect((await store.partitionMemories(part())).length).to.equal(6);
    const list = (await f.api.get(`/api/memory/dreams?workspace=${f.ws.id}`)).body.dreams.map((d: { id: string }) => d.id);
    expect(list).to.deep.equal([second.id, dream.id]);
    expect((await f.api.get('/api/memory/dreams?status=promoted')).body.dreams.map((d: { id: string }) => d.id)).to.deep.equal([dream.id]);
    expect((await f.api.get('/api/memory/dreams/status')).body.dreams.map((d: { id: string }) => d.id)).to.deep.equal([second.id]);
  });

  it('runs one dream per scope: of two triggers at once, one starts and the other names the running run', async () => {
    await recalled();
    const [a, b] = await Promise.all([trigger({ workspace_id: f.ws.id, force: true }), trigger({ workspace_id: f.ws.id, force: true })]);
    const started = [a, b].filter((r) => r.body.triggered);
    const refused = [a, b].filter((r) => !r.body.triggered);
    expect(started.length, JSON.stringify([a.body, b.body])).to.equal(1);
    expect(refused[0].body.reason, JSON.stringify(refused[0].body)).to.match(/already running/);
    expect(refused[0].body.dream.id).to.equal(started[0].body.dream.id);
    await settled(started[0].body.dream.id);
    expect((await f.api.get('/api/memory/dreams')).body.dreams.length).to.equal(1);
  });

  it('passes its gates without force when they are met (MEMORY_DREAM_MIN_SESSIONS=0)', async () => {
    await f.restart({ MEMORY_DREAM_MIN_SESSIONS: '0' });
    await recalled();
    const res = await trigger({ workspace_id: f.ws.id });
    expect(res.body, JSON.stringify(res.body)).to.include({ triggered: true, reason: '' });
    expect((await settled(res.body.dream.id)).status).to.equal('promoted');
    // Its own min_hours gate now holds the scope back.
    const next = await trigger({ workspace_id: f.ws.id });
    expect(next.body.triggered).to.equal(false);
    expect(next.body.reason).to.match(/min_hours is 24/);
  });

  it('a run whose dream agent does not exist fails with its reason; retry runs it again; only a failed run is retried', async () => {
    await f.restart({ MEMORY_DREAM_AGENT: 'ghost' });
    await recalled();
    const res = await trigger({ workspace_id: f.ws.id, force: true });
    const failed = await settled(res.body.dream.id);
    expect(failed.status).to.equal('failed');
    expect(failed.failure_reason).to.match(/ghost/);
    expect((await busTypes()).some((e) => e.type === 'memory.dream.run.failed' && e.data.dream_id === failed.id)).to.equal(true);
    const retry = await f.api.post(`/api/memory/dreams/${failed.id}/retry`, {});
    expect(retry.status, JSON.stringify(retry.body)).to.equal(200);
    expect(retry.body.retried).to.equal(true);
    const second = await settled(retry.body.dream.id);
    expect(second).to.include({ status: 'failed', retry_of: failed.id });
    await f.restart({});
    const ok = await trigger({ workspace_id: f.ws.id, force: true });
    const done = await settled(ok.body.dream.id);
    expect(done.status).to.equal('promoted');
    const refused = await f.api.post(`/api/memory/dreams/${done.id}/retry`, {});
    expect(refused.status).to.equal(409);
    expect(refused.body).to.include({ code: 'memory.conflict' });
  });

  it('refuses bad input with the memory error body and changes nothing; unknown runs are 404; disabled dreams do not trigger', async () => {
    const table = [
      { body: { scope: 'bogus' }, status: 400, field: 'scope' },
      { body: { scope: 'workspace' }, status: 400, field: 'workspace_id' },
      { body: { workspace_id: f.ws.id, force: 'yes' }, status: 400, field: 'force' },
    ];
    for (const { body, status, field } of table) {
      const res = await trigger(body);
      expect(res.status, JSON.stringify(body)).to.equal(status);
      expect(res.body.code).to.equal('memory.validation');
      expect(res.body.details.fields).to.have.property(field);
    }
    const unknown = await trigger({ workspace_id: f.ws.id, forced: true });
    expect(unknown.status).to.equal(422);
    expect(unknown.body).to.include({ code: 'memory.validation' });
    expect((await f.api.get('/api/memory/dreams?status=bogus')).body.code).to.equal('memory.validation');
    const missing = await f.api.get('/api/memory/dreams/dream_nope');
    expect(missing.status).to.equal(404);
    expect(missing.body.code).to.equal('memory.not_found');
    expect((await f.api.post('/api/memory/dreams/dream_nope/retry', {})).status).to.equal(404);
    expect((await f.api.get('/api/memory/dreams')).body.dreams).to.deep.equal([]);
    await f.restart({ MEMORY_DREAM_ENABLED: 'false' });
    const off = await trigger({ workspace_id: f.ws.id, force: true });
    expect(off.body).to.include({ triggered: false });
    expect(off.body.reason).to.match(/disabled/);
    expect((await f.api.get('/api/memory/dreams')).body.dreams).to.deep.equal([]);
  });
});
