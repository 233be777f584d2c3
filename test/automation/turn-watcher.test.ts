import { expect } from 'chai';
import pino from 'pino';
import { TurnWatcher } from '../../runtime/automation/turn-watcher.ts';
import { busEntryType, EventBus, parseBusEntry } from '../../store/event-bus.ts';
import { Keys } from '../../store/keys.ts';
import { defineScripts, type ScriptCommands } from '../../store/scripts.ts';
import { SessionStore } from '../../store/session-store.ts';
import type { StreamEntry } from '../../store/stream-group.ts';
import { testRedis } from '../helpers/redis-cluster.ts';
import type { Redis } from 'ioredis';

/**
 * The pieces a firing's hot path leans on, on a real Redis (a cluster under TEST_REDIS=cluster): the run executor's
 * TurnWatcher registered before its prompt (no log read first), and the bus's cheap type read.
 */
describe('Automation hot path: turn waits from the bus alone, bus entry types', function () {
  this.timeout(60_000);
  const redis = testRedis();
  let conn: Redis & ScriptCommands;
  const keys = new Keys('svc:');
  before(async () => {
    await redis.start();
    conn = redis.client() as Redis & ScriptCommands;
    defineScripts();
  });
  after(async () => {
    conn.disconnect();
    await redis.destroy();
  });

  const turnEnd = (sessionId: string, turnId: string, outcome: 'success' | 'failure' = 'success') =>
    ({ type: 'turn.end', source: 'sessions', session_id: sessionId, outcome, data: { turn_id: turnId, ...(outcome === 'failure' ? { error: 'boom' } : {}) } });

  /**
   * live returns once the watcher's tail reads: it reads from the stream's end ('$'), so a first wait is ended (its
   * end sent until heard) before the waits under test register.
   */
  const live = async (watcher: TurnWatcher, bus: EventBus) => {
    let heard = false;
    const first = watcher.wait('sess-0', 'turn-0', true).then(() => { heard = true; });
    while (!heard) {
      await bus.publish(turnEnd('sess-0', 'turn-0'));
      await Promise.race([first, new Promise((r) => setTimeout(r, 100))]);
    }
  };

  it('a wait registered before its prompt is resolved by its own turn.end from the bus, never by another turn or session, without reading the log', async () => {
    const bus = new EventBus(conn, keys);
    const sessions = new SessionStore(conn, keys);
    let logReads = 0;
    const counting = Object.assign(Object.create(sessions) as SessionStore, {
      events: (...a: Parameters<SessionStore['events']>) => { logReads++; return sessions.events(...a); },
      get: (id: string) => { logReads++; return sessions.get(id); },
    });
    const watcher = new TurnWatcher({ bus, sessions: counting, logger: pino({ level: 'silent' }) });
    await watcher.start();
    try {
      await live(watcher, bus);
      let settled = '';
      const ok = watcher.wait('sess-a', 'turn-1', true).then((o) => { settled ||= 'a'; return o; });
      const failed = watcher.wait('sess-b', 'turn-1', true);
      const stopped = watcher.wait('sess-c', 'turn-1', true);
      await bus.publishMany([
        turnEnd('sess-a', 'turn-0'), turnEnd('sess-x', 'turn-1'), { type: 'turn.start', source: 'sessions', session_id: 'sess-a', data: { turn_id: 'turn-1' } },
      ]);
      await new Promise((r) => setTimeout(r, 300));
      expect(settled, 'another turn, another session, another type').to.equal('');
      await bus.publishMany([
        turnEnd('sess-a', 'turn-1'), turnEnd('sess-b', 'turn-1', 'failure'),
        { type: 'session.post_stop', source: 'sessions', session_id: 'sess-c', data: { stop_reason: 'completed' } },
      ]);
      expect(await ok).to.deep.equal({ ok: true });
      expect(await failed).to.deep.equal({ ok: false, error: 'boom' });
      expect((await stopped).ok).to.equal(false);
      expect(logReads, 'no log read before the poll').to.equal(0);

      // A prompt that could not be sent: cancel ends its wait.
      const cancelled = watcher.wait('sess-d', 'turn-1', true);
      watcher.cancel('sess-d', 'turn-1', 'the prompt was not sent');
      expect(await cancelled).to.deep.equal({ ok: false, error: 'the prompt was not sent' });
    } finally {
      await watcher.stop();
    }
  });

  it('while no turn is awaited the tail reads the busy bus seldom, and a wait registered meanwhile is served by it at once', async () => {
    const bus = new EventBus(conn, keys);
    const sessions = new SessionStore(conn, keys);
    const watcher = new TurnWatcher({ bus, sessions, logger: pino({ level: 'silent' }) });
    // NOTE: XREAD calls counted on every node (a cluster under TEST_REDIS=cluster); only the tail reads with XREAD here.
    const xreads = async () => {
      let n = 0;
      for (const node of 'nodes' in conn ? (conn as unknown as { nodes(role: string): Redis[] }).nodes('master') : [conn]) n += Number(/cmdstat_xread:calls=(\d+)/.exec(await node.info('commandstats'))?.[1] ?? 0);
      return n;
    };
    await watcher.start();
    try {
      await live(watcher, bus);
      const before = await xreads();
      // 40 events 25 ms apart: with a 10 ms pause the tail would read about once per event.
      for (let i = 0; i < 40; i++) {
        await bus.publish({ type: 'resource.applied', source: 'resources', data: { i } });
        await new Promise((r) => setTimeout(r, 25));
      }
      expect(await xreads() - before, 'tail reads while nothing is awaited').to.be.below(15);
      const ok = watcher.wait('sess-a', 'turn-2', true);
      await bus.publish(turnEnd('sess-a', 'turn-2'));
      expect(await ok).to.deep.equal({ ok: true });
    } finally {
      await watcher.stop();
    }
  });

  it('a wait registered after its turn may have ended (a run taken over) reads the log first and finds the end there', async () => {
    const bus = new EventBus(conn, keys);
    const sessions = new SessionStore(conn, keys);
    const id = 'sess-log';
    await sessions.create({ id, workspace_id: 'ws-1', created_at: new Date().toISOString(), state: 'active' });
    const row = { session_id: id, turn_id: 'turn-9', agent_name: 'scripted', workspace_id: 'ws-1', workspace_path: '/tmp', timestamp: new Date().toISOString(), parent_session_id: '', root_session_id: id, spawn_depth: 0 };
    await sessions.append({ ...row, type: 'user_message', content: { text: 'hi' } });
    await sessions.append({ ...row, type: 'done', content: {} });
    const watcher = new TurnWatcher({ bus, sessions, logger: pino({ level: 'silent' }) });
    await watcher.start();
    try {
      expect(await watcher.wait(id, 'turn-9')).to.deep.equal({ ok: true });
    } finally {
      await watcher.stop();
    }
  });

  it('busEntryType reads the type parseBusEntry reads, for stored events and for an entry that does not start with it', async () => {
    const bus = new EventBus(conn, keys);
    const published = await bus.publishMany([
      { type: 'turn.end', source: 'sessions', data: { text: '"type":"x"' } },
      { type: 'automation.run.completed', source: 'automation', summary: 'a "quoted" summary' },
    ]);
    const rows = (await conn.xrange(bus.key, published[0].id, published[1].id)) as StreamEntry[];
    expect(rows.map(busEntryType)).to.deep.equal(['turn.end', 'automation.run.completed']);
    expect(rows.map((r) => parseBusEntry(r).type)).to.deep.equal(rows.map(busEntryType));
    const odd: StreamEntry = ['1-1', ['e', JSON.stringify({ source: 'x', type: 'session.post_stop' })]];
    expect(busEntryType(odd)).to.equal('session.post_stop');
  });
});
