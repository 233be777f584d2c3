import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { Keys, queuePrefix } from '../../store/keys.ts';
import { SessionKeys } from '../../runtime/sessions/keys.ts';
import { TaskKeys } from '../../store/task-store.ts';
import { defineScripts, type ScriptCommands } from '../../store/scripts.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { SlotGuard } from '../helpers/slot-guard.ts';

const slotOf = createRequire(import.meta.url)('cluster-key-slot') as (key: string) => number;
const scriptsDir = fileURLToPath(new URL('../../store/scripts/', import.meta.url));

describe('Redis Cluster key rule: every script, MULTI and multi-key command stays in one hash slot', function () {
  it('every multi-key Lua script names keys of one hash tag in its header (KEYS lines)', () => {
    const rows = readdirSync(scriptsDir).filter((f) => /-(\d+|n)\.lua$/.test(f)).map((file) => {
      const numKeys = /-(\d+|n)\.lua$/.exec(file)![1];
      const header = readFileSync(scriptsDir + file, 'utf8').split(']]')[0];
      const tags = [...header.matchAll(/KEYS\[[^\]]+\][^\n]*?<prefix>(\{[^}]*\})/g)].map((m) => m[1]);
      return { file, multi: numKeys === 'n' || Number(numKeys) > 1, tags: [...new Set(tags)] };
    });
    expect(rows.length).to.be.greaterThan(20);
    for (const r of rows.filter((x) => x.multi)) {
      expect(r.tags.length, `${r.file} names its keys with one hash tag (found ${r.tags.join(', ') || 'none'})`).to.equal(1);
    }
  });

  const table: { reason: string; keys: (k: Keys, s: SessionKeys, t: TaskKeys) => string[] }[] = [
    { reason: 'a put, delete or status write: record, revision, change log, status, indexes, observed, workspaces, reconcile leases',
      keys: (k) => [k.record('agent', 'a'), k.revision, k.changes, k.status('agent', 'a'), k.indexAll, k.indexKind('tool'), k.index('scope', 'workspace', 'w'), k.observed, k.reconciled, k.workspaces, k.workspaceRoots, k.workspaceNames, k.registry('agent'), k.registryRevision('agent'), k.lock('reconciling:agent:a'), k.lock('reconcile-overlaps'), `${k.r}idx:owner:x:y`] },
    { reason: 'one session: its record, events, sequence, lease, permissions, prompt queue',
      keys: (k, s) => [`${k.session('s1')}session`, `${k.session('s1')}events`, `${k.session('s1')}seq`, s.lease('s1'), s.permissions('s1'), s.queue('s1'), s.reap('s1')] },
    { reason: 'the session indexes, tokens, start list and live set', keys: (_k, s) => [s.starts, s.live, s.token('abc'), `${new Keys().sessions}all`] },
    { reason: 'task claims look across tasks, runs and leases of the one `{tasks}` tag', keys: (_k, _s, t) => [t.task('t1'), t.run('r1'), t.queue('q'), t.leases, t.scheduler, t.sessionLease('s'), t.idem('q', 'x')] },
    { reason: 'a BullMQ queue: every key under its prefix', keys: () => [`${queuePrefix('svc:', 'reconcile-agent')}:reconcile-agent:wait`, `${queuePrefix('svc:', 'reconcile-agent')}:reconcile-agent:meta`] },
  ];
  for (const row of table) {
    it(`keeps in one slot: ${row.reason}`, () => {
      const k = new Keys();
      const slots = new Set(row.keys(k, new SessionKeys(k), new TaskKeys()).map(slotOf));
      expect(slots.size).to.equal(1);
    });
  }

  it('spreads what can spread: two sessions, two queues and the resource layer are different slots', () => {
    const k = new Keys();
    const slots = new Set([k.session('s1'), k.session('s2'), queuePrefix('svc:', 'hooks'), queuePrefix('svc:', 'automation'), k.r].map((p) => slotOf(`${p}x`)));
    expect(slots.size).to.equal(5);
  });

  describe('SlotGuard (the run-wide check of make test)', () => {
    const server = new RedisServer();
    let redis: Redis & ScriptCommands;
    let guard: SlotGuard;
    before(async () => { await server.start(); redis = server.client() as Redis & ScriptCommands; defineScripts(); });
    after(async () => { redis.disconnect(); await server.destroy(); });
    beforeEach(() => { guard = new SlotGuard().install(); });
    afterEach(() => guard.uninstall());

    it('records a MULTI, a DEL and a script whose keys span two slots, and passes the same work under one tag', async () => {
      await redis.multi().set('{a}:1', 'x').set('{a}:2', 'y').exec();
      await redis.del('{a}:1', '{a}:2');
      await redis.patchSession('{s:x}:session');
      expect(guard.violations).to.deep.equal([]);
      await redis.multi().set('{a}:1', 'x').set('{b}:1', 'y').exec();
      await redis.del('{a}:1', '{b}:1');
      await redis.appendEvent('{s:one}:events', '{s:two}:seq', '{s:one}:session', '{"a":1}', 'x-');
      expect(guard.violations.map((v) => v.what)).to.deep.equal(['MULTI (set, set)', 'del', 'evalsha ' + guard.violations[2].what.slice(8)]);
      expect(guard.violations[2].keys).to.deep.equal(['{s:one}:events', '{s:two}:seq', '{s:one}:session']);
    });

    it('records a pipeline that would leave one node of a cluster, not one that stays on a tag', async () => {
      await redis.pipeline().get('{r}:a').get('{r}:b').exec();
      expect(guard.violations).to.deep.equal([]);
      await redis.pipeline().get('{s:1}:lease').get('{s:2}:lease').exec();
      expect(guard.violations).to.have.length(1);
      expect(guard.violations[0].what).to.match(/^pipeline/);
    });
  });
});
