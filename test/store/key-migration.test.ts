import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { legacyKeyName } from '../../store/key-migration.ts';
import { Keys } from '../../store/keys.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { RedisServer } from '../helpers/redis-server.ts';

/** oldName is the name a key had before the hash-tag layout (the inverse of legacyKeyName, for the test's keys). */
function oldName(key: string): string | undefined {
  const rules: [RegExp, (m: RegExpExecArray) => string][] = [
    [/^svc:\{r\}:(.*)$/s, (m) => `svc:${m[1]}`],
    [/^svc:\{s:([^}]+)\}:session$/, (m) => `svc:session:${m[1]}`],
    [/^svc:\{s:([^}]+)\}:(.*)$/, (m) => `svc:session:${m[1]}:${m[2]}`],
    [/^svc:\{sessions\}:all$/, () => 'svc:sessions'],
    [/^svc:\{sessions\}:token:(.*)$/, (m) => `svc:session-token:${m[1]}`],
    [/^svc:\{sessions\}:(.*)$/s, (m) => `svc:sessions:${m[1]}`],
    [/^svc:\{q:([^}]+)\}:[^:]+:(.*)$/s, (m) => `svc:q:${m[1]}:${m[2]}`],
  ];
  for (const [re, to] of rules) { const m = re.exec(key); if (m) return to(m); }
  return undefined;
}

describe('Upgrade from the layout before hash tags: the keys are renamed once at start-up', function () {
  const f = new ServiceFixture({ workspace: false });
  if (f.redis instanceof RedisServer) f.install();
  else return; // NOTE: the old layout only ever ran on one Redis.

  it('keeps records, versions, workspaces, sessions and their events, and the revision, and leaves no untagged key', async () => {
    const ws = (await f.api.post('/api/workspaces', { root_dir: f.root })).body.workspace;
    const put = (v: number, prompt: string) => f.api.put('/api/resources/agent/a1', { scope: { kind: 'global' }, spec: { name: 'a1', prompt }, expected_version: v });
    expect((await put(0, 'one')).status).to.equal(201);
    expect((await put(1, 'two')).status).to.equal(200);
    const session = (await f.api.post('/api/sessions', { workspace: ws.id })).body.session;
    const prompt = await fetch(`${f.service.url}/api/workspaces/${ws.id}/sessions/${session.id}/prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'hello' }) });
    await prompt.text();
    const events = (await f.api.get(`/api/sessions/${session.id}/events`)).body.events;
    expect(events.length).to.be.greaterThan(0);
    const revision = Number(await f.service.store!.revision());
    await f.service.stop();

    // Put the store back in the old layout, checking that the migration maps each old name to the new one.
    const admin = f.redis.client() as Redis;
    let moved = 0;
    for (const key of await admin.keys('svc:*')) {
      if (key === 'svc:{r}:key-layout') { await admin.del(key); continue; }
      // NOTE: a session's memory ledger was born under the session's tag: it has no old name.
      if (/^svc:\{s:[^}]+\}:ledger$/.test(key)) continue;
      const old = oldName(key);
      if (!old) continue;
      expect(legacyKeyName(old, new Keys()), old).to.equal(key);
      await admin.rename(key, old);
      moved++;
    }
    expect(moved).to.be.greaterThan(10);
    expect(await admin.exists('svc:rec:agent:a1')).to.equal(1);

    await f.start();
    expect((await f.api.get('/api/resources/agent/a1')).body.record).to.include({ version: 2 });
    expect((await f.api.get(`/api/workspaces/${ws.id}`)).status).to.equal(200);
    const after = (await f.api.get(`/api/sessions/${session.id}/events`)).body.events;
    expect(after.map((e: { id: string }) => e.id).slice(0, events.length)).to.deep.equal(events.map((e: { id: string }) => e.id));
    expect((await put(2, 'three')).body.record.version).to.equal(3);
    expect(Number(await f.service.store!.revision())).to.equal(revision + 1);
    const untagged = (await admin.keys('svc:*')).filter((k) => !k.startsWith('svc:{'));
    expect(untagged).to.deep.equal([]);
    expect(await admin.get('svc:{r}:key-layout')).to.equal('2');
    admin.disconnect();
  });

  it('maps no key that already has a tag, and drops a dead runtime\'s command stream', () => {
    const k = new Keys();
    expect(legacyKeyName('svc:{bus}:events', k)).to.equal(undefined);
    expect(legacyKeyName('svc:{tasks}:task:t1', k)).to.equal(undefined);
    expect(legacyKeyName('svc:runtime:host-1-abc:cmd', k)).to.equal(null);
    expect(legacyKeyName('other:rec:agent:a', k)).to.equal(undefined);
  });
});
