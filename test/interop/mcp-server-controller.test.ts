import { expect } from 'chai';
import { observedResult } from '../../controllers/mcp-server.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { EVERYTHING, EverythingHttp, everythingStdio } from './everything.ts';

const condition = (status: any, type: string) => status.conditions.find((c: any) => c.type === type);

describe('mcp_server controller observes the server (real Redis, @modelcontextprotocol/server-everything)', function () {
  this.timeout(120_000);
  const f = new ServiceFixture({ workspace: false }).install();
  const http = new EverythingHttp();
  after(() => http.stop());

  const put = async (id: string, spec: unknown) => {
    const res = await f.api.put(`/api/resources/mcp_server/${id}?wait=true`, { scope: { kind: 'global' }, spec, expected_version: 0 });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return (await f.api.get(`/api/resources/mcp_server/${id}/status`)).body.status;
  };

  const cases: { reason: string; id: string; spec: unknown; ready: string; connected: string }[] = [
    { reason: 'a reachable stdio server is Ready and Connected', id: 'ok', spec: everythingStdio('everything'), ready: 'True', connected: 'Connected' },
    { reason: 'a command that does not exist is backend_not_executable', id: 'missing', spec: { name: 'missing', command: '/nonexistent/mcp-server' }, ready: 'False', connected: 'backend_not_executable' },
    { reason: 'a shell line as command is one (missing) executable: backend_not_executable', id: 'shell', spec: { name: 'shell', command: `node ${EVERYTHING} stdio` }, ready: 'False', connected: 'backend_not_executable' },
    { reason: 'a secret ref that does not resolve is mcp_auth_unconfigured', id: 'nosecret', spec: { ...everythingStdio('nosecret'), secret_env: { TOKEN: 'env:SVC_SECRET_TEST_NEVER_SET' } }, ready: 'False', connected: 'mcp_auth_unconfigured' },
  ];
  for (const c of cases) {
    it(`${c.reason}`, async () => {
      const status = await put(c.id, c.spec);
      expect(condition(status, 'Ready'), JSON.stringify(status)).to.include({ status: c.ready });
      expect(condition(status, 'Connected')).to.include({ status: c.ready, reason: c.connected });
      if (c.ready === 'True') {
        expect(status.tools_discovered).to.be.greaterThan(5);
        expect(status.server_info.name).to.be.a('string').and.not.equal('');
        expect(status.server_info.protocol_version).to.match(/^\d{4}-\d{2}-\d{2}$/);
        expect(Date.parse(status.last_connected_at)).to.be.greaterThan(0);
      } else {
        expect(condition(status, 'Degraded')).to.include({ status: 'True', reason: c.connected });
        expect(status.tools_discovered).to.equal(0);
      }
    });
  }

  it('an unreachable URL is mcp_unreachable and becomes Ready on its own once the server listens (requeue with backoff)', async () => {
    await http.reservePort();
    const status = await put('later', { name: 'later', transport: 'http', url: http.url });
    expect(condition(status, 'Connected')).to.include({ status: 'False', reason: 'mcp_unreachable' });
    expect(status.last_connected_at).to.equal(null);
    await http.start();
    const after = await eventually(async () => {
      const s = (await f.api.get('/api/resources/mcp_server/later/status')).body.status;
      expect(condition(s, 'Connected'), JSON.stringify(s)).to.include({ status: 'True' });
      return s;
    }, 30_000, 200);
    expect(condition(after, 'Ready')).to.include({ status: 'True' });
    expect(after.tools_discovered).to.be.greaterThan(5);
  });
});

describe('observedResult (mcp_server probe → status)', () => {
  const now = new Date('2030-01-01T00:01:00Z');
  const info = { name: 'x', version: '1', protocol_version: '2025-06-18' };
  const unreachableSince = (iso: string) => ({
    observed_version: 1, last_reconciled_at: iso, last_error: '', server_info: info, last_connected_at: '2029-12-31T00:00:00Z',
    conditions: [{ type: 'Connected' as const, status: 'False' as const, reason: 'mcp_unreachable', message: '', last_transition_time: iso }],
  });
  const cases = [
    { reason: 'a first failure looks again after the minimum wait', given: { probe: { ok: false as const, reason: 'mcp_unreachable' as const, message: 'x' }, prev: undefined }, want: { requeueAfterMs: 1000, outcome: 'degraded' } },
    { reason: 'the wait grows with how long the server has been unreachable', given: { probe: { ok: false as const, reason: 'mcp_unreachable' as const, message: 'x' }, prev: unreachableSince('2030-01-01T00:00:50Z') }, want: { requeueAfterMs: 10_000, outcome: 'degraded' } },
    { reason: 'the wait is capped', given: { probe: { ok: false as const, reason: 'mcp_unreachable' as const, message: 'x' }, prev: unreachableSince('2029-01-01T00:00:00Z') }, want: { requeueAfterMs: 60_000, outcome: 'degraded' } },
    { reason: 'a refused secret is terminal (no requeue)', given: { probe: { ok: false as const, reason: 'mcp_auth_unconfigured' as const, message: 'x' }, prev: undefined }, want: { requeueAfterMs: undefined, outcome: 'degraded' } },
    { reason: 'a connected server is ready and not requeued', given: { probe: { ok: true as const, tools: [], serverInfo: info }, prev: undefined }, want: { requeueAfterMs: undefined, outcome: 'ready' } },
  ];
  for (const c of cases) {
    it(c.reason, () => {
      const r = observedResult(c.given.probe, c.given.prev, now);
      expect({ requeueAfterMs: r.requeueAfterMs, outcome: r.outcome }).to.deep.equal(c.want);
    });
  }
  it('an unreachable server keeps what was last seen of it (server_info, last_connected_at)', () => {
    const r = observedResult({ ok: false, reason: 'mcp_unreachable', message: 'x' }, unreachableSince('2030-01-01T00:00:50Z'), now);
    expect(r.fields).to.deep.equal({ tools_discovered: 0, server_info: info, last_connected_at: '2029-12-31T00:00:00Z' });
  });
});
