import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { decodeManifest, parseManifestFile } from '../../codecs/extension-manifest.ts';
import { dirChecksum, parseChecksum } from '../../runtime/extensions/artifacts.ts';
import { planChildren } from '../../runtime/extensions/children.ts';
import { childId } from '../../controllers/bundle-activation.ts';
import type { ExtensionRecord } from '../../runtime/extensions/types.ts';
import { HELLO } from './helpers.ts';

const hello = () => JSON.parse(readFileSync(path.join(HELLO, 'extension.json'), 'utf8'));
const minimal = { name: 'mini', version: '0.1.0' };

describe('Extension manifest codec (no Redis)', () => {
  const refused: { reason: string; given: unknown; want: string[] }[] = [
    { reason: 'name and version are required', given: {}, want: ['name', 'version'] },
    { reason: 'a name is lower case, a letter first, without "_"', given: { ...minimal, name: 'My_Ext' }, want: ['name'] },
    { reason: 'a name is at most 64 characters', given: { ...minimal, name: `a${'b'.repeat(64)}` }, want: ['name'] },
    { reason: 'an unknown field is named, not ignored', given: { ...minimal, deamon: {} }, want: ['deamon'] },
    { reason: 'an unknown field of a shipped resource is named under its section', given: { ...minimal, resources: { agents: [{ name: 'a', prompt: 'p', promt: 'x' }] } }, want: ['resources.agents[0].promt'] },
    { reason: 'a daemon needs a command; durations must be durations in range', given: { ...minimal, daemon: { command: ' ', health_interval: 'soon', shutdown_timeout: '1h' } }, want: ['daemon.command', 'daemon.health_interval', 'daemon.shutdown_timeout'] },
    { reason: 'a secret-like variable belongs in secret_env, and secret_env holds refs', given: { ...minimal, daemon: { command: 'node', env: { API_TOKEN: 'x' }, secret_env: { KEY: 'plain' } } }, want: ['daemon.env.API_TOKEN', 'daemon.secret_env.KEY'] },
    { reason: 'requires_env names must be given by the daemon', given: { ...minimal, requires_env: ['NEEDED'] }, want: ['requires_env'] },
    { reason: 'a tool name is one tool id segment, declared once', given: { ...minimal, daemon: { command: 'node', tools: [{ name: 'Bad-Name' }, { name: 'ok' }, { name: 'ok' }] } }, want: ['daemon.tools[0].name', 'daemon.tools[2].name'] },
    { reason: 'a skill path stays inside the extension', given: { ...minimal, resources: { skills: ['../outside', '/abs'] } }, want: ['resources.skills[0]', 'resources.skills[1]'] },
    { reason: 'a shipped bundle is decoded by the bundle codec (a profile is required)', given: { ...minimal, resources: { bundles: [{ name: 'b', profiles: [] }] } }, want: ['resources.bundles[0].profiles'] },
    { reason: 'a shipped agent is decoded by the agent codec', given: { ...minimal, resources: { agents: [{ prompt: 'no name' }] } }, want: ['resources.agents[0].name'] },
  ];
  for (const t of refused) {
    it(`refuses: ${t.reason}`, () => {
      const r = decodeManifest(t.given);
      expect(r.ok).to.equal(false);
      if (!r.ok) for (const p of t.want) expect(r.errors.map((e) => e.path), JSON.stringify(r.errors)).to.include(p);
    });
  }

  it('decodes the example to a canonical form (defaults, sorted sets) and decoding that again changes nothing', () => {
    const r = decodeManifest({ ...hello(), permissions: ['tools.publish', 'network', 'network'] });
    expect(r.ok).to.equal(true);
    if (!r.ok) return;
    expect(r.manifest.permissions).to.deep.equal(['network', 'tools.publish']);
    expect(r.manifest.daemon).to.include({ command: 'node', health_interval: '1s', shutdown_timeout: '3s' });
    expect(r.manifest.daemon!.tools.map((t) => t.name)).to.deep.equal(['environment', 'greet']);
    expect(r.manifest.resources.bundles[0]).to.include({ name: 'greeter' });
    const again = decodeManifest(r.manifest);
    expect(again).to.deep.equal(r);
    expect(decodeManifest({ ...minimal, daemon: { command: 'x' } })).to.have.nested.property('manifest.daemon.health_interval', '10s');
  });

  it('reads YAML manifests as JSON ones, and names a file that does not parse', () => {
    const y = parseManifestFile('extension.yaml', 'name: mini\nversion: 0.1.0\nprovides: [b, a]\n');
    expect(y.ok && y.manifest.provides).to.deep.equal(['a', 'b']);
    const broken = parseManifestFile('extension.json', '{"name":');
    expect(broken.ok).to.equal(false);
    if (!broken.ok) expect(broken.errors[0].path).to.equal('manifest');
    // the place of the fault, as line and column, in JSON as in YAML (not only JSON's byte offset)
    const json = parseManifestFile('extension.json', '{\n"name": "x",\n"version" 1}\n');
    expect(json.ok ? '' : json.errors[0].message).to.include('(line 3, column 11)');
    const yaml = parseManifestFile('extension.yaml', 'name: x\nversion: 1\ndescription: a: b\n');
    expect(yaml.ok ? '' : yaml.errors[0].message).to.include('at line 3');
  });

  it('plans records with stable ids: the bundle as the bundle syncer names it, the tool as ext__<name>__<tool>', () => {
    const r = decodeManifest(hello());
    if (!r.ok) throw new Error('example does not decode');
    const rec = { name: 'hello', manifest: r.manifest, skills: { 'skills/greeting': { name: 'greeting', description: 'd' } } } as unknown as ExtensionRecord;
    const plan = planChildren(rec, '/data/extensions/abc');
    expect(plan.ok).to.equal(true);
    if (!plan.ok) return;
    expect(plan.children.map((c) => `${c.kind} ${c.id}`).sort()).to.deep.equal([
      `bundle ${childId('bun_', 'hello', 'greeter')}`, `skill ${childId('exs_', 'hello', 'greeting')}`, 'tool ext__hello__environment', 'tool ext__hello__greet',
    ].sort());
    expect(plan.children.find((c) => c.kind === 'skill')!.spec).to.include({ dir: '/data/extensions/abc/skills/greeting', installed_from_extension: 'hello' });
    expect(plan.children.find((c) => c.id === 'ext__hello__greet')!.spec).to.nested.include({ 'backend.kind': 'extension_host', 'backend.extension_id': 'hello', 'backend.handler': 'greet' });
    expect(planChildren(rec, '/x')).to.deep.equal(planChildren(rec, '/x'));
  });

  it('says what a field must be in whole sentences (a custom rule keeps its "must")', () => {
    const r = decodeManifest({ ...minimal, daemon: { command: 'node', env: { A: 1 } } });
    expect(r.ok).to.equal(false);
    expect(!r.ok && r.errors).to.deep.include({ path: 'daemon.env', message: 'must be an object of strings' });
    const t = decodeManifest({ ...minimal, daemon: { command: 'node', health_interval: 5 } });
    expect(!t.ok && t.errors[0].message).to.match(/^must be a `string` type/);
  });

  it('reads a checksum as 64 hex after an optional sha256: in any case (as sha256sum, shasum or Get-FileHash print it)', () => {
    const hex = 'ab'.repeat(32);
    for (const given of [hex, `sha256:${hex}`, `SHA256:${hex.toUpperCase()}`, ` Sha256:${hex} `]) expect(parseChecksum(given), given).to.equal(hex);
    for (const given of ['', 'sha256:', `sha1:${hex}`, hex.slice(1), `${hex}0`, `md5:${hex}`]) expect(parseChecksum(given), given).to.equal(undefined);
  });

  it('computes a directory\'s checksum exactly as the documented shell line does', async () => {
    const shell = execFileSync('bash', ['-c', 'find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-64'], { cwd: HELLO }).toString().trim();
    expect(await dirChecksum(HELLO, 10_000)).to.equal(shell);
  });
});
