import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PathConfinement, pathFieldsOf } from '../../runtime/security/paths.ts';
import type { SecurityConfig } from '../../runtime/security/types.ts';

describe('PathConfinement: the one rule for every path a record or a name makes the service open', () => {
  // NOTE: realpath, because os.tmpdir() may itself be a symlink and the rule judges resolved paths.
  const base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'svc-paths-')));
  const data = path.join(base, 'data');
  const root = path.join(base, 'root');
  const outside = path.join(base, 'outside');
  const bundled = path.join(base, 'bundled');
  const tokens = path.join(root, 'tokens.yaml');
  const config = (over: Partial<SecurityConfig> = {}): SecurityConfig => ({
    authMode: 'token', execAllowlist: [], secretEnvAllowlist: [], allowedOrigins: [], allowedHosts: [],
    workspaceRoots: [root], dataDir: data, secretFiles: [tokens], ...over,
  });

  before(() => {
    for (const d of [path.join(data, 'skills', 's'), path.join(data, 'agents', 'a'), path.join(data, 'workspaces', 'w'), path.join(data, 'redis'), path.join(root, 'proj'), outside, path.join(bundled, 'b')]) mkdirSync(d, { recursive: true });
    writeFileSync(tokens, 'tokens: []\n');
    writeFileSync(path.join(root, 'proj', 'SKILL.md'), '---\nname: proj\n---\n');
    writeFileSync(path.join(outside, 'secret.txt'), 'outside');
    symlinkSync('/proc/self/environ', path.join(root, 'proj', 'environ-link'));
    symlinkSync(tokens, path.join(root, 'proj', 'tokens-link'));
    symlinkSync(outside, path.join(root, 'proj', 'to-outside'));
    symlinkSync(path.join(data, 'redis'), path.join(root, 'proj', 'to-redis'));
    linkSync(tokens, path.join(root, 'proj', 'tokens-hardlink'));
    execFileSync('mkfifo', [path.join(root, 'proj', 'fifo')]);
  });
  after(() => rmSync(base, { recursive: true, force: true }));

  describe('refusal', () => {
    const table: { reason: string; given: { path: string; config?: Partial<SecurityConfig> }; want: RegExp | undefined }[] = [
      { reason: 'a file inside WORKSPACE_ROOTS is allowed', given: { path: path.join(root, 'proj', 'SKILL.md') }, want: undefined },
      { reason: 'a missing file inside WORKSPACE_ROOTS is judged through its parent', given: { path: path.join(root, 'proj', 'new', 'SKILL.md') }, want: undefined },
      { reason: 'DATA_DIR/skills is the service\'s own skill directory', given: { path: path.join(data, 'skills', 's', 'SKILL.md') }, want: undefined },
      { reason: 'DATA_DIR/agents holds HEARTBEAT.md and agent skills', given: { path: path.join(data, 'agents', 'a', 'HEARTBEAT.md') }, want: undefined },
      { reason: 'DATA_DIR/workspaces is the default workspace root', given: { path: path.join(data, 'workspaces', 'w') }, want: undefined },
      { reason: 'the bundled skills directory is allowed', given: { path: path.join(bundled, 'b', 'SKILL.md') }, want: undefined },
      { reason: 'a relative path is refused: it would resolve against the process\'s cwd', given: { path: 'proj/SKILL.md' }, want: /absolute/ },
      { reason: '/proc is never readable', given: { path: '/proc/self/environ' }, want: /under \/proc/ },
      { reason: '/sys is never readable', given: { path: '/sys/kernel' }, want: /under \/sys/ },
      { reason: '/dev is never readable', given: { path: '/dev/null' }, want: /under \/dev/ },
      { reason: 'a symlink inside a root to /proc/self/environ is judged where it points', given: { path: path.join(root, 'proj', 'environ-link') }, want: /under \/proc/ },
      { reason: 'the tokens file is refused even inside a workspace root', given: { path: tokens }, want: /secret files/ },
      { reason: 'a symlink to the tokens file is refused', given: { path: path.join(root, 'proj', 'tokens-link') }, want: /secret files/ },
      { reason: 'DATA_DIR internals (redis data) are refused', given: { path: path.join(data, 'redis', 'appendonly.aof') }, want: /DATA_DIR/ },
      { reason: 'DATA_DIR itself is refused', given: { path: data }, want: /DATA_DIR/ },
      { reason: 'a symlink into DATA_DIR internals is refused', given: { path: path.join(root, 'proj', 'to-redis', 'dump.rdb') }, want: /DATA_DIR/ },
      { reason: 'a file outside every root is refused', given: { path: path.join(outside, 'secret.txt') }, want: /WORKSPACE_ROOTS/ },
      { reason: 'a symlink inside a root to a directory outside is refused', given: { path: path.join(root, 'proj', 'to-outside', 'secret.txt') }, want: /WORKSPACE_ROOTS/ },
      { reason: '.. cannot leave a root', given: { path: path.join(root, 'proj', '..', '..', 'outside', 'secret.txt') }, want: /WORKSPACE_ROOTS/ },
      { reason: 'without WORKSPACE_ROOTS a path may be wherever a workspace may', given: { path: path.join(outside, 'secret.txt'), config: { authMode: 'none', workspaceRoots: undefined } }, want: undefined },
      { reason: 'without WORKSPACE_ROOTS /proc is still refused', given: { path: '/proc/self/environ', config: { authMode: 'none', workspaceRoots: undefined } }, want: /under \/proc/ },
      { reason: 'without WORKSPACE_ROOTS DATA_DIR internals are still refused', given: { path: path.join(data, 'redis'), config: { authMode: 'none', workspaceRoots: undefined } }, want: /DATA_DIR/ },
      { reason: 'without WORKSPACE_ROOTS the secret files are still refused', given: { path: tokens, config: { authMode: 'none', workspaceRoots: undefined } }, want: /secret files/ },
      { reason: 'without WORKSPACE_ROOTS the file system root is refused', given: { path: '/', config: { authMode: 'none', workspaceRoots: undefined } }, want: /file system root/ },
    ];
    for (const { reason, given, want } of table) {
      it(reason, () => {
        const got = new PathConfinement(config(given.config), bundled).refusal(given.path);
        if (want) expect(got).to.match(want);
        else expect(got).to.equal(undefined);
      });
    }
  });

  describe('read', () => {
    const paths = new PathConfinement(config(), bundled);
    const table: { reason: string; given: string; want: { ok: boolean; missing?: boolean; reason?: RegExp; text?: string } }[] = [
      { reason: 'an allowed regular file is read', given: path.join(root, 'proj', 'SKILL.md'), want: { ok: true, text: '---\nname: proj\n---\n' } },
      { reason: 'a missing allowed file is missing, not refused', given: path.join(root, 'proj', 'none.md'), want: { ok: false, missing: true } },
      { reason: 'a symlink to /proc/self/environ is refused, never read', given: path.join(root, 'proj', 'environ-link'), want: { ok: false, missing: false, reason: /under \/proc/ } },
      { reason: 'a symlink to the tokens file is refused', given: path.join(root, 'proj', 'tokens-link'), want: { ok: false, missing: false, reason: /secret files/ } },
      { reason: 'a hard link to the tokens file is refused (no path comparison can see it)', given: path.join(root, 'proj', 'tokens-hardlink'), want: { ok: false, missing: false, reason: /secret files/ } },
      { reason: 'a FIFO is refused without blocking', given: path.join(root, 'proj', 'fifo'), want: { ok: false, missing: false, reason: /regular file/ } },
      { reason: 'a directory is not a file', given: path.join(root, 'proj'), want: { ok: false, missing: false, reason: /regular file/ } },
    ];
    for (const { reason, given, want } of table) {
      it(reason, async () => {
        const got = await paths.read(given);
        expect(got.ok, JSON.stringify(got)).to.equal(want.ok);
        if (got.ok) expect(got.text).to.equal(want.text);
        else {
          expect(got.missing).to.equal(want.missing);
          if (want.reason) expect(got.reason).to.match(want.reason);
        }
      });
    }
  });

  describe('pathFieldsOf and admit', () => {
    it('finds every path field at any depth, with its dotted path, and skips empty ones', () => {
      const spec = { name: 's', file_path: '/a', dir: '', hooks: [{ working_dir: '/b' }], nested: { deeper: [{ dir: '/c' }] } };
      expect(pathFieldsOf(spec)).to.deep.equal([
        { path: 'file_path', value: '/a' },
        { path: 'nested.deeper[0].dir', value: '/c' },
        { path: 'hooks[0].working_dir', value: '/b' },
      ]);
    });

    it('refuses with 422 path_not_allowed naming each refused field under spec., and admits allowed ones', () => {
      const paths = new PathConfinement(config(), bundled);
      expect(() => paths.admit({ file_path: path.join(root, 'proj', 'SKILL.md'), dir: path.join(data, 'skills', 's') })).to.not.throw();
      try {
        paths.admit({ file_path: '/proc/self/environ', dir: path.join(root, 'proj'), working_dir: tokens });
        expect.fail('admitted');
      } catch (err) {
        const e = err as { status: number; code: string; evidence: Record<string, string> };
        expect(e.status).to.equal(422);
        expect(e.code).to.equal('path_not_allowed');
        expect(Object.keys(e.evidence).sort()).to.deep.equal(['spec.file_path', 'spec.working_dir']);
      }
    });
  });
});
