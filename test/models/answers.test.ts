import { expect } from 'chai';
import http from 'node:http';
import zlib from 'node:zlib';
import { ServiceFixture } from '../helpers/fixture.ts';
import { ProviderFixture, providerYaml, TEST_KEY, writeSettings } from './fixtures.ts';

/** raw GETs a path and answers the status, headers and body bytes exactly as sent (node:http decodes nothing). */
function raw(base: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    http.get(base + path, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    }).on('error', reject);
  });
}

describe('Model catalog answers: compressed once, revalidated with ETags', function () {
  this.timeout(60_000);
  const up = new ProviderFixture();
  const f = new ServiceFixture({ env: { SECRET_ENV_ALLOWLIST: 'SVC_SECRET_*' } }).install();
  before(async () => {
    process.env.SVC_SECRET_CATALOG_KEY = TEST_KEY;
    await up.start();
  });
  after(() => up.stop());

  it('sends the listing as gzip or brotli when the client accepts it: the same bytes once decoded', async () => {
    const plain = await raw(f.service.url, '/api/model-catalog/models?view=all');
    expect(plain.status).to.equal(200);
    expect(plain.headers).to.include({ 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-cache', vary: 'Accept-Encoding' });
    expect(plain.headers['content-encoding']).to.equal(undefined);
    expect(plain.headers.etag).to.match(/^"[A-Za-z0-9_-]{27}"$/);
    expect(JSON.parse(plain.body.toString()).models.length).to.be.greaterThan(600);
    const table: { reason: string; accept: string; want: string; decode: (b: Buffer) => Buffer }[] = [
      { reason: 'gzip only', accept: 'gzip', want: 'gzip', decode: zlib.gunzipSync },
      { reason: 'a browser\'s list: its first preference', accept: 'gzip, deflate, br', want: 'gzip', decode: zlib.gunzipSync },
      { reason: 'brotli preferred by q-value', accept: 'gzip;q=0.5, br', want: 'br', decode: zlib.brotliDecompressSync },
    ];
    for (const t of table) {
      const res = await raw(f.service.url, '/api/model-catalog/models?view=all', { 'accept-encoding': t.accept });
      expect(res.headers['content-encoding'], t.reason).to.equal(t.want);
      expect(res.headers.etag, t.reason).to.equal(plain.headers.etag);
      expect(res.body.length, t.reason).to.be.below(plain.body.length / 10);
      expect(t.decode(res.body).equals(plain.body), t.reason).to.equal(true);
    }
    // a coding the client refuses is not sent; a small answer is sent as is
    expect((await raw(f.service.url, '/api/model-catalog/models?view=all', { 'accept-encoding': 'gzip;q=0, deflate' })).headers['content-encoding']).to.equal(undefined);
    const small = await raw(f.service.url, '/api/model-catalog/models', { 'accept-encoding': 'gzip' });
    expect(small.body.toString()).to.equal('{"models":[]}');
    expect(small.headers['content-encoding']).to.equal(undefined);
  });

  it('answers 304 without a body to a matching If-None-Match, and a new ETag once the catalog changes', async () => {
    const first = await raw(f.service.url, '/api/model-catalog/models?view=all');
    const etag = String(first.headers.etag);
    const again = await raw(f.service.url, '/api/model-catalog/models?view=all', { 'if-none-match': etag, 'accept-encoding': 'gzip' });
    expect(again.status).to.equal(304);
    expect(again.body.length).to.equal(0);
    expect(again.headers.etag).to.equal(etag);
    // another listing has another ETag
    expect((await raw(f.service.url, '/api/model-catalog/models?view=all&provider_id=openai', { 'if-none-match': etag })).status).to.equal(200);
    // a change of the catalog (a provider's live list) is a new answer
    writeSettings(f.dataDir, providerYaml('openai', up.url));
    expect((await f.api.post('/api/model-catalog/providers/openai/models/refresh', {})).status).to.equal(200);
    const changed = await raw(f.service.url, '/api/model-catalog/models?view=all', { 'if-none-match': etag });
    expect(changed.status).to.equal(200);
    expect(changed.headers.etag).to.not.equal(etag);
    expect(JSON.parse(changed.body.toString()).models.find((m: any) => m.model_id === 'fixture-only-1')).to.include({ availability_state: 'available_live' });
    // the OpenAI list revalidates the same way
    const openai = await raw(f.service.url, '/api/openai/v1/models');
    expect(openai.status).to.equal(200);
    expect((await raw(f.service.url, '/api/openai/v1/models', { 'if-none-match': String(openai.headers.etag) })).status).to.equal(304);
  });
});
