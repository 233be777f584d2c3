import { expect } from 'chai';
import path from 'node:path';
import { ProcessCluster } from '../helpers/process.ts';
import { Client, eventually } from '../helpers/service.ts';
import { SseReader } from '../helpers/sse.ts';
import { readUiStream } from '../helpers/ui-stream.ts';

describe('Cluster: 2 api, 2 controller, 2 runtime processes on one Redis, SIGKILL under load', function () {
  this.timeout(240_000);
  const cluster = new ProcessCluster('cluster').install();
  const { redis, root, procs } = cluster;
  const start = (roles: string) => cluster.start(roles);

  it('reconciles every acknowledged write to its version with no overlap, and keeps sessions resumable', async () => {
    const [a1, a2] = [await start('api'), await start('api')];
    const [c1] = [await start('controller'), await start('controller')];
    const [r1] = [await start('runtime'), await start('runtime')];
    const apis = [new Client(a1.url), new Client(a2.url)];
    const ws = (await apis[0].post('/api/workspaces', { root_dir: root })).body.workspace;

    const sessions: { id: string; state: string }[] = [];
    for (let i = 0; i < 6; i++) sessions.push((await apis[i % 2].post('/api/sessions', { workspace: ws.id })).body.session);
    for (const s of sessions) expect(s.state).to.equal('active');
    const admin = redis.client();
    const owners = await Promise.all(sessions.map(async (s) => JSON.parse((await admin.hget(`svc:{s:${s.id}}:session`, 'owner')) ?? '""') as string));
    admin.disconnect();
    const onDead = sessions.filter((_, i) => owners[i].includes(`-${r1.proc!.pid}-`));
    expect(onDead.length, "sessions spread over both runtimes").to.be.greaterThan(0);

    // Writes spread over both APIs, while one controller and one runtime are SIGKILLed.
    const acked = new Map<string, number>();
    let stop = false;
    const writer = async (w: number) => {
      for (let i = 0; !stop; i++) {
        const id = `k${w}-${i % 10}`;
        const res = await apis[i % 2].put(`/api/resources/agent/${id}`, { scope: { kind: 'global' }, spec: { name: id, prompt: `v${i}` }, expected_version: acked.get(id) ?? 0 });
        if (res.status === 200 || res.status === 201) acked.set(id, res.body.record.version);
        else expect(res.status, JSON.stringify(res.body)).to.equal(409);
      }
    };
    const prompter = async () => {
      for (let i = 0; !stop; i++) {
        const s = sessions[i % sessions.length];
        await fetch(`${procs[i % 2].url}/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: `hello ${i}` }) }).then((r) => r.arrayBuffer()).catch(() => undefined);
      }
    };
    const load = [...Array.from({ length: 6 }, (_, w) => writer(w)), prompter()];
    // NOTE: the kills land under load: once every record was written at least once, not after a time.
    await eventually(async () => expect(acked.size).to.equal(60), 60_000, 50);
    await c1.kill('SIGKILL');
    await r1.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 1500));
    stop = true;
    await Promise.all(load);
    expect(acked.size).to.equal(60);

    await eventually(async () => {
      for (const [id, version] of acked) {
        const [rec, status] = await Promise.all([apis[0].get(`/api/resources/agent/${id}`), apis[1].get(`/api/resources/agent/${id}/status`)]);
        expect(rec.body.record.version, id).to.equal(version);
        expect(status.body.status.observed_version, id).to.equal(version);
      }
    }, 90_000, 500);
    const overlaps = Number((await (async () => { const c = redis.client(); const v = await c.get('svc:{r}:lock:reconcile-overlaps'); c.disconnect(); return v; })()) ?? 0);
    expect(overlaps).to.equal(0);

    // Sessions the killed runtime owned end stopped (transport_failure) and resumable; the others stay live.
    await eventually(async () => {
      for (const s of sessions) {
        const now = (await apis[1].get(`/api/sessions/${s.id}`)).body.session;
        if (onDead.includes(s)) expect(now).to.deep.include({ state: 'stopped', stop_reason: 'error' });
        else expect(now.state).to.equal('active');
        if (onDead.includes(s)) expect(now.failure.kind).to.equal('transport_failure');
      }
    }, 60_000, 500);
    for (const s of onDead) expect((await apis[0].post(`/api/sessions/${s.id}/resume`, {})).body.session.state).to.equal('active');
    for (const s of sessions) {
      const turn = await readUiStream(await fetch(`${a1.url}/api/workspaces/${ws.id}/sessions/${s.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'ping' }) }));
      expect(turn.chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta)).to.deep.equal(['ping']);
    }

    // SSE on either API sees every event once, in order.
    const target = sessions[0];
    const last = (await apis[0].get(`/api/sessions/${target.id}/events`)).body.events.at(-1).sequence;
    const streams = await Promise.all([a1, a2].map((a) => new SseReader(`${a.url}/api/workspaces/${ws.id}/sessions/${target.id}/stream`, { 'Last-Event-ID': String(last) }).open()));
    await readUiStream(await fetch(`${a2.url}/api/workspaces/${ws.id}/sessions/${target.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: '/progress 20 5' }) }));
    const want = (await apis[1].get(`/api/sessions/${target.id}/events?after_sequence=${last}`)).body.events.map((e: any) => String(e.sequence));
    for (const sse of streams) {
      await sse.until(want.length);
      sse.close();
      expect(sse.events.map((e) => e.id)).to.deep.equal(want);
    }
  });
});
