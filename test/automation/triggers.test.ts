import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { signWebhook } from '../../runtime/automation/webhooks.ts';
import { putRecord, runsOf } from './helpers.ts';

const SECRET = 'whsec-test-0123456789';

describe('Automation triggers: bus events and signed webhooks', function () {
  this.timeout(120_000);
  const f = new ServiceFixture({ env: { WEBHOOK_RATE_LIMIT: '5' } }).install();
  const ws = () => ({ kind: 'workspace', id: f.ws.id });
  before(() => { process.env.SVC_SECRET_HOOK = SECRET; });
  after(() => { delete process.env.SVC_SECRET_HOOK; });

  it('fires an event trigger once for a matching resource.applied (filter data.kind) and never for another kind', async () => {
    await putRecord(f.api, 'automation.trigger', 'on-agent', ws(), {
      name: 'on-agent', agent_name: 'scripted', enabled: true, event: 'resource.applied', filter: { 'data.kind': 'agent' }, prompt: 'applied {{ .data.kind }} {{ .data.id }} v{{ .data.version }}',
    });
    await putRecord(f.api, 'automation.trigger', 'on-any-resource', ws(), { name: 'any', agent_name: 'scripted', enabled: true, event: 'resource.*', filter: { 'data.kind': 'skill' }, prompt: 'x' });
    await eventually(async () => expect((await f.api.get('/api/resources/automation.trigger/on-agent/status')).body.status.observed_version).to.equal(1));
    await putRecord(f.api, 'automation.job', 'not-an-agent', ws(), { name: 'n', agent_name: 'scripted', prompt: 'p', schedule: { mode: 'cron', expr: '0 0 1 1 *' } });
    await putRecord(f.api, 'agent', 'helper', ws(), { name: 'helper', prompt: 'be helpful' });
    const runs = await eventually(async () => {
      const r = await runsOf(f.api, 'triggers', 'on-agent');
      expect(r.map((x) => x.status)).to.deep.equal(['succeeded']);
      return r;
    }, 20_000, 100);
    expect(runs[0]).to.include({ kind: 'trigger', trigger_id: 'on-agent', workspace_id: f.ws.id });
    expect(runs[0].event_id).to.match(/^\d+-\d+$/);
    const prompts = (await f.api.get(`/api/sessions/${runs[0].session_id}/events?type=user_message`)).body.events;
    expect(prompts.map((e: any) => e.content.text)).to.deep.equal(['applied agent helper v1']);
    // The job write (kind automation.job) fired nothing; neither trigger matched the other's kind.
    await new Promise((r) => setTimeout(r, 1000));
    expect(await runsOf(f.api, 'triggers', 'on-agent')).to.have.length(1);
    expect(await runsOf(f.api, 'triggers', 'on-any-resource')).to.have.length(0);
  });

  describe('webhooks', () => {
    const post = (path: string, body: string, headers: Record<string, string>) => f.api.call('POST', path, body, headers);
    const signed = (body: string, ts = Math.floor(Date.now() / 1000)) => ({ 'x-svc-webhook-timestamp': String(ts), 'x-svc-webhook-signature': signWebhook(SECRET, String(ts), body) });
    const hook = async (over: Record<string, unknown> = {}) => {
      await putRecord(f.api, 'automation.trigger', 'deploys', ws(), { name: 'deploys', agent_name: 'scripted', enabled: true, event: 'webhook', endpoint_slug: 'ci-deploys', webhook_secret_ref: 'env:SVC_SECRET_HOOK', prompt: 'deploy {{ .payload.service }} at {{ .payload.sha }}', ...over });
      return `/api/webhooks/workspaces/${f.ws.id}/ci-deploys`;
    };

    it('accepts a signed delivery (202 with its run), prompting the agent with the payload, and refuses its replay (409)', async () => {
      const path = await hook();
      const body = JSON.stringify({ service: 'api', sha: 'abc123' });
      const headers = signed(body);
      const ok = await post(path, body, headers);
      expect(ok.status, JSON.stringify(ok.body)).to.equal(202);
      expect(ok.body.run).to.include({ kind: 'webhook', trigger_id: 'deploys', status: 'queued', workspace_id: f.ws.id });
      const run = await eventually(async () => {
        const r = (await f.api.get(`/api/automation/runs/${ok.body.run_id}`)).body.run;
        expect(r.status).to.equal('succeeded');
        return r;
      }, 20_000, 100);
      const prompts = (await f.api.get(`/api/sessions/${run.session_id}/events?type=user_message`)).body.events;
      expect(prompts.map((e: any) => e.content.text)).to.deep.equal(['deploy api at abc123']);
      const replay = await post(path, body, headers);
      expect(replay.status).to.equal(409);
      expect(replay.body.diagnostic.code).to.equal('webhook_replayed');
      // The derived webhook id addresses the same endpoint; the view says where senders post.
      const view = (await f.api.get('/api/automation/triggers/deploys')).body.trigger;
      expect(view.webhook_path).to.equal(path);
      expect(await runsOf(f.api, 'triggers', 'deploys')).to.have.length(1);
    });

    it('refuses a bad signature, a stale or missing timestamp (401) and an unknown endpoint (404), recording no run', async () => {
      const path = await hook();
      const body = JSON.stringify({ service: 'api' });
      const bad = await post(path, body, { ...signed(body), 'x-svc-webhook-signature': signWebhook('wrong-secret', String(Math.floor(Date.now() / 1000)), body) });
      expect(bad.status).to.equal(401);
      expect(bad.body.diagnostic.code).to.equal('webhook_signature_invalid');
      const tampered = await post(path, JSON.stringify({ service: 'db' }), signed(body));
      expect(tampered.status).to.equal(401);
      const stale = await post(path, body, signed(body, Math.floor(Date.now() / 1000) - 301));
      expect(stale.status).to.equal(401);
      expect(stale.body.diagnostic.code).to.equal('webhook_timestamp_invalid');
      expect((await post(path, body, { 'x-svc-webhook-signature': signed(body)['x-svc-webhook-signature'] })).status).to.equal(401);
      expect((await post(`/api/webhooks/workspaces/${f.ws.id}/nope`, body, signed(body))).status).to.equal(404);
      expect((await post('/api/webhooks/global/ci-deploys', body, signed(body))).status).to.equal(404);
      expect(await runsOf(f.api, 'triggers', 'deploys')).to.have.length(0);
    });

    it('answers 503 when the secret ref does not resolve (vault, or outside SECRET_ENV_ALLOWLIST) and 429 with Retry-After over the rate', async () => {
      const vault = await hook({ webhook_secret_ref: 'vault:automation/deploys' });
      const body = '{}';
      const res = await post(vault, body, signed(body));
      expect(res.status).to.equal(503);
      expect(res.body.diagnostic.code).to.equal('webhook_secret_unavailable');
      expect(JSON.stringify(res.body)).to.not.include(SECRET);
      await putRecord(f.api, 'automation.trigger', 'deploys', ws(), { name: 'deploys', agent_name: 'scripted', enabled: true, event: 'webhook', endpoint_slug: 'ci-deploys', webhook_secret_ref: 'env:SVC_SECRET_HOOK', prompt: 'p' }, 1);
      const statuses: number[] = [];
      let limited: any;
      for (let i = 0; i < 6; i++) {
        const b = JSON.stringify({ i });
        const r = await post(vault, b, signed(b));
        statuses.push(r.status);
        if (r.status === 429) limited = r;
      }
      // 5 verified deliveries per minute per endpoint; the vault delivery above could not be verified, so it did not count.
      expect(statuses).to.deep.equal([202, 202, 202, 202, 202, 429]);
      expect(Number(limited.headers.get('retry-after'))).to.be.within(1, 60);
      expect(limited.body.diagnostic).to.include({ code: 'webhook_rate_limited', category: 'rate_limit', title: 'Too many requests' });
    });

    it('counts only verified deliveries against the endpoint: after 100 unsigned or badly signed ones (401, then 429 for their address) a signed delivery is 202 and runs', async () => {
      const path = await hook();
      const now = () => Math.floor(Date.now() / 1000);
      const bad = [
        () => ({}),
        (b: string) => ({ ...signed(b), 'x-svc-webhook-signature': signWebhook('wrong-secret', String(now()), b) }),
        (b: string) => signed(b, now() - 3600),
        (b: string) => ({ 'x-svc-webhook-timestamp': String(now()), 'x-svc-webhook-signature': 'sha256=00' }),
      ];
      const statuses: number[] = [];
      let limited: any;
      // NOTE: the address's budget is a fixed one-minute window (AutomationStore.rateLimit): the 100 deliveries start
      // well inside one, or a window ending halfway through would grant 10 more 401s.
      const left = 60_000 - (Date.now() % 60_000);
      if (left < 30_000) await new Promise((r) => setTimeout(r, left + 100));
      for (let i = 0; i < 100; i++) {
        const b = JSON.stringify({ service: 'attacker', i });
        const r = await post(path, b, bad[i % bad.length](b));
        statuses.push(r.status);
        if (r.status === 429) limited ??= r;
        else expect(r.body.diagnostic).to.include({ category: 'auth' });
      }
      // The first 10 failures from this address are 401; the rest are refused with 429 on the address's own budget.
      expect(statuses.slice(0, 10)).to.deep.equal(Array(10).fill(401));
      expect(statuses.slice(10)).to.deep.equal(Array(90).fill(429));
      expect(limited.body.diagnostic).to.include({ code: 'webhook_rate_limited', category: 'rate_limit' });
      expect(Number(limited.headers.get('retry-after'))).to.be.within(1, 60);
      expect(await runsOf(f.api, 'triggers', 'deploys')).to.have.length(0);

      const body = JSON.stringify({ service: 'api', sha: 'def456' });
      const headers = signed(body);
      const ok = await post(path, body, headers);
      expect(ok.status, JSON.stringify(ok.body)).to.equal(202);
      const run = await eventually(async () => {
        const r = (await f.api.get(`/api/automation/runs/${ok.body.run_id}`)).body.run;
        expect(r.status).to.equal('succeeded');
        return r;
      }, 20_000, 100);
      const prompts = (await f.api.get(`/api/sessions/${run.session_id}/events?type=user_message`)).body.events;
      expect(prompts.map((e: any) => e.content.text)).to.deep.equal(['deploy api at def456']);
      // A replay of it is refused and spends nothing; the endpoint's budget (5) is whole but for that one delivery.
      for (let i = 0; i < 3; i++) expect((await post(path, body, headers)).status).to.equal(409);
      const more: number[] = [];
      for (let i = 0; i < 5; i++) {
        const b = JSON.stringify({ service: 'api', sha: `s${i}` });
        more.push((await post(path, b, signed(b))).status);
      }
      expect(more).to.deep.equal([202, 202, 202, 202, 429]);
      expect((await runsOf(f.api, 'triggers', 'deploys')).filter((r) => r.kind === 'webhook')).to.have.length(5);
    });
  });
});
