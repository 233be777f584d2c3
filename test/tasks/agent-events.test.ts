import { expect } from 'chai';
import { filterSubject, toDeliveredEvent } from '../../runtime/notifications/delivered-event.ts';
import { evaluateFilter, parseFilter } from '../../codecs/event-filter.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { AgentHttp } from './http.ts';

describe('Task run events name the agent whose session claimed the run, so agent= filters match them', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();

  it('task.run_claimed and task.run_completed carry agent_name; the delivered event carries agent; a preset filter agent=scripted matches', async () => {
    const session = (await f.api.post('/api/sessions', { workspace: f.ws.id, agent_name: 'scripted' })).body.session;
    const t = await f.api.post('/api/tasks', { scope: 'workspace', workspace: f.ws.id, title: 'T', auto_enqueue_on_ready: true });
    expect(t.status, JSON.stringify(t.body)).to.equal(201);
    const agent = new AgentHttp(f.service.url, { 'X-SVC-Session-ID': session.id, 'X-SVC-Agent': 'scripted' });
    try {
      const claim = await agent.post('/api/agent/tasks/claim-next', {});
      expect(claim.status, JSON.stringify(claim.body)).to.equal(200);
      const done = await agent.post(`/api/agent/tasks/${claim.body.claim.run.id ?? claim.body.claim.run.run_id}/complete`, {});
      expect(done.status, JSON.stringify(done.body)).to.be.oneOf([200, 204]);
    } finally {
      agent.close();
    }
    const filter = parseFilter('agent=scripted');
    if (!filter.ok) throw new Error(filter.error);
    const runEvents = await eventually(async () => {
      const evs = (await f.service.bus!.range('', 10_000)).filter((e) => e.type === 'task.run_claimed' || e.type === 'task.run_completed');
      expect(evs.map((e) => e.type)).to.include.members(['task.run_claimed', 'task.run_completed']);
      return evs;
    });
    for (const e of runEvents) {
      expect(e.agent_name, e.type).to.equal('scripted');
      const delivered = toDeliveredEvent(e);
      expect(delivered.agent, e.type).to.equal('scripted');
      expect(evaluateFilter(filter.expr, filterSubject(delivered)), e.type).to.equal(true);
    }
  });
});
