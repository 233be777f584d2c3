import { expect } from 'chai';
import { ChannelSignals } from '../../store/channel-signals.ts';
import { TaskStore } from '../../store/task-store.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { eventually } from '../helpers/service.ts';

/** A wait no signal ends outlasts the test's timeout, so a missing signal fails the test. */
const NEVER = 3_600_000;

describe('ChannelSignals: keyed waits on one pub/sub subscription (real Redis), as the task claim long-poll uses them', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  before(() => redis.start());
  after(() => redis.destroy());

  it('a queue wake names its scopes; `*` wakes every scope; an abort ends a wait that no wake ends', async () => {
    const conn = redis.client();
    const store = new TaskStore(conn);
    const signals = new ChannelSignals(conn, store.keys.wakeChannel);
    const [ws1, ws2, global] = ['workspace:w1', 'workspace:w2', 'global'].map((scope) => signals.listen(scope));
    try {
      for (const w of [ws1, ws2, global]) expect(await w.ready).to.equal(true);
      const woke: string[] = [];
      const wait = (name: string, w: typeof ws1) => w.next(NEVER).then(() => woke.push(name));
      const w2 = wait('w2', ws2);
      await Promise.all([wait('w1', ws1), wait('global', global), store.wake(['workspace:w1', 'global'])]);
      expect(woke.sort(), 'a scope the wake did not name').to.deep.equal(['global', 'w1']);
      await Promise.all([w2, wait('w1', ws1), wait('global', global), store.wake(['*'])]);
      expect(woke.sort()).to.deep.equal(['global', 'global', 'w1', 'w1', 'w2']);

      const abort = new AbortController();
      const aborted = ws1.next(NEVER, abort.signal);
      abort.abort();
      await aborted;
      await ws1.next(NEVER, abort.signal);
    } finally {
      for (const w of [ws1, ws2, global]) w.close();
      signals.stop();
      conn.disconnect();
    }
  });

  it('until reads again at each signal and returns what `done` accepts; an abort returns the last read without reading again', async () => {
    const conn = redis.client();
    const store = new TaskStore(conn);
    const signals = new ChannelSignals(conn, store.keys.wakeChannel);
    try {
      let reads = 0;
      const read = async () => {
        reads++;
        if (reads === 1) setImmediate(() => void store.wake(['global']));
        return reads;
      };
      expect(await signals.until('global', read, (n) => n === 2, { timeoutMs: NEVER, pollMs: NEVER })).to.equal(2);
      expect(reads).to.equal(2);

      reads = 0;
      const abort = new AbortController();
      const ended = signals.until('global', async () => { reads++; setImmediate(() => abort.abort()); return reads; }, () => false, { timeoutMs: NEVER, pollMs: NEVER, signal: abort.signal });
      expect(await ended).to.equal(1);
      expect(reads, 'a read after the abort').to.equal(1);
    } finally {
      signals.stop();
      conn.disconnect();
    }
  });

  it('a wait whose signal was lost while its subscription reconnected reads again once the channel is heard again', async function () {
    // NOTE: without the wake a lost signal holds the wait for its whole time limit (NEVER): the test times out.
    this.timeout(20_000);
    const conn = redis.client();
    const admin = redis.client();
    const signals = new ChannelSignals(conn, 'test:lost-signals');
    try {
      await admin.del('test:state');
      let reads = 0;
      const read = async () => { reads++; return Number((await admin.get('test:state')) ?? 0); };
      const ended = signals.until('k', read, (n) => n === 1, { timeoutMs: NEVER, pollMs: NEVER });
      await eventually(async () => expect(reads).to.equal(1), 10_000, 10);
      // NOTE: the state changes with no signal, as one sent while the subscription was down; the first read was sent
      // on this connection before the write, so it read the state before it.
      await admin.set('test:state', '1');
      expect(await admin.client('KILL', 'TYPE', 'pubsub')).to.equal(1);
      expect(await ended).to.equal(1);
      expect(reads).to.equal(2);
    } finally {
      signals.stop();
      admin.disconnect();
      conn.disconnect();
    }
  });
});
