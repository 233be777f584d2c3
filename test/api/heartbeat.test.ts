import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { bundleSpec } from '../fixtures.ts';
import { eventually } from '../helpers/service.ts';
import { ServiceFixture } from '../helpers/fixture.ts';

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

/** The fields of Heartbeat and HeartbeatPrompt: every one is always present. */
const HEARTBEAT_FIELDS = ['active', 'agent_name', 'config_digest', 'config_provenance', 'created_at', 'diagnostics', 'digest', 'enabled', 'frontmatter',
  'guidance_markdown', 'limits', 'preferences', 'present', 'prompt', 'schema_version', 'snapshot_id', 'source_path', 'summary', 'valid', 'validation_status'];
const PROMPT_FIELDS = ['active', 'config_digest', 'context', 'diagnostics', 'digest', 'guidance_markdown', 'max_body_bytes', 'max_bytes', 'preferences', 'source_path', 'summary', 'truncated'];

describe('Agent heartbeat: HEARTBEAT.md parsing, diagnostics and compare-and-delete (HTTP)', () => {
  const f = new ServiceFixture({ env: (dirs) => ({ SVC_CONFIG_FILE: path.join(dirs.dataDir, 'global-settings.yaml') }) }).install();
  const file = (agent = 'scripted') => path.join(f.root, '.svc', 'agents', agent, 'HEARTBEAT.md');
  const write = (text: string, agent = 'scripted') => {
    mkdirSync(path.dirname(file(agent)), { recursive: true });
    writeFileSync(file(agent), text);
  };
  const get = async (agent = 'scripted') => (await f.api.get(`/api/agents/${agent}/heartbeat?workspace_id=${f.ws.id}`)).body;
  const globalConfigFile = () => path.join(f.dataDir, 'global-settings.yaml');
  const workspaceConfig = (yaml: string) => {
    mkdirSync(path.join(f.root, '.svc'), { recursive: true });
    writeFileSync(path.join(f.root, '.svc', 'config.yaml'), yaml);
  };

  it('a missing file is validation_status missing, present false, no diagnostics; an unknown agent is 404', async () => {
    const hb = await get();
    expect(hb).to.include({ agent_name: 'scripted', present: false, valid: true, active: false, enabled: true, validation_status: 'missing', schema_version: 1, guidance_markdown: '', created_at: '' });
    expect(hb.diagnostics).to.deep.equal([]);
    expect(hb.limits).to.deep.equal({ context_projection_bytes: 4096, max_body_bytes: 32768, max_bytes: 65536 });
    expect(hb.source_path).to.equal(file());
    expect(hb.prompt).to.include({ active: false, truncated: false, guidance_markdown: '' });
    expect(hb).to.have.all.keys(HEARTBEAT_FIELDS);
    expect(hb.prompt).to.have.all.keys(PROMPT_FIELDS);
    expect(hb.frontmatter).to.have.all.keys('context', 'enabled', 'preferences', 'summary', 'version');
    expect(hb.preferences).to.have.all.keys('active_hours', 'context', 'min_interval', 'quiet_windows');
    const unknown = await f.api.get(`/api/agents/ghost/heartbeat?workspace_id=${f.ws.id}`);
    expect(unknown.status).to.equal(404);
    expect(unknown.body.diagnostic.code).to.equal('agent_not_found');
    expect((await f.api.get('/api/agents/scripted/heartbeat?workspace_id=nowhere')).status).to.equal(404);
  });

  it('parses a valid file: frontmatter, guidance, digest of the bytes, preferences, config and prompt projection', async () => {
    write(VALID);
    const hb = await get();
    expect(hb).to.include({ present: true, valid: true, active: true, enabled: true, validation_status: 'valid', summary: 'Reorient, then check the queue.' });
    expect(hb.guidance_markdown).to.equal('When woken, read your inbox before acting.\nIf nothing is claimable, say so briefly.');
    expect(hb.digest).to.equal(`sha256:${createHash('sha256').update(readFileSync(file())).digest('hex')}`);
    expect(hb.frontmatter).to.deep.include({ version: 1, enabled: true, context: { include: ['self', 'session_health', 'task'] } });
    expect(hb.preferences.active_hours).to.deep.equal([{ timezone: 'America/Sao_Paulo', start: '08:00', end: '20:00' }]);
    expect(hb.preferences.quiet_windows).to.deep.equal([{ timezone: 'UTC', start: '22:00', end: '06:00' }]);
    expect(hb.preferences).to.include({ min_interval: '45m' });
    expect(hb.diagnostics).to.deep.equal([]);
    expect(hb.config_provenance.subset).to.include({ enabled: true, max_body_bytes: 32768, min_interval: '5m', default_interval: '30m', max_wakes_per_cycle: 25 });
    expect(hb.config_provenance.digest).to.equal(hb.config_digest);
    expect(hb.config_provenance.layers.max_body_bytes).to.equal('builtin');
    expect(hb.prompt).to.include({ active: true, truncated: false, max_bytes: 4096, digest: hb.digest, guidance_markdown: hb.guidance_markdown });
  });

  it('applies global then workspace configuration with provenance, and truncates the prompt to its budget', async () => {
    writeFileSync(globalConfigFile(), 'heartbeat:\n  min_interval: 1h\n  default_interval: 2h\n  context_projection_bytes: 1200\n');
    workspaceConfig('heartbeat:\n  max_wakes_per_cycle: 3\n  wake_cooldown: nonsense\n');
    write(VALID.replace('If nothing', `${'Long guidance. '.repeat(200)}\nIf nothing`));
    const hb = await get();
    expect(hb.config_provenance.subset).to.include({ min_interval: '1h', default_interval: '2h', context_projection_bytes: 1200, max_wakes_per_cycle: 3, wake_cooldown: '1m' });
    expect(hb.config_provenance.layers).to.include({ min_interval: 'global', context_projection_bytes: 'global', max_wakes_per_cycle: 'workspace', wake_cooldown: 'builtin' });
    expect(hb.limits).to.include({ context_projection_bytes: 1200 });
    const bad = hb.diagnostics.find((d: any) => d.code === 'heartbeat_config_invalid');
    expect(bad).to.include({ field: 'heartbeat.wake_cooldown', severity: 'warning', line: 3, column: 18, source_path: path.join(f.root, '.svc', 'config.yaml') });
    expect(hb.diagnostics.find((d: any) => d.code === 'heartbeat_preference_clamped')).to.include({ field: 'preferences.min_interval', severity: 'warning', line: 6 });
    expect(hb.preferences.min_interval).to.equal('1h');
    expect(hb).to.include({ valid: true, validation_status: 'valid' });
    expect(hb.prompt.truncated).to.equal(true);
    expect(Buffer.byteLength(JSON.stringify(hb.prompt))).to.be.at.most(1200);
    expect(hb.guidance_markdown.length).to.be.greaterThan(hb.prompt.guidance_markdown.length);
    expect(hb.guidance_markdown.startsWith(hb.prompt.guidance_markdown)).to.equal(true);
  });

  it('a configuration layer that breaks a rule between two settings loses them, and says where', async () => {
    writeFileSync(globalConfigFile(), 'heartbeat:\n  context_projection_bytes: 2000\n');
    workspaceConfig('heartbeat:\n  max_body_bytes: 1500\n  default_interval: 1m\n  colour: blue\n');
    const hb = await get();
    expect(hb.config_provenance.subset).to.include({ context_projection_bytes: 2000, max_body_bytes: 32768, default_interval: '30m' });
    expect(hb.config_provenance.layers).to.include({ context_projection_bytes: 'global', max_body_bytes: 'builtin', default_interval: 'builtin' });
    expect(hb.diagnostics.map((d: any) => [d.field, d.line, d.column])).to.deep.equal([
      ['heartbeat.colour', 4, 3], ['heartbeat.max_body_bytes', 2, 19], ['heartbeat.default_interval', 3, 21],
    ]);
    expect(hb.valid).to.equal(true);
  });

  it('a guidance body over heartbeat.max_body_bytes is an error at the line where the body starts', async () => {
    workspaceConfig('heartbeat:\n  max_body_bytes: 200\n  context_projection_bytes: 150\n');
    write(`---\nsummary: "big"\n---\n${'x'.repeat(201)}\n`);
    const hb = await get();
    expect(hb).to.include({ present: true, valid: false, active: false, validation_status: 'invalid', guidance_markdown: '' });
    expect(hb.limits).to.deep.equal({ context_projection_bytes: 150, max_body_bytes: 200, max_bytes: 400 });
    expect(hb.diagnostics).to.have.length(1);
    expect(hb.diagnostics[0]).to.include({ code: 'heartbeat_body_too_large', severity: 'error', field: 'body', section: 'body', line: 4, column: 1 });
    write(`---\nsummary: "fits"\n---\n${'x'.repeat(150)}\n`);
    expect(await get()).to.include({ valid: true, validation_status: 'valid' });
  });

  it('diagnostics point at the line and column in the file', async () => {
    write('---\nversion: 1\nsummary: "x"\npreferences:\n  active_hours:\n    - timezone: "Mars/Olympus"\n      start: "8am"\n      end: "20:00"\nlease_duration: 5m\n---\nbody\n');
    const hb = await get();
    expect(hb).to.include({ present: true, valid: false, active: false, validation_status: 'invalid', guidance_markdown: '' });
    expect(hb.digest).to.match(/^sha256:[0-9a-f]{64}$/);
    const by = (code: string) => hb.diagnostics.find((d: any) => d.code === code);
    expect(by('heartbeat_invalid_timezone')).to.include({ line: 6, column: 17, field: 'preferences.active_hours[0].timezone', severity: 'error', section: 'frontmatter', owner_surface: 'HEARTBEAT.md', source_path: file() });
    expect(by('heartbeat_invalid_time_window')).to.include({ line: 7, column: 14, field: 'preferences.active_hours[0].start' });
    expect(by('heartbeat_forbidden_field')).to.include({ line: 9, column: 1, field: 'lease_duration' });
    expect(by('heartbeat_forbidden_field').message).to.include('task runs');
    expect(hb.prompt).to.include({ active: false, guidance_markdown: '' });

    write('---\nversion: 1\nsummary: @bad\n---\nbody\n');
    const syntax = await get();
    expect(syntax.diagnostics).to.have.length(1);
    expect(syntax.diagnostics[0]).to.include({ code: 'heartbeat_malformed_frontmatter', severity: 'error', line: 3, column: 10, source_path: file() });
    expect(syntax).to.include({ valid: false, validation_status: 'invalid' });

    write('---\nversion: 2\nenabled: maybe\n---\n');
    const types = (await get()).diagnostics.map((d: any) => [d.field, d.line, d.column]);
    expect(types).to.deep.equal([['version', 2, 10], ['enabled', 3, 10]]);
  });

  it('a policy switched off by its file or by the configuration is valid but inactive', async () => {
    write('---\nenabled: false\n---\nguidance\n');
    const local = await get();
    expect(local).to.include({ valid: true, enabled: true, active: false, validation_status: 'inactive', guidance_markdown: 'guidance' });
    expect(local.frontmatter.enabled).to.equal(false);
    write('---\nenabled: true\n---\nguidance\n');
    workspaceConfig('heartbeat:\n  enabled: false\n');
    const off = await get();
    expect(off).to.include({ valid: true, enabled: false, active: false, validation_status: 'inactive' });
    expect(off.frontmatter.enabled).to.equal(true);
    expect(off.config_provenance.layers.enabled).to.equal('workspace');
  });

  it('DELETE with a stale digest is 409 and keeps the file; with the current digest removes it', async () => {
    write(VALID);
    const { digest } = await get();
    const stale = await f.api.delete(`/api/agents/scripted/heartbeat?workspace_id=${f.ws.id}`, { expected_digest: 'sha256:0000' });
    expect(stale.status).to.equal(409);
    expect(stale.body.diagnostic.code).to.equal('heartbeat_conflict');
    expect(readFileSync(file(), 'utf8')).to.equal(VALID);
    for (const body of [{}, { expected_digest: 42 }]) {
      const bad = await f.api.delete(`/api/agents/scripted/heartbeat?workspace_id=${f.ws.id}`, body);
      expect(bad.status).to.equal(422);
      expect(bad.body.diagnostic.evidence).to.have.key('expected_digest');
    }
    const ifMatch = await f.api.call('DELETE', `/api/agents/scripted/heartbeat?workspace_id=${f.ws.id}`, { expected_digest: digest }, { 'if-match': digest });
    expect(ifMatch.status).to.equal(400);
    expect(existsSync(file())).to.equal(true);
    const ok = await f.api.delete(`/api/agents/scripted/heartbeat?workspace_id=${f.ws.id}`, { expected_digest: digest });
    expect(ok.status).to.equal(200);
    expect(ok.body.heartbeat).to.include({ present: false, validation_status: 'missing', source_path: file() });
    expect(existsSync(file())).to.equal(false);
    const again = await f.api.delete(`/api/agents/scripted/heartbeat?workspace_id=${f.ws.id}`, { expected_digest: digest });
    expect(again.status).to.equal(404);
    expect(again.body.diagnostic.code).to.equal('heartbeat_no_policy');
  });

  it('the workspace file wins over the user file in DATA_DIR, which applies without a workspace', async () => {
    const user = path.join(f.dataDir, 'agents', 'scripted', 'HEARTBEAT.md');
    mkdirSync(path.dirname(user), { recursive: true });
    writeFileSync(user, '---\nsummary: "user"\n---\nUser guidance.\n');
    expect((await f.api.get('/api/agents/scripted/heartbeat')).body).to.include({ summary: 'user', source_path: user });
    expect(await get()).to.include({ summary: 'user', source_path: user });
    write('---\nsummary: "workspace"\n---\nWorkspace guidance.\n');
    expect(await get()).to.include({ summary: 'workspace', source_path: file() });
    expect((await f.api.get('/api/agents/scripted/heartbeat')).body).to.include({ summary: 'user' });
  });

  it('a package agent reads only its agent.heartbeat record, which only its activation may change', async () => {
    const spec = bundleSpec();
    (spec.bundle.profiles[0].agents[0] as any).heartbeat = { source_path: 'HEARTBEAT.md', body: '---\nsummary: "desk duty"\n---\nCheck the desk.\n' };
    expect((await f.api.put('/api/resources/bundle/bun-support?wait=true', { scope: { kind: 'global' }, spec, expected_version: 0 })).status).to.equal(201);
    expect((await f.api.post('/api/bundles/activations', { extension_name: 'acme', bundle_name: 'support', profile_name: 'default' })).status).to.equal(201);
    const hb = await eventually(async () => {
      const res = await f.api.get('/api/agents/triage/heartbeat');
      expect(res.body.present).to.equal(true);
      return res.body;
    }, 10_000, 100);
    expect(hb).to.include({ valid: true, active: true, summary: 'desk duty', guidance_markdown: 'Check the desk.', validation_status: 'valid' });
    expect(hb.source_path).to.match(/^\.svc\/bundles\/.+\/agents\/triage\/HEARTBEAT\.md$/);
    expect(hb.digest).to.equal(`sha256:${createHash('sha256').update('---\nsummary: "desk duty"\n---\nCheck the desk.\n').digest('hex')}`);
    expect(hb.diagnostics).to.deep.equal([]);

    // NOTE: a workspace file does not override what the package ships; it is reported and left alone.
    write('---\nsummary: "local"\n---\nLocal.\n', 'triage');
    const shadowed = await get('triage');
    expect(shadowed).to.include({ summary: 'desk duty', source_path: hb.source_path, digest: hb.digest });
    expect(shadowed.diagnostics).to.have.length(1);
    expect(shadowed.diagnostics[0]).to.include({ code: 'heartbeat_file_ignored', severity: 'info', source_path: file('triage'), line: 1, column: 1 });

    const del = await f.api.delete(`/api/agents/triage/heartbeat?workspace_id=${f.ws.id}`, { expected_digest: hb.digest });
    expect(del.status).to.equal(409);
    expect(del.body.diagnostic.code).to.equal('heartbeat_owned');
    expect(existsSync(file('triage'))).to.equal(true);
    expect((await f.api.get('/api/agents/triage/heartbeat')).body).to.include({ present: true, summary: 'desk duty' });
  });

  it('a package agent whose package ships no HEARTBEAT.md is missing, and still read-only', async () => {
    expect((await f.api.put('/api/resources/bundle/bun-support?wait=true', { scope: { kind: 'global' }, spec: bundleSpec(), expected_version: 0 })).status).to.equal(201);
    expect((await f.api.post('/api/bundles/activations', { extension_name: 'acme', bundle_name: 'support', profile_name: 'default' })).status).to.equal(201);
    const hb = await eventually(async () => {
      const res = await f.api.get('/api/agents/triage/heartbeat');
      expect(res.status).to.equal(200);
      return res.body;
    }, 10_000, 100);
    expect(hb).to.include({ present: false, valid: true, validation_status: 'missing' });
    expect(hb.source_path).to.match(/^\.svc\/bundles\/.+\/agents\/triage\/HEARTBEAT\.md$/);
    const del = await f.api.delete('/api/agents/triage/heartbeat', { expected_digest: hb.digest });
    expect(del.status).to.equal(409);
    expect(del.body.diagnostic.code).to.equal('heartbeat_owned');
  });
});
