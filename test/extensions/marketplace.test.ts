import { expect } from 'chai';
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { packDir } from '../../runtime/extensions/artifacts.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { copyHello, running, TRUSTED } from './helpers.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** IndexServer serves a static marketplace index and the archives it names. */
class IndexServer {
  readonly files = new Map<string, Buffer>();
  index: Record<string, unknown> = {};
  private server?: http.Server;

  async start(): Promise<string> {
    this.server = http.createServer((req, res) => {
      if (req.url === '/index.json') return void res.end(JSON.stringify(this.index));
      const f = this.files.get(req.url ?? '');
      if (!f) { res.statusCode = 404; return void res.end(); }
      res.end(f);
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
  }

  stop(): Promise<void> {
    return new Promise((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

describe('Extensions from the marketplace (an index source with archives and digests)', function () {
  this.timeout(60_000);
  const idx = new IndexServer();
  let base = '';
  before(async () => { base = await idx.start(); });
  after(() => idx.stop());
  const f = new ServiceFixture({
    workspace: false,
    env: ({ dataDir }) => {
      writeFileSync(path.join(dataDir, 'config.yaml'), `${TRUSTED}marketplace:\n  refresh_interval: '0'\n  sources:\n    - {id: local, type: index, url: ${base}/index.json}\n`);
      return { EXTENSION_RESTART_BACKOFF: '100ms' };
    },
  }).install();

  /** publish puts archives of hello (at versions) into the index, with or without their digests. */
  async function publish(entries: { name: string; version: string; digest?: 'right' | 'wrong' | 'none' }[]): Promise<void> {
    const extensions = [];
    for (const e of entries) {
      const dir = copyHello((m) => { m.name = e.name; m.version = e.version; m.resources.bundles[0].name = `greeter-${e.name}`; });
      const bytes = await packDir(dir, 1 << 24);
      const file = `/${e.name}-${e.version}.tar.gz`;
      idx.files.set(file, bytes);
      const digest = e.digest === 'none' ? undefined : e.digest === 'wrong' ? sha(Buffer.from('other')) : sha(bytes);
      extensions.push({ name: e.name, version: e.version, description: `the ${e.name} example`, author: 'acme', artifact_url: file, ...(digest ? { sha256: digest } : {}) });
    }
    idx.index = { extensions };
    const r = await f.api.post('/api/marketplace/refresh?kind=extension', {});
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
  }

  it('lists the extension entries, installs a verified one by slug, and refuses an unverified one without allow_unverified (422) and a wrong digest (400)', async () => {
    await publish([{ name: 'hello', version: '1.0.0' }, { name: 'nosum', version: '1.0.0', digest: 'none' }, { name: 'liar', version: '1.0.0', digest: 'wrong' }]);
    const list = (await f.api.get('/api/extensions/marketplace?q=example')).body.extensions;
    expect(list.map((e: any) => e.name).sort()).to.deep.equal(['hello', 'liar', 'nosum']);
    expect(list.find((e: any) => e.name === 'nosum').trust.checksum_verified).to.equal(false);
    expect((await f.api.get('/api/extensions/marketplace?limit=0')).status).to.equal(400);
    expect((await f.api.get('/api/extensions/marketplace?source=elsewhere')).body.extensions).to.deep.equal([]);

    const res = await f.api.post('/api/extensions', { slug: 'hello' });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.extension).to.include({ name: 'hello', source: 'marketplace', version: '1.0.0' });
    expect(res.body.extension.provenance).to.include({ installed_from: 'marketplace:local', slug: 'hello', checksum_verified: true, allow_unverified: false });
    expect(res.body.extension.provenance.source_url).to.equal(`${base}/hello-1.0.0.tar.gz`);
    const page = (await f.api.get('/api/marketplace/extension')).body.items.find((i: any) => i.entry_id === 'hello');
    expect(page).to.include({ installed: true, installed_name: 'hello', installed_version: '1.0.0', manage_path: '/api/extensions/hello' });
    const prov = (await f.api.get('/api/extensions/hello/provenance')).body.provenance;
    expect(prov.trust.decision).to.equal('verified');

    const unverified = await f.api.post('/api/extensions', { slug: 'nosum' });
    expect(unverified.status).to.equal(422);
    expect(unverified.body.diagnostic.code).to.equal('checksum_unverified');
    const liar = await f.api.post('/api/extensions', { slug: 'liar' });
    expect(liar.status).to.equal(400);
    expect(liar.body.diagnostic.code).to.equal('checksum_mismatch');
    expect((await f.api.get('/api/extensions')).body.extensions.map((e: any) => e.name)).to.deep.equal(['hello']);
    const missingVersion = await f.api.post('/api/extensions', { slug: 'nosum', version: '9.9.9', allow_unverified: true });
    expect(missingVersion.status).to.equal(404);

    const accepted = await f.api.post('/api/extensions', { slug: 'nosum', allow_unverified: true });
    expect(accepted.status, JSON.stringify(accepted.body)).to.equal(201);
    expect(accepted.body.extension.trust).to.include({ decision: 'allowed_unverified', checksum_verified: false, allow_unverified: true });
    expect(accepted.body.extension.trust.warnings.map((w: any) => w.code)).to.deep.equal(['checksum_unverified']);
  });

  it('updates to the source\'s newer version: check_only says so and changes nothing, then the update restarts the daemon on the new version', async () => {
    await publish([{ name: 'hello', version: '1.0.0' }]);
    expect((await f.api.post('/api/extensions', { slug: 'hello' })).status).to.equal(201);
    const v1 = await running(f.api, 'hello');
    expect((await f.api.put('/api/extensions/hello', {})).body.update).to.include({ status: 'already up to date', current_version: '1.0.0', latest_version: '1.0.0' });

    await publish([{ name: 'hello', version: '1.1.0' }]);
    const check = await f.api.put('/api/extensions/hello', { check_only: true });
    expect(check.body.update).to.include({ status: 'update available', current_version: '1.0.0', latest_version: '1.1.0', slug: 'hello', registry: 'local' });
    expect((await f.api.get('/api/extensions/hello')).body.extension.version).to.equal('1.0.0');

    const up = await f.api.put('/api/extensions/hello', {});
    expect(up.status, JSON.stringify(up.body)).to.equal(200);
    expect(up.body.update).to.include({ status: 'updated', current_version: '1.0.0', latest_version: '1.1.0' });
    const v2 = await eventually(async () => {
      const x = await running(f.api, 'hello');
      expect(x.version).to.equal('1.1.0');
      expect(x.pid).to.not.equal(v1.pid);
      return x;
    });
    expect(v2.provenance.checksum_sha256).to.not.equal(v1.provenance.checksum_sha256);
    const events = (await f.service.bus!.range('', 10_000)).filter((e) => e.type.startsWith('extension.')).map((e) => e.type);
    expect(events).to.deep.equal(['extension.installed', 'extension.updated']);
    const wrongName = await f.api.put('/api/extensions/nope', {});
    expect(wrongName.status).to.equal(404);
  });
});
