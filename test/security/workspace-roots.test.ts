import { expect } from 'chai';
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sha256 } from '../../runtime/process/auth.ts';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, startService } from '../helpers/service.ts';

describe('Workspace roots: where a workspace\'s directories may be (HTTP, real Redis, real directories)', function () {
  this.timeout(60_000);
  const redis = new RedisServer();
  let service: Service | undefined;
  let api: Client;
  let base: string;
  let dataDir: string;
  let allowed: string;
  let outside: string;

  before(async () => { await redis.start(); });
  after(async () => { await redis.destroy(); });
  beforeEach(async () => {
    await redis.flush();
    // NOTE: realpath, because os.tmpdir() may itself be a symlink (macOS) and the service stores resolved paths.
    base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'svc-roots-')));
    dataDir = path.join(base, 'data');
    allowed = path.join(base, 'allowed');
    outside = path.join(base, 'outside');
    for (const d of [dataDir, path.join(dataDir, 'state'), path.join(allowed, 'proj', 'src'), path.join(allowed, 'extra'), outside]) mkdirSync(d, { recursive: true });
    symlinkSync(outside, path.join(allowed, 'to-outside'));
    symlinkSync('/etc', path.join(allowed, 'to-etc'));
    symlinkSync(path.join(dataDir, 'state'), path.join(allowed, 'to-data'));
  });
  afterEach(async () => {
    await service?.stop();
    service = undefined;
    rmSync(base, { recursive: true, force: true });
  });

  const start = async (env: Record<string, string> = {}) => {
    service = await startService(redis.url, { DATA_DIR: dataDir, ...env });
    api = new Client(service.url);
  };
  const workspaces = async () => (await api.get('/api/workspaces')).body.workspaces as { id: string; root_dir: string; add_dirs: string[] }[];
  /** refused asserts a 422 whose evidence names exactly `field`, with the code of a policy refusal. */
  const refused = (res: { status: number; body: any }, field: string, reason: string) => {
    expect(res.status, `${reason}: ${JSON.stringify(res.body)}`).to.equal(422);
    expect(res.body.diagnostic.code, reason).to.equal('workspace_dir_not_allowed');
    expect(Object.keys(res.body.diagnostic.evidence), reason).to.deep.equal([field]);
  };

  describe('without WORKSPACE_ROOTS (AUTH_MODE=none)', () => {
    it('refuses the file system root and DATA_DIR internals, even through a symlink, and stores nothing', async () => {
      await start();
      const table = [
        { reason: 'the file system root', dir: '/' },
        { reason: 'DATA_DIR itself', dir: dataDir },
        { reason: 'a directory inside DATA_DIR', dir: path.join(dataDir, 'state') },
        { reason: 'a symlink that resolves inside DATA_DIR', dir: path.join(allowed, 'to-data') },
      ];
      for (const { reason, dir } of table) refused(await api.post('/api/workspaces', { root_dir: dir }), 'root_dir', reason);
      expect(await workspaces()).to.deep.equal([]);
    });

    it('accepts any other existing directory', async () => {
      await start();
      const res = await api.post('/api/workspaces', { root_dir: outside });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      expect(res.body.workspace.root_dir).to.equal(outside);
    });
  });

  describe('with WORKSPACE_ROOTS', () => {
    it('accepts a directory inside an allowed root and refuses one outside, or a symlink inside that points outside', async () => {
      await start({ WORKSPACE_ROOTS: `${allowed}, ${path.join(base, 'second-root')}` });
      const table = [
        { reason: 'a directory outside every root', dir: outside },
        { reason: 'a symlink inside the root pointing to a directory outside it', dir: path.join(allowed, 'to-outside') },
        { reason: 'a symlink inside the root pointing to /etc', dir: path.join(allowed, 'to-etc') },
        { reason: 'a path that leaves the root with ..', dir: path.join(allowed, 'proj', '..', '..', 'outside') },
        { reason: 'the file system root', dir: '/' },
      ];
      for (const { reason, dir } of table) {
        const res = await api.post('/api/workspaces', { root_dir: dir });
        refused(res, 'root_dir', reason);
      }
      expect(await workspaces()).to.deep.equal([]);
      const ok = await api.post('/api/workspaces', { root_dir: path.join(allowed, 'proj') });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(201);
      expect((await workspaces()).map((w) => w.root_dir)).to.deep.equal([path.join(allowed, 'proj')]);
    });

    it('refuses a WORKSPACE_ROOTS entry itself as root_dir or add_dirs entry (it would see every other workspace), even through a symlink, and stores nothing', async () => {
      const second = path.join(base, 'second-root');
      mkdirSync(second);
      symlinkSync(allowed, path.join(second, 'to-root'));
      await start({ WORKSPACE_ROOTS: `${allowed}, ${second}` });
      const ws = (await api.post('/api/workspaces', { root_dir: path.join(allowed, 'proj') })).body.workspace;
      for (const { reason, body, field } of [
        { reason: 'the first root itself', body: { root_dir: allowed }, field: 'root_dir' },
        { reason: 'the second root itself, written with a trailing slash', body: { root_dir: `${second}/` }, field: 'root_dir' },
        { reason: 'a symlink inside one root resolving to another root', body: { root_dir: path.join(second, 'to-root') }, field: 'root_dir' },
        { reason: 'a root as an add_dirs entry', body: { root_dir: path.join(allowed, 'extra'), add_dirs: [allowed] }, field: 'add_dirs[0]' },
      ]) {
        const res = await api.post('/api/workspaces', body);
        refused(res, field, reason);
        expect(res.body.diagnostic.evidence[field], reason).to.match(/not the entry itself/);
      }
      refused(await api.patch(`/api/workspaces/${ws.id}`, { add_dirs: [second] }), 'add_dirs[0]', 'PATCH add_dirs naming a root');
      const stored = await workspaces();
      expect(stored.map((w) => [w.root_dir, w.add_dirs]), 'only the workspace inside a root, unchanged').to.deep.equal([[path.join(allowed, 'proj'), []]]);
    });

    it('start no agent in a workspace stored at a root entry before the root was configured: startup_failure, WorkspaceNotAllowed', async () => {
      await start();
      const ws = (await api.post('/api/workspaces', { root_dir: allowed })).body.workspace;
      await service!.stop();
      await start({ WORKSPACE_ROOTS: allowed });
      const s = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
      expect(s).to.include({ state: 'stopped', stop_reason: 'error' });
      expect(s.failure.summary).to.match(/^WorkspaceNotAllowed: .*not the entry itself/);
    });

    it('names the refused add_dirs entry on create, and stores nothing', async () => {
      await start({ WORKSPACE_ROOTS: allowed });
      const res = await api.post('/api/workspaces', { root_dir: path.join(allowed, 'proj'), add_dirs: [path.join(allowed, 'extra'), path.join(allowed, 'to-etc')] });
      refused(res, 'add_dirs[1]', 'a symlinked add_dirs entry resolving to /etc');
      expect(await workspaces()).to.deep.equal([]);
    });

    it('PATCH add_dirs obeys the same rule: a refused entry leaves the workspace unchanged, allowed ones are stored', async () => {
      await start({ WORKSPACE_ROOTS: allowed });
      const ws = (await api.post('/api/workspaces', { root_dir: path.join(allowed, 'proj') })).body.workspace;
      for (const [reason, dirs, field] of [
        ['outside every root', [outside], 'add_dirs[0]'],
        ['a symlink to outside after an allowed entry', [path.join(allowed, 'extra'), path.join(allowed, 'to-outside')], 'add_dirs[1]'],
        ['inside DATA_DIR', [path.join(dataDir, 'state')], 'add_dirs[0]'],
      ] as const) {
        refused(await api.patch(`/api/workspaces/${ws.id}`, { add_dirs: dirs }), field, reason);
        expect((await api.get(`/api/workspaces/${ws.id}`)).body.workspace.add_dirs, reason).to.deep.equal([]);
      }
      const ok = await api.patch(`/api/workspaces/${ws.id}`, { add_dirs: [path.join(allowed, 'extra')] });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
      expect(ok.body.workspace.add_dirs).to.deep.equal([path.join(allowed, 'extra')]);
    });
  });

  describe('workspace tools', () => {
    it('refuse a workspace whose root became a symlink to outside the allowed roots after it was stored', async () => {
      await start({ WORKSPACE_ROOTS: allowed });
      const proj = path.join(allowed, 'proj');
      const ws = (await api.post('/api/workspaces', { root_dir: proj })).body.workspace;
      writeFileSync(path.join(outside, 'outside-only.txt'), 'x');
      const list = () => api.post('/api/tools/svc__workspace_list_files/invoke', { workspace_id: ws.id, input: {} });
      const before = await list();
      expect(before.status, JSON.stringify(before.body)).to.equal(200);
      expect(JSON.stringify(before.body.result)).to.include('src');
      rmSync(proj, { recursive: true });
      symlinkSync(outside, proj);
      const after = await list();
      expect(after.status, JSON.stringify(after.body)).to.equal(403);
      expect(after.body.error.reason_codes).to.include('scope_mismatch');
      expect(JSON.stringify(after.body)).to.not.include('outside-only.txt');
    });
  });

  describe('sessions', () => {
    it('start no agent in a workspace a stricter WORKSPACE_ROOTS no longer allows: startup_failure, WorkspaceNotAllowed', async () => {
      await start();
      const ws = (await api.post('/api/workspaces', { root_dir: outside })).body.workspace;
      await service!.stop();
      await start({ WORKSPACE_ROOTS: allowed });
      const s = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
      expect(s).to.include({ state: 'stopped', stop_reason: 'error' });
      expect(s.failure.kind).to.equal('startup_failure');
      expect(s.failure.summary).to.match(/^WorkspaceNotAllowed: /);
      const inside = (await api.post('/api/workspaces', { root_dir: path.join(allowed, 'proj') })).body.workspace;
      expect((await api.post('/api/sessions', { workspace: inside.id })).body.session.state).to.equal('active');
    });
  });

  describe('with AUTH_MODE=token', () => {
    it('creates DATA_DIR/workspaces at start and makes it the only default root', async () => {
      const tokens = path.join(base, 'tokens.yaml');
      writeFileSync(tokens, `tokens:\n  - {name: gitops, role: operator, sha256: ${sha256('o-secret')}}\n`);
      const own = path.join(dataDir, 'workspaces');
      expect(existsSync(own)).to.equal(false);
      await start({ AUTH_MODE: 'token', AUTH_TOKENS_FILE: tokens });
      expect(existsSync(own)).to.equal(true);
      const as = (method: string, p: string, body?: unknown) => api.call(method, p, body, { authorization: 'Bearer o-secret' });
      for (const [reason, dir] of [['a directory outside DATA_DIR/workspaces', outside], ['DATA_DIR itself', dataDir], ['another DATA_DIR directory', path.join(dataDir, 'state')], ['the default root DATA_DIR/workspaces itself', own]]) {
        refused(await as('POST', '/api/workspaces', { root_dir: dir }), 'root_dir', reason);
      }
      mkdirSync(path.join(own, 'proj'));
      const ok = await as('POST', '/api/workspaces', { root_dir: path.join(own, 'proj') });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(201);
      expect(((await as('GET', '/api/workspaces')).body.workspaces as any[]).map((w) => w.root_dir)).to.deep.equal([path.join(own, 'proj')]);
    });
  });
});
