import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { Keys } from '../../store/keys.ts';
import { LedgerStore } from '../../store/ledger-store.ts';
import { defineScripts, type ScriptCommands } from '../../store/scripts.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { readUiStream } from '../helpers/ui-stream.ts';

describe('Session ledgers over HTTP: written at stop, verified on read, replay, prune, repair (real Redis, scripted agent)', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();
  let redis: Redis & ScriptCommands;
  let store: LedgerStore;
  beforeEach(() => {
    redis = f.redis.client() as Redis & ScriptCommands;
    defineScripts();
    store = new LedgerStore(redis, new Keys());
  });
  afterEach(() => redis.quit());

  const ledgerUrl = (id: string, ws = f.ws.id) => `/api/workspaces/${ws}/memory/sessions/${id}/ledger`;
  const replayUrl = (id: string, ws = f.ws.id) => `/api/workspaces/${ws}/memory/sessions/${id}/replay`;
  const key = (id: string) => `svc:{s:${id}}:ledger`;

  /** stoppedSession runs a real session of the scripted agent through one prompt (a message, a tool call, a message) and stops it. */
  const stoppedSession = async (): Promise<string> => {
    const s = await f.api.post('/api/sessions', { workspace: f.ws.id });
    expect(s.status, JSON.stringify(s.body)).to.equal(201);
    const id = s.body.session.id;
    const res = await fetch(`${f.service.url}/api/workspaces/${f.ws.id}/sessions/${id}/prompt`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'hello\n/tool read {"path":"a.txt"}\nbye' }),
    });
    await readUiStream(res);
    expect((await f.api.post(`/api/sessions/${id}/stop`, {})).status).to.equal(204);
    return id;
  };

  it('writes the ledger when the session stops: every event up to session_stopped, meta from the session, checksum = SHA-256 of the bytes in Redis', async () => {
    const id = await stoppedSession();
    const res = await f.api.get(ledgerUrl(id));
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    const stored = await redis.hget(key(id), 'jsonl');
    expect(res.body.meta).to.include({ version: 1, session_id: id, workspace_id: f.ws.id, root_session_id: id, parent_session_id: '', spawn_depth: 0, path: `${f.ws.id}/${id}/ledger.jsonl` });
    expect(res.body.meta.checksum).to.equal(createHash('sha256').update(stored!).digest('hex'));
    const events = (await f.api.get(`/api/sessions/${id}/events`)).body.events as { sequence: number; type: string; timestamp: string }[];
    expect(res.body.events.map((e: { sequence: number }) => e.sequence)).to.deep.equal(events.map((e) => e.sequence));
    const types = res.body.events.map((e: { event_type: string }) => e.event_type);
    expect(types).to.include.members(['agent_message', 'tool_call', 'tool_result']);
    expect(types.at(-1)).to.equal('session_stopped');
    expect(res.body.meta.stopped_at).to.equal(res.body.events.at(-1).emitted_at);
    const session = (await f.api.get(`/api/sessions/${id}`)).body.session;
    expect(res.body.meta.created_at).to.equal(session.created_at);
  });

  it('replays without tool and memory events unless asked; a non-boolean flag is 400 and an unknown one 422, both memory.validation', async () => {
    const id = await stoppedSession();
    const plain = await f.api.post(replayUrl(id), {});
    expect(plain.status).to.equal(200);
    expect(plain.body.session_id).to.equal(id);
    expect(plain.body.events.map((e: { event_type: string }) => e.event_type).filter((t: string) => t.includes('tool'))).to.deep.equal([]);
    const all = (await f.api.get(ledgerUrl(id))).body.events;
    expect(plain.body.events.length).to.be.below(all.length);
    const tools = await f.api.post(replayUrl(id), { include_tool_events: true });
    expect(tools.body.events).to.deep.equal(all);
    const bad = await f.api.post(replayUrl(id), { include_tool_events: 'yes' });
    expect(bad.status).to.equal(400);
    expect(bad.body).to.deep.include({ code: 'memory.validation', details: { fields: { include_tool_events: 'must be a boolean' } } });
    const unknown = await f.api.post(replayUrl(id), { include_tools: true });
    expect(unknown.status).to.equal(422);
    expect(unknown.body.code).to.equal('memory.validation');
    expect(unknown.body.details).to.have.property('include_tools', 'unknown field');
  });

  it('reports a tampered ledger (bytes changed in Redis) with 409 memory.ledger_corrupt on read and replay, and repair counts it without rewriting it', async () => {
    const id = await stoppedSession();
    const before = (await f.api.get(ledgerUrl(id))).body.meta.checksum;
    const tampered = (await redis.hget(key(id), 'jsonl'))!.replace('hello', 'hellO');
    await redis.hset(key(id), 'jsonl', tampered);
    const res = await f.api.get(ledgerUrl(id));
    expect(res.status).to.equal(409);
    expect(res.body.code).to.equal('memory.ledger_corrupt');
    expect(res.body.details).to.include({ session_id: id, checksum: before, actual_checksum: createHash('sha256').update(tampered).digest('hex') });
    expect(res.body).to.not.have.property('events');
    expect((await f.api.post(replayUrl(id), {})).status).to.equal(409);
    const repair = await f.api.post('/api/memory/sessions/repair', {});
    expect(repair.status).to.equal(200);
    expect(repair.body).to.include({ repaired_ledgers: 0, corrupt_ledgers: 1 });
    expect(repair.body.corrupt_session_ids).to.deep.equal([id]);
    expect(await redis.hget(key(id), 'jsonl')).to.equal(tampered);
  });

  it('writes once: the same bytes again change nothing, different bytes are refused and the ledger stays as written', async () => {
    const id = await stoppedSession();
    const first = await redis.hgetall(key(id));
    const same = { session_id: id, workspace_id: f.ws.id, jsonl: first.jsonl, checksum: first.checksum, stopped_at: first.stopped_at, events: Number(first.events) };
    expect(await store.put(same)).to.equal('unchanged');
    const other = `${first.jsonl}{"type":"session_event","sequence":999,"event_type":"agent_message","content":{"text":"forged"},"timestamp":"${first.stopped_at}"}\n`;
    expect(await store.put({ ...same, jsonl: other, checksum: createHash('sha256').update(other).digest('hex'), events: same.events + 1 })).to.equal('conflict');
    expect(await redis.hgetall(key(id))).to.deep.equal(first);
    // The runtime's writer, run again (a second stop hook, a repair), renders the same bytes.
    expect(await f.service.ledgers!.materialize(id)).to.equal('unchanged');
    const read = await f.api.get(ledgerUrl(id));
    expect(read.status).to.equal(200);
    expect(read.body.meta.checksum).to.equal(first.checksum);
  });

  it('answers 404 memory.not_found for an unknown session, another workspace, and a session that has not stopped', async () => {
    const id = await stoppedSession();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ledger-ws-'));
    const other = await f.api.post('/api/workspaces', { root_dir: dir });
    expect(other.status, JSON.stringify(other.body)).to.equal(201);
    const live = (await f.api.post('/api/sessions', { workspace: f.ws.id })).body.session.id;
    for (const [url, why] of [[ledgerUrl('sess-nope'), 'unknown'], [ledgerUrl(id, other.body.workspace.id), 'other workspace'], [ledgerUrl(live), 'live session']]) {
      const res = await f.api.get(url);
      expect(res.status, why).to.equal(404);
      expect(res.body.code, why).to.equal('memory.not_found');
      expect(res.body.message, why).to.be.a('string');
    }
    expect((await f.api.get(ledgerUrl('x'.repeat(300)))).body.code).to.equal('memory.validation');
    rmSync(dir, { recursive: true, force: true });
  });

  it('prune: older_than_hours must be a positive integer (400 memory.validation; an unknown field 422), nothing pruned; dry_run counts and changes nothing; a pruned ledger is gone and not rebuilt by repair', async () => {
    const id = await stoppedSession();
    for (const body of [{}, { older_than_hours: 0 }, { older_than_hours: -1 }, { older_than_hours: 1.5 }, { older_than_hours: '2' }, { older_than_hours: 1, dry_run: 'no' }, { older_than_hours: 1, olderThan: 2 }]) {
      const res = await f.api.post('/api/memory/sessions/prune', body);
      expect(res.status, JSON.stringify(body)).to.equal('olderThan' in body ? 422 : 400);
      expect(res.body.code, JSON.stringify(body)).to.equal('memory.validation');
    }
    expect((await f.api.get(ledgerUrl(id))).status).to.equal(200);
    // A ledger stopped just now is not older than an hour.
    expect((await f.api.post('/api/memory/sessions/prune', { older_than_hours: 1 })).body).to.deep.equal({ dry_run: false, pruned_sessions: 0, pruned_events: 0 });
    // Its index entry moved three hours back: it is now older than two.
    await redis.zadd('svc:{ledgers}:index', Date.now() - 3 * 3_600_000, id);
    const events = (await f.api.get(ledgerUrl(id))).body.events.length;
    const before = await redis.hgetall(key(id));
    const dry = await f.api.post('/api/memory/sessions/prune', { older_than_hours: 2, dry_run: true });
    expect(dry.body).to.deep.equal({ dry_run: true, pruned_sessions: 1, pruned_events: events });
    expect(await redis.hgetall(key(id))).to.deep.equal(before);
    const wet = await f.api.post('/api/memory/sessions/prune', { older_than_hours: 2 });
    expect(wet.body).to.deep.equal({ dry_run: false, pruned_sessions: 1, pruned_events: events });
    const gone = await f.api.get(ledgerUrl(id));
    expect(gone.status).to.equal(404);
    expect(gone.body.code).to.equal('memory.not_found');
    expect(gone.body.message).to.match(/pruned/);
    expect((await f.api.post('/api/memory/sessions/prune', { older_than_hours: 2 })).body.pruned_sessions).to.equal(0);
    const repair = await f.api.post('/api/memory/sessions/repair', {});
    expect(repair.body).to.include({ repaired_ledgers: 0, corrupt_ledgers: 0 });
    expect((await f.api.get(ledgerUrl(id))).status).to.equal(404);
    expect(await f.service.ledgers!.materialize(id)).to.equal('pruned');
  });

  it('repair builds the ledger a dead runtime did not write (same bytes as the stop hook), re-indexes one written but not indexed, and takes no body', async () => {
    const a = await stoppedSession();
    const b = await stoppedSession();
    const written = await redis.hgetall(key(a));
    await redis.del(key(a));
    await redis.zrem('svc:{ledgers}:index', a, b);
    expect((await f.api.get(ledgerUrl(a))).status).to.equal(404);
    expect((await f.api.call('POST', '/api/memory/sessions/repair', '{"force":true}')).status).to.equal(400);
    const repair = await f.api.post('/api/memory/sessions/repair', {});
    expect(repair.status).to.equal(200);
    expect(repair.body).to.include({ repaired_ledgers: 1, skipped_ledgers: 1, corrupt_ledgers: 0, reindexed_ledgers: 1 });
    expect(Date.parse(repair.body.completed_at)).to.be.closeTo(Date.now(), 60_000);
    expect((await redis.hgetall(key(a))).jsonl).to.equal(written.jsonl);
    expect((await f.api.get(ledgerUrl(a))).body.meta.checksum).to.equal(written.checksum);
    expect(await redis.zscore('svc:{ledgers}:index', b)).to.not.equal(null);
    const again = await f.api.call('POST', '/api/memory/sessions/repair');
    expect(again.body).to.include({ repaired_ledgers: 0, skipped_ledgers: 2, reindexed_ledgers: 0 });
  });
});
