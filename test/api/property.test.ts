import { expect } from 'chai';
import fc from 'fast-check';
import { KINDS } from '../../codecs/index.ts';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, startService } from '../helpers/service.ts';

describe('Property: random envelopes and specs never get a 5xx; a rejected write changes nothing', function () {
  this.timeout(300_000);
  const redis = new RedisServer();
  let service: Service;
  let api: Client;

  before(async () => {
    await redis.start();
    service = await startService(redis.url, { LOG_LEVEL: 'silent' });
    api = new Client(service.url);
    // One existing record per kind-ish id, so updates, stale versions and deletes are exercised too.
    await api.put('/api/resources/agent/existing', { scope: { kind: 'global' }, spec: { name: 'e', prompt: 'p' }, expected_version: 0 });
  });
  after(async () => {
    await service.stop();
    await redis.destroy();
  });

  const kind = fc.oneof(fc.constantFrom(...KINDS), fc.string({ maxLength: 12 }));
  const id = fc.oneof(fc.constant('existing'), fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,20}$/), fc.string({ maxLength: 8 }));
  const scope = fc.oneof(
    fc.constant({ kind: 'global' }), fc.record({ kind: fc.constantFrom('global', 'workspace', 'x'), id: fc.option(fc.string({ maxLength: 6 })) }),
    fc.jsonValue({ maxDepth: 2 }),
  );
  const spec = fc.oneof(fc.jsonValue({ maxDepth: 4 }), fc.record({ name: fc.string(), prompt: fc.string() }), fc.dictionary(fc.constantFrom('name', 'prompt', 'id', 'event', 'schedule', 'bundle', 'profiles', 'backend', 'source'), fc.jsonValue({ maxDepth: 3 })));
  const envelope = fc.oneof(
    fc.record({ scope, spec, expected_version: fc.oneof(fc.integer({ min: -2, max: 3 }), fc.jsonValue({ maxDepth: 1 })) }, { requiredKeys: [] }),
    fc.jsonValue({ maxDepth: 3 }),
  );
  const raw = fc.oneof(envelope.map((e) => JSON.stringify(e)), fc.string({ maxLength: 40 }));

  it('holds for 2,000 random PUT and DELETE requests', async () => {
    let cases = 0;
    await fc.assert(fc.asyncProperty(fc.constantFrom('PUT', 'DELETE'), kind, id, raw, async (method, k, i, body) => {
      cases++;
      const path = `/api/resources/${encodeURIComponent(k)}/${encodeURIComponent(i)}`;
      const before = await api.get(path);
      const res = await api.call(method, path, body);
      expect(res.status, `${method} ${path} ${body} -> ${JSON.stringify(res.body)}`).to.be.below(500);
      if (res.status >= 400) {
        expect(res.body.error, 'error body').to.be.a('string');
        const after = await api.get(path);
        expect(after.status).to.equal(before.status);
        expect(after.body).to.deep.equal(before.body);
      }
    }), { numRuns: 2000 });
    expect(cases).to.be.at.least(2000);
  });
});
