import { expect } from 'chai';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, startService } from '../helpers/service.ts';

describe('Health, readiness, metrics and the OpenAPI document', () => {
  const redis = new RedisServer();
  let service: Service;
  let api: Client;

  before(async () => {
    await redis.start();
    service = await startService(redis.url);
    api = new Client(service.url);
  });
  after(async () => {
    await service.stop();
    await redis.destroy();
  });

  it('answers /healthz and /readyz with 200 while Redis answers and controllers run', async () => {
    expect((await api.get('/healthz')).body).to.deep.equal({ status: 'ok' });
    const ready = await api.get('/readyz');
    expect(ready.status).to.equal(200);
    expect(ready.body.checks).to.deep.equal({ redis: 'ok', controllers: 'ok', runtime: 'ok', vault: 'ok' });
  });

  it('exposes HTTP, reconcile and queue-depth metrics', async () => {
    await api.put('/api/resources/agent/m1?wait=true', { scope: { kind: 'global' }, spec: { name: 'm', prompt: 'p' }, expected_version: 0 });
    const text = (await api.get('/metrics')).body as string;
    expect(text).to.match(/svc_http_requests_total\{method="PUT",route="\/api\/resources\/:kind\/:id",status="201"\} 1/);
    expect(text).to.match(/svc_reconciles_total\{kind="agent",outcome="ready"\} \d+/);
    expect(text).to.match(/svc_reconcile_duration_seconds_count\{kind="agent"\} \d+/);
    expect(text).to.match(/svc_reconcile_queue_depth\{kind="agent"\} \d+/);
  });

  /** streamOrCall GETs a path as Client.get does, except that an event stream's body is not waited for. */
  const streamOrCall = async (p: string): Promise<{ status: number; body: any }> => {
    const res = await fetch(service.url + p);
    if (!res.headers.get('content-type')?.startsWith('text/event-stream')) {
      const text = await res.text();
      try { return { status: res.status, body: text ? JSON.parse(text) : undefined }; } catch { return { status: res.status, body: text }; }
    }
    await res.body?.cancel();
    return { status: res.status, body: undefined };
  };

  it('describes every served route in /api/openapi.json, and every described route is served', async () => {
    const doc = (await api.get('/api/openapi.json')).body;
    expect(doc.openapi).to.match(/^3\./);
    const described = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops as object).map((m) => `${m.toUpperCase()} ${p}`));
    for (const must of ['GET /api/resources', 'PUT /api/resources/{kind}/{id}', 'GET /api/resources/{kind}/{id}/status',
      'POST /api/workspaces/resolve', 'GET /api/agents', 'POST /api/bundles/activations', 'GET /api/bundles/catalog', 'GET /readyz']) {
      expect(described).to.include(must);
    }
    // Every described route must answer with something other than "no such route".
    for (const entry of described) {
      const [method, p] = entry.split(' ');
      const at = p.replace(/\{[^}]+\}/g, 'x');
      // NOTE: a stream that opens (GET /api/events/stream) never ends by itself: its status and type are read, then it is dropped.
      const res = method === 'GET' ? await streamOrCall(at) : await api.call(method, at, {});
      expect(res.body?.diagnostic?.code, entry).to.not.equal('route_not_found');
      expect(res.status, entry).to.not.equal(405);
      expect(res.status, entry).to.be.below(500);
    }
  });
});
