import { expect } from 'chai';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Service } from '../../runtime/service.ts';
import { bundleSpec } from '../fixtures.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';

const VALID = `---
version: 1
enabled: true
summary: "Reorient, then check the queue."
preferences:
  min_interval: "45m"
  active_hours:
    - timezone: "America/Sao_Paulo"
      start: "08:00"
      end: "20:00"
  quiet_windows:
    - timezone: "UTC"
      start: "22:00"
      end: "06:00"
context:
  include: [self, session_health, task]
---
When woken, read your inbox before acting.
If nothing is claimable, say so briefly.
`;

describe('Agent heartbeat: HEARTBEAT.md parsing, diagnostics and compare-and-delete (HTTP)', () => {
  const redis = new RedisServer();
  let service: Service;
  let api: Client;
  let root: string;
  let dataDir: string;
  let ws: { id: string };
  const file = (agent = 'scripted') => path.join(root, '.svc', 'agents', agent, 'HEARTBEAT.md');
  const write = (text: string, agent = 'scripted') => {
    mkdirSync(path.dirname(file(agent)), { recursive: true });
    writeFileSync(file(agent), text);
  };
  const get = async (agent = 'scripted') => (await api.get(`/api/agents/${agent}/heartbeat?workspace_id=${ws.id}`)).body;

  before(async () => { await redis.start(); });
  after(async () => { await redis.destroy(); });
  beforeEach(async () => {
    await redis.flush();
    root = mkdtempSync(path.join(os.tmpdir(), 'svc-hb-'));
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-hb-data-'));
    service = await startService(redis.url, { DATA_DIR: dataDir });
    api = new Client(service.url);
    ws = (await api.post('/api/workspaces', { root_dir: root })).body.workspace;
  });
  afterEach(async () => {
    await service.stop();
    rmSync(root, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a missing file is validation_status missing, present false, no diagnostics; an unknown agent is 404', async () => {
    const hb = await get();
    expect(hb).to.include({ agent_name: 'scripted', present: false, active: false, validation_status: 'missing', schema_version: 1, guidance_markdown: '' });
    expect(hb.diagnostics).to.deep.equal([]);
    expect(hb.limits).to.deep.equal({ context_projection_bytes: 4096, max_body_bytes: 32768, max_bytes: 65536 });
    expect(hb.source_path).to.equal(file());
    expect((await api.get('/api/agents/ghost/heartbeat')).status).to.equal(404);
  });

  it('parses a valid file: frontmatter, guidance, digest, preferences, config and prompt projection', async () => {
    write(VALID);
    const hb = await get();
    expect(hb).to.include({ present: true, valid: true, active: true, enabled: true, validation_status: 'valid', summary: 'Reorient, then check the queue.' });
    expect(hb.guidance_markdown).to.equal('When woken, read your inbox before acting.\nIf nothing is claimable, say so briefly.');
    expect(hb.digest).to.match(/^sha256:[0-9a-f]{64}$/);
    expect(hb.frontmatter).to.deep.include({ version: 1, enabled: true, context: { include: ['self', 'session_health', 'task'] } });
    expect(hb.preferences.active_hours).to.deep.equal([{ timezone: 'America/Sao_Paulo', start: '08:00', end: '20:00' }]);
    expect(hb.preferences).to.include({ min_interval: '45m' });
    expect(hb.diagnostics).to.deep.equal([]);
    expect(hb.config_provenance.subset).to.include({ enabled: true, max_body_bytes: 32768, min_interval: '5m', default_interval: '30m', max_wakes_per_cycle: 25 });
    expect(hb.config_provenance.digest).to.equal(hb.config_digest);
    expect(hb.config_provenance.layers.max_body_bytes).to.equal('builtin');
    expect(hb.prompt).to.include({ active: true, truncated: false, max_bytes: 4096, digest: hb.digest, guidance_markdown: hb.guidance_markdown });
  });

  it('applies global then workspace configuration with provenance, and truncates the prompt to its budget', async () => {
    writeFileSync(path.join(dataDir, 'config.yaml'), 'heartbeat:\n  min_interval: 1h\n  context_projection_bytes: 1200\n');
    mkdirSync(path.join(root, '.svc'), { recursive: true });
    writeFileSync(path.join(root, '.svc', 'config.yaml'), 'heartbeat:\n  max_wakes_per_cycle: 3\n  wake_cooldown: nonsense\n');
    write(VALID.replace('If nothing', `${'Long guidance. '.repeat(200)}\nIf nothing`));
    const hb = await get();
    expect(hb.config_provenance.subset).to.include({ min_interval: '1h', context_projection_bytes: 1200, max_wakes_per_cycle: 3, wake_cooldown: '1m' });
    expect(hb.config_provenance.layers).to.include({ min_interval: 'global', context_projection_bytes: 'global', max_wakes_per_cycle: 'workspace', wake_cooldown: 'builtin' });
    expect(hb.diagnostics.map((d: any) => [d.code, d.field, d.severity])).to.deep.include.members([
      ['heartbeat_config_invalid', 'heartbeat.wake_cooldown', 'warning'],
      ['heartbeat_preference_clamped', 'preferences.min_interval', 'warning'],
    ]);
    expect(hb.preferences.min_interval).to.equal('1h');
    expect(hb.valid).to.equal(true);
    expect(hb.prompt.truncated).to.equal(true);
    expect(Buffer.byteLength(JSON.stringify(hb.prompt))).to.be.at.most(1200);
    expect(hb.guidance_markdown.length).to.be.greaterThan(hb.prompt.guidance_markdown.length);
  });

  it('diagnostics point at the line and column in the file', async () => {
    write('---\nversion: 1\nsummary: "x"\npreferences:\n  active_hours:\n    - timezone: "Mars/Olympus"\n      start: "8am"\n      end: "20:00"\nlease_duration: 5m\n---\nbody\n');
    const hb = await get();
    expect(hb).to.include({ valid: false, active: false, validation_status: 'invalid', guidance_markdown: '' });
    const by = (code: string) => hb.diagnostics.find((d: any) => d.code === code);
    expect(by('heartbeat_invalid_timezone')).to.include({ line: 6, column: 17, field: 'preferences.active_hours[0].timezone', severity: 'error', section: 'frontmatter', owner_surface: 'HEARTBEAT.md', source_path: file() });
    expect(by('heartbeat_invalid_time_window')).to.include({ line: 7, column: 14, field: 'preferences.active_hours[0].start' });
    expect(by('heartbeat_forbidden_field')).to.include({ line: 9, column: 1, field: 'lease_duration' });
    expect(by('heartbeat_forbidden_field').message).to.include('task runs');

    write('---\nversion: 1\nsummary: [unclosed\n---\nbody\n');
    const syntax = (await get()).diagnostics[0];
    expect(syntax).to.include({ code: 'heartbeat_malformed_frontmatter', severity: 'error' });
    expect(syntax.line).to.be.within(3, 5);

    write('---\nversion: 2\nenabled: maybe\n---\n');
    const types = (await get()).diagnostics.map((d: any) => [d.field, d.line, d.column]);
    expect(types).to.deep.equal([['version', 2, 10], ['enabled', 3, 10]]);
  });

  it('a locally disabled policy is valid but inactive', async () => {
    write('---\nenabled: false\n---\nguidance\n');
    expect(await get()).to.include({ valid: true, enabled: false, active: false, validation_status: 'inactive' });
  });

  it('DELETE with a stale digest is 409 and keeps the file; with the current digest removes it', async () => {
    write(VALID);
    const { digest } = await get();
    const stale = await api.delete(`/api/agents/scripted/heartbeat?workspace_id=${ws.id}`, { expected_digest: 'sha256:0000' });
    expect(stale.status).to.equal(409);
    expect(stale.body.diagnostic.code).to.equal('heartbeat_conflict');
    expect(readFileSync(file(), 'utf8')).to.equal(VALID);
    const bad = await api.delete(`/api/agents/scripted/heartbeat?workspace_id=${ws.id}`, {});
    expect(bad.status).to.equal(422);
    expect(bad.body.diagnostic.evidence).to.have.key('expected_digest');
    const ifMatch = await api.call('DELETE', `/api/agents/scripted/heartbeat?workspace_id=${ws.id}`, { expected_digest: digest }, { 'if-match': digest });
    expect(ifMatch.status).to.equal(400);
    expect(existsSync(file())).to.equal(true);
    const ok = await api.delete(`/api/agents/scripted/heartbeat?workspace_id=${ws.id}`, { expected_digest: digest });
    expect(ok.status).to.equal(200);
    expect(ok.body.heartbeat).to.include({ present: false, validation_status: 'missing' });
    expect(existsSync(file())).to.equal(false);
    expect((await api.delete(`/api/agents/scripted/heartbeat?workspace_id=${ws.id}`, { expected_digest: digest })).status).to.equal(404);
  });

  it('a package agent reads its agent.heartbeat record, which only its activation may remove', async () => {
    const spec = bundleSpec();
    (spec.bundle.profiles[0].agents[0] as any).heartbeat = { source_path: 'HEARTBEAT.md', body: '---\nsummary: "desk duty"\n---\nCheck the desk.\n' };
    expect((await api.put('/api/resources/bundle/bun-support?wait=true', { scope: { kind: 'global' }, spec, expected_version: 0 })).status).to.equal(201);
    expect((await api.post('/api/bundles/activations', { extension_name: 'acme', bundle_name: 'support', profile_name: 'default' })).status).to.equal(201);
    const hb = await eventually(async () => {
      const res = await api.get('/api/agents/triage/heartbeat');
      expect(res.body.present).to.equal(true);
      return res.body;
    }, 10_000, 100);
    expect(hb).to.include({ valid: true, summary: 'desk duty', guidance_markdown: 'Check the desk.', validation_status: 'valid' });
    expect(hb.source_path).to.match(/HEARTBEAT\.md$/);
    const del = await api.delete('/api/agents/triage/heartbeat', { expected_digest: hb.digest });
    expect(del.status).to.equal(409);
    expect(del.body.diagnostic.code).to.equal('heartbeat_owned');
    expect((await api.get('/api/agents/triage/heartbeat')).body.present).to.equal(true);
  });
});
