import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Keys } from '../../store/keys.ts';
import { defineScripts, type ScriptCommands } from '../../store/scripts.ts';
import { SessionIdentities } from '../../store/session-identities.ts';
import { SessionStore, type SessionIdentity } from '../../store/session-store.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { eventually } from '../helpers/service.ts';

describe('SessionIdentities: an agent call\'s session identity, kept until a write announces its change (real Redis)', () => {
  const server = new RedisServer();
  let redis: Redis & ScriptCommands;
  let other: Redis & ScriptCommands;
  /** writer stands for another process: it writes sessions and keeps nothing. */
  let writer: SessionStore;
  let reader: SessionStore;
  const keys = new Keys();

  before(async () => { await server.start(); defineScripts(); });
  after(async () => { await server.destroy(); });
  beforeEach(async () => {
    await server.flush();
    redis = server.client() as Redis & ScriptCommands;
    other = server.client() as Redis & ScriptCommands;
    writer = new SessionStore(other, keys);
    reader = new SessionStore(redis, keys);
    reader.identities = new SessionIdentities<SessionIdentity>(redis, keys.sessionChannel);
    await reader.identities.start();
  });
  afterEach(() => {
    reader.identities?.stop();
    redis.disconnect();
    other.disconnect();
  });

  /** hmgets counts the HMGETs Redis has run (each identity read that was not kept is one). */
  const hmgets = async () => Number(/cmdstat_hmget:calls=(\d+)/.exec(await other.info('commandstats'))?.[1] ?? 0);
  const create = (id: string) => writer.create({ id, state: 'active', token_hash: 'h1', workspace_id: 'ws1', agent_name: 'a1', created_at: new Date().toISOString(), updated_at: '' });

  it('reads an unchanged session once, and a write of another field keeps what it read', async () => {
    await create('s1');
    const before = await hmgets();
    expect(await reader.identity('s1')).to.deep.equal({ id: 's1', state: 'active', token_hash: 'h1', workspace_id: 'ws1', agent_name: 'a1' });
    expect(await reader.identity('s1')).to.include({ state: 'active' });
    expect(await hmgets() - before).to.equal(1);
    await writer.patch('s1', { updated_at: 'later', prompt_active: true });
    await writer.append({ session_id: 's1', type: 'turn.start' } as never, { updated_at: 'later still' });
    expect(await reader.identity('s1')).to.include({ state: 'active' });
    expect(await hmgets() - before, 'no identity field written: nothing announced').to.equal(1);
  });

  it('sees at once another client\'s stop (patch), its resume with a new token (an event\'s patch) and its delete', async () => {
    await create('s1');
    await reader.identity('s1');
    await writer.patch('s1', { state: 'stopped', token_hash: '' });
    await eventually(async () => expect(await reader.identity('s1')).to.include({ state: 'stopped', token_hash: '' }), 2000, 5);
    await writer.append({ session_id: 's1', type: 'session.resumed' } as never, { state: 'active', token_hash: 'h2' });
    await eventually(async () => expect(await reader.identity('s1')).to.include({ state: 'active', token_hash: 'h2' }), 2000, 5);
    await writer.delete('s1', 'ws1');
    await eventually(async () => expect(await reader.identity('s1')).to.equal(undefined), 2000, 5);
  });

  it('never keeps a miss: a session created after a read of its id is found (a create announces nothing)', async () => {
    expect(await reader.identity('s2')).to.equal(undefined);
    await create('s2');
    expect(await reader.identity('s2')).to.include({ state: 'active' });
  });

  it('trusts nothing it read before its subscription dropped: an unannounced write made meanwhile is read', async () => {
    await create('s1');
    await reader.identity('s1');
    // NOTE: a write whose message is lost (it stands for one sent while the subscription was down).
    await other.hset(writer.key('s1'), 'state', JSON.stringify('stopped'));
    expect(await reader.identity('s1'), 'still trusted: no message came').to.include({ state: 'active' });
    await other.client('KILL', 'TYPE', 'pubsub');
    await eventually(async () => expect(await reader.identity('s1')).to.include({ state: 'stopped' }), 5000, 10);
  });

  it('reads every time when the subscription cannot listen (no generation to trust)', async () => {
    await create('s1');
    reader.identities!.stop();
    const before = await hmgets();
    await reader.identity('s1');
    await reader.identity('s1');
    expect(await hmgets() - before).to.equal(2);
  });
});
