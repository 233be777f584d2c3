import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';

describe('Conformance: the same bad query is refused the same way on every path', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();

  it('refuses an unknown kind with 422 for a watch as for a list, and opens no stream', async () => {
    for (const q of ['kind=bogus', 'kind=bogus&watch=true']) {
      const res = await f.api.get(`/api/resources?${q}`);
      expect(res.status, q).to.equal(422);
      expect(res.headers.get('content-type')).to.match(/json/);
      expect(res.body.diagnostic.code).to.equal('unknown_kind');
    }
    expect((await f.api.get('/api/resources/bogus?watch=true')).status).to.equal(422);
  });

  it('refuses a for_agent that leaves .svc/agents with 400, with or without a workspace', async () => {
    const ws = f.ws;
    for (const q of ['for_agent=a/b', `for_agent=a/b&workspace=${ws.id}`, 'agent_name=..', `agent_name=..&workspace=${ws.id}`]) {
      const res = await f.api.get(`/api/skills?${q}`);
      expect(res.status, q).to.equal(400);
      expect(res.body.diagnostic.code).to.equal('invalid_query');
    }
    expect((await f.api.get(`/api/skills?for_agent=reviewer&workspace=${ws.id}`)).status).to.equal(200);
  });
});
