import { createHmac } from 'node:crypto';
import { expect } from 'chai';
import { ServiceFixture } from '../helpers/fixture.ts';
import { queuePrefix } from '../../store/keys.ts';
import { NOTIFY_QUEUE } from '../../runtime/notifications/notification-queue.ts';
import { eventually } from '../helpers/service.ts';
import { WebhookReceiver, type Received } from './receiver.ts';
import { webhookHeaders } from '../../runtime/notifications/webhook.ts';

const SECRET_VAR = 'SVC_SECRET_NOTIFY_TEST';
const SECRET = 'notify-signing-key-0123456789';
const TOKEN_VAR = 'SVC_SECRET_NOTIFY_TOKEN';
const TOKEN = 'bearer-token-abcdef-987654';
const CRLF_VAR = 'SVC_SECRET_NOTIFY_CRLF';
const condition = (status: any, type: string) => status?.conditions?.find((c: any) => c.type === type);

describe('notification delivery to a webhook bridge (real Redis, local receiver)', function () {
  this.timeout(120_000);
  const receiver = new WebhookReceiver();
  const f = new ServiceFixture({
    workspace: false,
    env: { NOTIFY_BACKOFF: '200ms', NOTIFY_MAX_BACKOFF: '1s', NOTIFY_HEALTH_INTERVAL: '500ms', NOTIFY_TIMEOUT: '2s' },
  });
  before(() => {
    process.env[SECRET_VAR] = SECRET;
    process.env[TOKEN_VAR] = TOKEN;
  });
  after(() => {
    delete process.env[SECRET_VAR];
    delete process.env[TOKEN_VAR];
  });
  f.install();
  beforeEach(() => receiver.start());
  afterEach(() => receiver.stop());

  const putBridge = async (id: string, spec: Record<string, unknown>) => {
    const res = await f.api.put(`/api/resources/bridge.instance/${id}`, {
      scope: { kind: 'global' }, expected_version: 0,
      spec: { platform: 'webhook', extension_name: 'webhook', display_name: id, enabled: true, ...spec },
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  };
  const bridgeStatus = async (id: string) => (await f.api.get(`/api/resources/bridge.instance/${id}/status`)).body.status;
  const waitConnected = (id: string, want: 'True' | 'False') => eventually(async () => {
    const s = await bridgeStatus(id);
    expect(condition(s, 'Connected'), JSON.stringify(s)).to.include({ status: want });
    return s;
  }, 30_000, 100);
  const publish = (type: string, n: number, extra: Record<string, unknown> = {}) =>
    f.service.bus!.publishMany(Array.from({ length: n }, (_, i) => ({ type, source: 'test', outcome: 'warning' as const, agent_name: 'coder', summary: `${type} #${i}`, data: { i }, ...extra })));
  const deliveries = async (q = '') => (await f.api.get(`/api/notifications/deliveries?limit=1000${q}`)).body;
  const verify = (r: Received) => {
    const ts = String(r.headers['x-svc-timestamp']);
    const want = `sha256=${createHmac('sha256', SECRET).update(`${ts}.${r.body}`).digest('hex')}`;
    return r.headers['x-svc-signature'] === want;
  };

  it('delivers every matching event once the receiver is back after 3 s down: nothing lost, a duplicate only with the same Idempotency-Key; signatures verify; Connected follows the receiver', async () => {
    await putBridge('pager', {
      provider_config: { url: `${receiver.url}/hook`, headers: { 'X-Team': 'ops' }, secret_headers: { Authorization: `env:${TOKEN_VAR}` }, secret_ref: `env:${SECRET_VAR}` },
    });
    await putBridge('quiet', { enabled: false, provider_config: { url: `${receiver.url}/quiet` } });
    await waitConnected('pager', 'True');
    const created = await f.api.post('/api/notifications/presets', {
      name: 'alerts', enabled: true, events: ['note.*'], filter: 'severity>=warning OR agent=coder',
      targets: [{ bridge_id: 'pager' }, { bridge_id: 'quiet' }],
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);

    // Up: five events arrive; one that the filter refuses and one of another family do not.
    const first = await publish('note.ping', 5);
    const [refused] = await publish('note.ping', 1, { outcome: 'info', agent_name: 'other' });
    const [otherFamily] = await publish('other.ping', 1);
    await eventually(async () => expect(receiver.posts('/hook').length).to.be.greaterThanOrEqual(5), 30_000, 50);

    // Down for 3 s: ten more events wait; the bridge turns Degraded while the receiver is away.
    await receiver.stop();
    const second = await publish('note.ping', 10);
    const downAt = Date.now();
    const degraded = await waitConnected('pager', 'False');
    expect(condition(degraded, 'Connected')).to.include({ reason: 'BridgeUnreachable' });
    expect(condition(degraded, 'Degraded')).to.include({ status: 'True' });
    await eventually(async () => expect((await deliveries('&status=pending&preset=alerts')).deliveries.some((d: any) => d.attempts >= 1 && d.last_error.includes('unreachable'))).to.equal(true), 10_000, 100);
    await new Promise((r) => setTimeout(r, Math.max(0, 3000 - (Date.now() - downAt))));
    await receiver.start();

    const all = [...first, ...second];
    await eventually(async () => {
      const ids = new Set(receiver.posts('/hook').map((r) => JSON.parse(r.body).id));
      expect([...all.map((e) => e.id)].filter((id) => !ids.has(id))).to.deep.equal([]);
    }, 60_000, 100);
    await waitConnected('pager', 'True');

    const posts = receiver.posts('/hook');
    const keyOf = new Map<string, string>();
    for (const r of posts) {
      const body = JSON.parse(r.body);
      const key = String(r.headers['idempotency-key']);
      expect(key).to.equal(`${body.id}:alerts:pager`);
      if (keyOf.has(body.id)) expect(key, 'a duplicate carries the same Idempotency-Key').to.equal(keyOf.get(body.id));
      keyOf.set(body.id, key);
      expect(verify(r), 'the signature verifies with the secret').to.equal(true);
      expect(r.headers).to.include({ 'x-team': 'ops', authorization: TOKEN, 'content-type': 'application/json', 'x-svc-event-type': 'note.ping' });
      expect(Object.keys(body).sort()).to.deep.equal(['agent', 'id', 'outcome', 'payload', 'sequence', 'summary', 'timestamp', 'type']);
      expect(body).to.include({ type: 'note.ping', outcome: 'warning', agent: 'coder' });
    }
    expect(keyOf.size).to.equal(15);
    const tampered = { ...posts[0], body: posts[0].body.replace('note.ping', 'note.pong') };
    expect(verify(tampered), 'a changed body does not verify').to.equal(false);
    expect(posts.map((r) => JSON.parse(r.body).id)).not.to.include.members([refused.id, otherFamily.id]);
    expect(receiver.posts('/quiet'), 'a disabled bridge delivers nothing').to.deep.equal([]);

    const rows = (await deliveries('&preset=alerts')).deliveries;
    const pager = rows.filter((d: any) => d.bridge_id === 'pager');
    expect(pager.length).to.equal(15);
    for (const d of pager) expect(d).to.include({ status: 'delivered', last_status: 200 });
    expect(pager.filter((d: any) => second.some((e) => e.id === d.event_id)).every((d: any) => d.attempts >= 2), 'the events sent while down took retries').to.equal(true);
    const quiet = rows.filter((d: any) => d.bridge_id === 'quiet');
    expect(quiet.length).to.equal(15);
    for (const d of quiet) expect(d).to.include({ status: 'skipped', last_error: 'the bridge is disabled' });
    expect(rows.some((d: any) => d.event_id === refused.id || d.event_id === otherFamily.id)).to.equal(false);
    expect((await deliveries(`&event=${first[0].id}&bridge=pager`)).deliveries.map((d: any) => d.id)).to.deep.equal([`${first[0].id}:alerts:pager`]);

    // No secret value anywhere a client, a log reader or a bus reader sees.
    const seen = JSON.stringify([rows, await bridgeStatus('pager'), (await f.api.get('/api/resources/bridge.instance/pager')).body, await f.service.bus!.latest(500)]);
    for (const secret of [SECRET, TOKEN]) expect(seen).not.to.contain(secret);
    const metrics = await (await fetch(`${f.service.url}/metrics`)).text();
    expect(metrics).to.match(/svc_notification_deliveries_total\{outcome="delivered"\} (\d+)/);
    expect(metrics).to.contain('svc_notification_delivery_latency_seconds_count');
  });

  it('a redelivered bus page enqueues nothing twice (delivery id = job id; delivered rows stay delivered)', async () => {
    await putBridge('once', { provider_config: { url: `${receiver.url}/once` } });
    await waitConnected('once', 'True');
    expect((await f.api.post('/api/notifications/presets', { name: 'once', enabled: true, events: ['note.*'], targets: [{ bridge_id: 'once' }] })).status).to.equal(201);
    const evs = await publish('note.once', 3);
    await eventually(async () => expect((await deliveries('&preset=once&status=delivered')).total).to.equal(3), 30_000, 50);
    // Hand the same page to a second router pass, as a reader that died before acknowledging would.
    const { NotificationRouter } = await import('../../runtime/notifications/router.ts');
    const { NotificationStore } = await import('../../store/notification-store.ts');
    const { NotificationQueue } = await import('../../runtime/notifications/notification-queue.ts');
    const { RegistryCache } = await import('../../controllers/registry-controller.ts');
    const { DEFAULT_NOTIFICATION_SETTINGS } = await import('../../runtime/notifications/types.ts');
    const store = new NotificationStore(f.service.store!.redis, f.service.store!.keys);
    const conn = f.redis.client();
    const queue = new NotificationQueue({ connection: conn, prefix: queuePrefix('svc:', NOTIFY_QUEUE), store, settings: DEFAULT_NOTIFICATION_SETTINGS });
    const router = new NotificationRouter({ bus: f.service.bus!, store, queue, bridges: new RegistryCache(f.service.store!), logger: f.service.logger });
    await router.route(evs);
    await new Promise((r) => setTimeout(r, 1000));
    await queue.close();
    conn.disconnect();
    expect(receiver.posts('/once').length).to.equal(3);
    expect((await deliveries('&preset=once')).deliveries.map((d: any) => d.status)).to.deep.equal(['delivered', 'delivered', 'delivered']);
  });

  it('announces each delivery row it creates or moves as notification.delivery_updated (refs and status, no payload), and never delivers those', async () => {
    await putBridge('seen', { provider_config: { url: `${receiver.url}/seen` } });
    await waitConnected('seen', 'True');
    // NOTE: notification.* would match the delivery events themselves: the router must leave them alone.
    expect((await f.api.post('/api/notifications/presets', { name: 'seen', enabled: true, events: ['note.*', 'notification.*'], targets: [{ bridge_id: 'seen' }] })).status).to.equal(201);
    const [note] = await publish('note.seen', 1, { data: { detail: 'payload-only-text' } });
    const id = `${note.id}:seen:seen`;
    await eventually(async () => expect((await deliveries(`&event=${note.id}`)).deliveries[0]).to.include({ id, status: 'delivered' }), 30_000, 50);
    const updates = async () => (await f.service.bus!.range(note.id, 10_000)).filter((e) => e.type === 'notification.delivery_updated' && e.data.delivery_id === id);
    const seen = await eventually(async () => {
      const u = await updates();
      expect(u.map((e) => e.data.status)).to.deep.equal(['pending', 'delivered']);
      return u;
    }, 10_000, 50);
    expect(seen[1]).to.include({ source: 'notifications', outcome: 'success' });
    expect(seen[1].data).to.deep.equal({ delivery_id: id, event_id: note.id, event_type: 'note.seen', preset: 'seen', bridge_id: 'seen', status: 'delivered', attempts: 1, last_status: 200 });
    expect(JSON.stringify(seen)).to.not.include('payload-only-text');
    await new Promise((r) => setTimeout(r, 1000));
    const all = (await deliveries('&preset=seen')).deliveries as { event_type: string }[];
    expect(all.map((d) => d.event_type)).to.not.include('notification.delivery_updated');
    expect(receiver.posts('/seen').map((r) => JSON.parse(String(r.body)).type)).to.not.include('notification.delivery_updated');
  });

  it('refuses a webhook bridge with a bad url, a secret-looking plain header or a non-env secret_ref (422), and reports an unset secret as Degraded', async () => {
    const bad = async (provider_config: unknown, path: string) => {
      const res = await f.api.put('/api/resources/bridge.instance/bad', { scope: { kind: 'global' }, expected_version: 0, spec: { platform: 'webhook', extension_name: 'webhook', display_name: 'b', provider_config } });
      expect(res.status, JSON.stringify(res.body)).to.equal(422);
      expect(JSON.stringify(res.body.diagnostic.evidence)).to.contain(path);
    };
    await bad({ url: 'ftp://x/y' }, 'provider_config.url');
    await bad({ url: 'http://user:pw@x/y' }, 'provider_config.url');
    await bad({ url: 'http://x/y', headers: { Authorization: 'Bearer abc' } }, 'provider_config.headers.Authorization');
    await bad({ url: 'http://x/y', secret_ref: 'plain-secret' }, 'provider_config.secret_ref');
    await bad({ url: 'http://x/y', headers: { 'Idempotency-Key': 'x' } }, 'provider_config.headers.Idempotency-Key');
    await bad({ url: 'http://x/y', extra: 1 }, 'provider_config.extra');
    await putBridge('unset', { provider_config: { url: `${receiver.url}/x`, secret_ref: 'env:SVC_SECRET_NOTIFY_NEVER_SET' } });
    const s = await eventually(async () => {
      const st = await bridgeStatus('unset');
      expect(condition(st, 'Connected')).to.include({ status: 'False', reason: 'SecretUnavailable' });
      return st;
    }, 15_000, 100);
    expect(condition(s, 'Connected').message).to.contain('secret_ref');
  });

  it('a secret header whose value is no valid header value (a line break) leaves the bridge Degraded naming the header; its deliveries wait unsent, the value never shown', async () => {
    process.env[CRLF_VAR] = 'token\r\nX-Injected: yes';
    try {
      await putBridge('crlf', { provider_config: { url: `${receiver.url}/crlf`, secret_headers: { 'X-Token': `env:${CRLF_VAR}` } } });
      const st = await eventually(async () => {
        const s = await bridgeStatus('crlf');
        expect(condition(s, 'Connected'), JSON.stringify(s)).to.include({ status: 'False', reason: 'SecretUnavailable' });
        return s;
      }, 15_000, 100);
      expect(condition(st, 'Connected').message).to.contain('secret_headers.X-Token').and.contain('not a valid header value');
      const preset = await f.api.post('/api/notifications/presets', { name: 'crlf', enabled: true, events: ['crlf.*'], targets: [{ bridge_id: 'crlf' }] });
      expect(preset.status, JSON.stringify(preset.body)).to.equal(201);
      await publish('crlf.ping', 2);
      const rows = await eventually(async () => {
        const d = (await deliveries('&preset=crlf')).deliveries;
        expect(d.map((r: any) => [r.status, r.attempts > 0])).to.deep.equal([['pending', true], ['pending', true]]);
        return d;
      }, 20_000, 100);
      for (const r of rows) expect(r.last_error).to.contain('secret_headers.X-Token');
      expect(JSON.stringify([st, rows])).to.not.contain('X-Injected');
      expect(receiver.posts('/crlf')).to.have.length(0);
    } finally {
      delete process.env[CRLF_VAR];
    }
  });
});

describe('notification delivery: a receiver that comes back (real Redis, local receiver)', function () {
  this.timeout(120_000);
  const receiver = new WebhookReceiver();
  // NOTE: a first retry 60 s out: only the bridge controller's promotion can deliver within the waits below.
  const f = new ServiceFixture({ workspace: false, env: { NOTIFY_BACKOFF: '60s', NOTIFY_HEALTH_INTERVAL: '500ms', NOTIFY_TIMEOUT: '2s' } }).install();
  afterEach(() => {
    receiver.postStatusFor = undefined;
    return receiver.stop();
  });

  it('retries the waiting deliveries at once when the bridge controller sees the receiver answer again, not after their backoff', async () => {
    await receiver.start();
    const put = await f.api.put('/api/resources/bridge.instance/back', {
      scope: { kind: 'global' }, expected_version: 0,
      spec: { platform: 'webhook', extension_name: 'webhook', display_name: 'back', enabled: true, provider_config: { url: `${receiver.url}/back` } },
    });
    expect(put.status).to.equal(201);
    const connected = async (want: string) => eventually(async () => {
      const s = (await f.api.get('/api/resources/bridge.instance/back/status')).body.status;
      expect(condition(s, 'Connected'), JSON.stringify(s)).to.include({ status: want });
    }, 20_000, 100);
    await connected('True');
    expect((await f.api.post('/api/notifications/presets', { name: 'back', enabled: true, events: ['note.*'], targets: [{ bridge_id: 'back' }] })).status).to.equal(201);
    await receiver.stop();
    const evs = await f.service.bus!.publishMany([1, 2, 3].map((i) => ({ type: 'note.back', source: 'test', data: { i } })));
    await connected('False');
    await eventually(async () => {
      const rows = (await f.api.get('/api/notifications/deliveries?preset=back')).body.deliveries;
      expect(rows.length).to.equal(3);
      for (const d of rows) expect(d).to.include({ status: 'pending', attempts: 1 });
    }, 20_000, 100);
    await receiver.start();
    await eventually(async () => {
      expect(new Set(receiver.posts('/back').map((r) => JSON.parse(r.body).id))).to.deep.equal(new Set(evs.map((e) => e.id)));
    }, 20_000, 100);
    const rows = (await f.api.get('/api/notifications/deliveries?preset=back&status=delivered')).body;
    expect(rows.total).to.equal(3);
  });

  const bridgeTo = async (id: string) => {
    const put = await f.api.put(`/api/resources/bridge.instance/${id}`, {
      scope: { kind: 'global' }, expected_version: 0,
      spec: { platform: 'webhook', extension_name: 'webhook', display_name: id, enabled: true, provider_config: { url: `${receiver.url}/${id}` } },
    });
    expect(put.status).to.equal(201);
    expect((await f.api.post('/api/notifications/presets', { name: id, enabled: true, events: ['note.*'], targets: [{ bridge_id: id }] })).status).to.equal(201);
  };
  const waiting = (preset: string, n: number) => eventually(async () => {
    const rows = (await f.api.get(`/api/notifications/deliveries?preset=${preset}`)).body.deliveries;
    expect(rows.length).to.equal(n);
    for (const d of rows) expect(d).to.include({ status: 'pending', attempts: 1 });
  }, 20_000, 100);

  it('a receiver whose health answers while its POSTs fail: the first delivery through after it recovers releases the waiting ones', async () => {
    await receiver.start();
    receiver.postStatus = 500;
    await bridgeTo('flaky');
    const evs = await f.service.bus!.publishMany([1, 2, 3].map((i) => ({ type: 'note.flaky', source: 'test', data: { i } })));
    await waiting('flaky', 3);
    receiver.postStatus = 200;
    const [late] = await f.service.bus!.publishMany([{ type: 'note.flaky', source: 'test', data: { i: 4 } }]);
    await eventually(async () => {
      const got = new Set(receiver.posts('/flaky').filter((r) => r.status === 200).map((r) => JSON.parse(r.body).id));
      expect(got).to.deep.equal(new Set([...evs, late].map((e) => e.id)));
    }, 20_000, 100);
  });

  it('a burst to one bridge goes out in batches: each delivery once with its own Idempotency-Key; the one the receiver refused is the only one retried; a batch handed over again POSTs none of them', async () => {
    await receiver.start();
    await bridgeTo('burst');
    // The receiver refuses one delivery in the middle of the burst, every time, until told otherwise.
    let refusing = true;
    receiver.postStatusFor = (body) => (refusing && JSON.parse(body).payload?.i === 7 ? 500 : undefined);
    const evs = await f.service.bus!.publishMany(Array.from({ length: 100 }, (_, i) => ({ type: 'note.burst', source: 'test', data: { i } })));
    const refused = evs[7];
    const keyOf = (id: string) => `${id}:burst:burst`;
    const rows = async () => (await f.api.get('/api/notifications/deliveries?preset=burst&limit=1000')).body.deliveries as any[];
    await eventually(async () => {
      const all = await rows();
      expect(all.filter((d) => d.status === 'delivered').length).to.equal(99);
      expect(all.find((d) => d.event_id === refused.id)).to.include({ status: 'pending', attempts: 1, last_status: 500 });
    }, 20_000, 100);
    const postsOf = (id: string) => receiver.posts('/burst').filter((r) => r.headers['idempotency-key'] === keyOf(id));
    for (const ev of evs) {
      const posts = postsOf(ev.id);
      expect(posts.length, `${ev.id} is POSTed once`).to.equal(1);
      expect(JSON.parse(posts[0].body).id).to.equal(ev.id);
      expect(posts[0].headers['x-svc-delivery-attempt']).to.equal('1');
    }
    for (const d of await rows()) if (d.event_id !== refused.id) expect(d).to.include({ status: 'delivered', attempts: 1, last_status: 200 });

    // The same page's batch handed over again (a reader or worker that died): every row left `pending` or has
    // its own retry job, so nothing is POSTed.
    const { NotificationQueue, batchJobId } = await import('../../runtime/notifications/notification-queue.ts');
    const { NotificationStore } = await import('../../store/notification-store.ts');
    const { DEFAULT_NOTIFICATION_SETTINGS } = await import('../../runtime/notifications/types.ts');
    const { toDeliveredEvent } = await import('../../runtime/notifications/delivered-event.ts');
    const conn = f.redis.client();
    const queue = new NotificationQueue({
      connection: conn, prefix: queuePrefix('svc:', NOTIFY_QUEUE), store: new NotificationStore(f.service.store!.redis, f.service.store!.keys), settings: DEFAULT_NOTIFICATION_SETTINGS,
    });
    const batch = { bridge_id: 'burst', deliveries: evs.map((e) => ({ delivery_id: keyOf(e.id), preset: 'burst', bridge_id: 'burst', created_at: new Date().toISOString(), event: toDeliveredEvent(e) })) };
    await queue.addBatches([batch]);
    await eventually(async () => expect(await queue.queue.getJob(batchJobId(batch))).to.equal(undefined), 20_000, 50);
    await queue.close();
    conn.disconnect();
    expect(receiver.posts('/burst').length).to.equal(100);

    // The receiver takes it again: the next delivery through releases the refused one's retry (its backoff is 60 s).
    refusing = false;
    const [late] = await f.service.bus!.publishMany([{ type: 'note.burst', source: 'test', data: { i: 100 } }]);
    await eventually(async () => {
      expect((await rows()).find((d) => d.event_id === refused.id)).to.include({ status: 'delivered', attempts: 2, last_status: 200 });
    }, 20_000, 100);
    expect(postsOf(refused.id).map((r) => [r.status, r.headers['x-svc-delivery-attempt']])).to.deep.equal([[500, '1'], [200, '2']]);
    expect(postsOf(late.id).length).to.equal(1);

    // Each row change was announced: created pending, then delivered (the refused one pending again in between).
    const updates = await eventually(async () => {
      const u = (await f.service.bus!.range('', 10_000)).filter((e) => e.type === 'notification.delivery_updated' && e.data.preset === 'burst');
      expect(u.length).to.equal(2 * 101 + 1);
      return u;
    }, 10_000, 100);
    for (const ev of [...evs, late]) {
      const mine = updates.filter((u) => u.data.delivery_id === keyOf(ev.id)).map((u) => [u.data.status, u.data.attempts]);
      expect(mine, ev.id).to.deep.equal(ev === refused ? [['pending', 0], ['pending', 1], ['delivered', 2]] : [['pending', 0], ['delivered', 1]]);
    }
  });

  it('deleting a bridge ends its waiting deliveries at once (failed: the bridge is gone), not at their next retry', async () => {
    await receiver.start();
    receiver.postStatus = 500;
    await bridgeTo('gone');
    await f.service.bus!.publishMany([1, 2].map((i) => ({ type: 'note.gone', source: 'test', data: { i } })));
    await waiting('gone', 2);
    expect((await f.api.delete('/api/notifications/presets/gone')).status).to.equal(204);
    expect((await f.api.delete('/api/resources/bridge.instance/gone', { expected_version: 1 })).status).to.equal(204);
    await eventually(async () => {
      const rows = (await f.api.get('/api/notifications/deliveries?preset=gone')).body.deliveries;
      expect(rows.map((d: any) => d.status)).to.deep.equal(['failed', 'failed']);
      for (const d of rows) expect(d.last_error).to.include('does not exist');
    }, 20_000, 100);
    const posted = receiver.posts('/gone').length;
    await new Promise((r) => setTimeout(r, 500));
    expect(receiver.posts('/gone').length).to.equal(posted);
  });
});

describe('webhookHeaders: what a bridge sends', () => {
  it('sends a name given as a plain and a secret header once, in any case, with the secret value', () => {
    const cfg = { url: 'http://x/y', headers: { 'X-Team': 'ops', 'X-Key': 'plain' } };
    const sent = webhookHeaders(cfg, { headers: { 'x-key': 'secret' } });
    expect(sent).to.deep.equal({ 'X-Team': 'ops', 'x-key': 'secret' });
    expect(webhookHeaders({ url: 'http://x/y' }, { headers: {} })).to.deep.equal({});
  });
});
