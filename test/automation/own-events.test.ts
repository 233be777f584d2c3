import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { putRecord, runsOf } from './helpers.ts';

describe('Automation triggers do not fire from their own sessions\' events unless they opt in', function () {
  this.timeout(120_000);
  const f = new ServiceFixture().install();
  const ws = () => ({ kind: 'workspace', id: f.ws.id });
  const onTurnEnd = (name: string, extra: Record<string, unknown> = {}) => putRecord(f.api, 'automation.trigger', name, ws(), {
    name, agent_name: 'scripted', enabled: true, event: 'turn.end', prompt: 'after {{ .session_id }}', fire_limit: { max: 3, window: '1h' }, ...extra,
  });
  const ready = (id: string) => eventually(async () => expect((await f.api.get(`/api/resources/automation.trigger/${id}/status`)).body.status.observed_version).to.equal(1));
  const userTurn = async () => {
    const s = (await f.api.post('/api/sessions', { workspace: f.ws.id, agent_name: 'scripted' })).body.session;
    const res = await f.api.post(`/api/workspaces/${f.ws.id}/sessions/${s.id}/prompt`, { message: 'hello' });
    expect(res.status).to.be.oneOf([200, 202]);
    return s.id as string;
  };

  it('a turn.end trigger fires once for a user\'s turn, and its own run\'s turn.end does not fire it again', async () => {
    await onTurnEnd('loop');
    await ready('loop');
    const userSession = await userTurn();
    const [run] = await eventually(async () => {
      const r = await runsOf(f.api, 'triggers', 'loop');
      expect(r.map((x) => x.status)).to.deep.equal(['succeeded']);
      return r;
    }, 30_000, 100);
    const prompts = (await f.api.get(`/api/sessions/${run.session_id}/events?type=user_message`)).body.events;
    expect(prompts.map((e: any) => e.content.text)).to.deep.equal([`after ${userSession}`]);
    expect((await f.api.get(`/api/sessions/${run.session_id}`)).body.session.origin).to.equal('automation.trigger/loop');
    // The run's own turn ended too; give the trigger reader time to see it.
    await new Promise((r) => setTimeout(r, 2000));
    expect(await runsOf(f.api, 'triggers', 'loop')).to.have.length(1);
  });

  it('with include_own_events it fires again from its own runs (bounded by fire_limit), and filters match origin and agent', async () => {
    await onTurnEnd('chain', { include_own_events: true });
    await onTurnEnd('only-user', { filter: { origin: 'user', agent_name: 'scripted' } });
    await ready('chain');
    await ready('only-user');
    await userTurn();
    await eventually(async () => expect((await runsOf(f.api, 'triggers', 'chain')).filter((r) => r.status === 'succeeded').length).to.be.at.least(2), 60_000, 200);
    // `only-user` matches events of sessions a user started, not chain's runs'.
    await new Promise((r) => setTimeout(r, 1000));
    expect((await runsOf(f.api, 'triggers', 'only-user')).length).to.equal(1);
  });
});
