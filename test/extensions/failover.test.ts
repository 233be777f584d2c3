import { expect } from 'chai';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ProcessCluster } from '../helpers/process.ts';
import { Client, eventually } from '../helpers/service.ts';
import { alive, HELLO, install, running, TRUSTED } from './helpers.ts';

describe('Extensions: the runtime that holds a daemon is SIGKILLed (real processes)', function () {
  this.timeout(120_000);
  // NOTE: a 2 s lease: another runtime starts the daemon within the lease plus one tick (about 3 s here).
  const cluster = new ProcessCluster('extfail', { EXTENSION_LEASE: '2s' }).install();
  const dirs: string[] = [];
  after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });
  const dataDir = () => { const d = mkdtempSync(path.join(os.tmpdir(), 'extfail-data-')); dirs.push(d); return d; };

  it('starts the daemon on the surviving runtime (from the artifact store, on an empty disk), leaves no process of the dead one, and its tool answers through the API replica', async () => {
    const apiData = dataDir();
    writeFileSync(path.join(apiData, 'config.yaml'), TRUSTED);
    const apiProc = await cluster.start('api,controller', { DATA_DIR: apiData });
    const api = new Client(apiProc.url);
    const r1Data = dataDir();
    const r1 = await cluster.start('runtime', { DATA_DIR: r1Data });
    await install(api, HELLO);
    const first = await running(api, 'hello');
    expect(existsSync(path.join(r1Data, 'extensions', first.provenance.checksum_sha256, 'extension.json'))).to.equal(true);
    const viaR1 = await eventually(async () => {
      const r = await api.post('/api/tools/ext__hello__greet/invoke', { input: { name: 'Ada' } });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      return r.body.result.structured;
    });
    expect(viaR1.pid).to.equal(first.pid);

    const r2Data = dataDir();
    await cluster.start('runtime', { DATA_DIR: r2Data });
    await r1.kill('SIGKILL');
    const moved = await eventually(async () => {
      const x = await running(api, 'hello');
      expect(x.daemon.owner).to.not.equal(first.daemon.owner);
      return x;
    }, 30_000);
    expect(moved.pid).to.not.equal(first.pid);
    expect(existsSync(path.join(r2Data, 'extensions', first.provenance.checksum_sha256, 'extension.json'))).to.equal(true);
    // NOTE: the dead runtime's daemon saw its stdin close and exited: no process is left behind.
    await eventually(async () => expect(alive(first.pid)).to.equal(false), 10_000);
    const viaR2 = await eventually(async () => {
      const r = await api.post('/api/tools/ext__hello__greet/invoke', { input: { name: 'Bo' } });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      return r.body.result;
    });
    expect(viaR2.content[0].text).to.equal('Hello, Bo!');
    expect(viaR2.structured.pid).to.equal(moved.pid);
  });

  it('an API replica with its own DATA_DIR serves the extension\'s skill from its own unpacked tree', async () => {
    const aData = dataDir();
    const a = new Client((await cluster.start('api,controller', { DATA_DIR: aData })).url);
    // NOTE: the processes share one Redis: the example may be installed by the test before.
    await a.delete('/api/extensions/hello');
    const ext = await install(a, HELLO);
    await eventually(async () => expect((await a.get('/api/skills/greeting')).status).to.equal(200));
    const bData = dataDir();
    const b = new Client((await cluster.start('api', { DATA_DIR: bData })).url);
    const skill = (await b.get('/api/skills/greeting')).body.skill;
    expect(skill.diagnostics[0], JSON.stringify(skill.diagnostics)).to.include({ state: 'valid' });
    expect(skill).to.include({ enabled: true, dir: path.join(bData, 'extensions', ext.provenance.checksum_sha256, 'skills', 'greeting') });
    const content = await b.get('/api/skills/greeting/content');
    expect(content.status).to.equal(200);
    expect(JSON.stringify(content.body)).to.include('Call the `ext__hello__greet` tool');
  });
});
