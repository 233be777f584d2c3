import { expect } from 'chai';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { decodeSpec } from '../../codecs/index.ts';
import { sha256 } from '../../runtime/process/auth.ts';
import type { Service } from '../../runtime/process/service.ts';
import { API_OWNER, API_SOURCE } from '../../runtime/resources/resource-service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';

/**
 * The service runs in this process, so /proc/self/environ is this process's environment as it was exec'd: each
 * `NAME=value` entry of it is a marker a response must never contain.
 */
const ENVIRON = readFileSync('/proc/self/environ', 'utf8').split('\0').filter((e) => e.length >= 8 && e.includes('='));
const TOKEN_HASHES = ['rd', 'op', 'adm'].map(sha256);

/** leaks lists what of the environment or the tokens file a response body carries (none, or the test fails). */
const leaks = (body: unknown): string[] => {
  const text = JSON.stringify(body) ?? '';
  return [...ENVIRON.filter((e) => text.includes(e)), ...TOKEN_HASHES.filter((h) => text.includes(h)), ...(text.includes('tokens:') ? ['tokens:'] : [])];
};

describe('Security: every path a record can name is confined (token mode, real Redis, real HTTP, real files)', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  // NOTE: realpath, because os.tmpdir() may itself be a symlink and the service judges resolved paths.
  const base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'svc-paths-it-')));
  const dataDir = path.join(base, 'data');
  const roots = path.join(base, 'roots');
  const wsRoot = path.join(roots, 'ws');
  // NOTE: the tokens file lies inside WORKSPACE_ROOTS, so only the secret-file rule keeps it out.
  const tokens = path.join(roots, 'tokens.yaml');
  const environ = `/proc/${process.pid}/environ`;
  let service: Service | undefined;
  let ws: { id: string };
  const as = (token: string) => {
    const c = new Client(service!.url);
    const auth = { authorization: `Bearer ${token}` };
    return { get: (p: string) => c.call('GET', p, undefined, auth), call: (m: string, p: string, b?: unknown) => c.call(m, p, b, auth) };
  };
  const reader = () => as('rd');
  const operator = () => as('op');

  /** planted writes a symlink at `at` (making its directory) pointing at `target`. */
  const planted = (at: string, target: string) => {
    mkdirSync(path.dirname(at), { recursive: true });
    symlinkSync(target, at);
    return at;
  };
  /** stored writes a record past the API's admission, as one written before the rule (or by a bug) would be. */
  const stored = async (kind: string, id: string, spec: unknown) => {
    const decoded = decodeSpec(kind, spec, { scope: { kind: 'global' } });
    if (!decoded.ok) throw new Error(JSON.stringify(decoded.errors));
    await service!.store!.put({ kind, id, scope: { kind: 'global' }, owner: API_OWNER, source: API_SOURCE, spec: decoded.spec, expectedVersion: 0 });
    await eventually(async () => expect((await reader().get(`/api/resources/${kind}/${id}/status`)).body.status?.observed_version).to.equal(1));
  };

  before(async () => {
    await redis.start();
    mkdirSync(dataDir, { recursive: true });
    mkdirSync(wsRoot, { recursive: true });
    writeFileSync(tokens, `tokens:\n  - {name: r, role: reader, sha256: ${sha256('rd')}}\n  - {name: o, role: operator, sha256: ${sha256('op')}}\n  - {name: a, role: admin, sha256: ${sha256('adm')}}\n`);
    expect(ENVIRON.length, 'the test needs environment markers').to.be.greaterThan(0);
    service = await startService(redis.url, {
      AUTH_MODE: 'token', AUTH_TOKENS_FILE: tokens, DATA_DIR: dataDir, WORKSPACE_ROOTS: roots, EXEC_ALLOWLIST: process.execPath, HOOK_ATTEMPTS: '1',
    });
    const res = await operator().call('POST', '/api/workspaces', { root_dir: wsRoot });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    ws = res.body.workspace;
  });
  after(async () => {
    await service?.stop();
    await redis.destroy();
    rmSync(base, { recursive: true, force: true });
  });

  describe('at write time', () => {
    const hook = (dir: string) => ({ name: 'h', event: 'session.post_stop', command: process.execPath, args: ['-e', ''], working_dir: dir });
    /** Every field that names a path the service opens, by kind; `p` is put where the path goes. */
    const PATH_FIELDS: { reason: string; kind: string; field: string; spec: (p: string) => unknown }[] = [
      { reason: 'a skill\'s file_path', kind: 'skill', field: 'spec.file_path', spec: (p) => ({ name: 'leak', description: 'd', source: 'additional', enabled: true, file_path: p }) },
      { reason: 'a skill\'s dir (read as <dir>/SKILL.md)', kind: 'skill', field: 'spec.dir', spec: (p) => ({ name: 'leak', description: 'd', source: 'additional', enabled: true, dir: p }) },
      { reason: 'a hook.binding\'s working_dir', kind: 'hook.binding', field: 'spec.working_dir', spec: (p) => hook(p) },
    ];

    it('refuses every path field naming /proc, the tokens file, DATA_DIR internals or a symlink out of the roots with 422 naming it (dry run too), and stores nothing', async () => {
      const link = planted(path.join(wsRoot, 'links', 'to-environ'), environ);
      const refused = [
        { reason: '/proc/self/environ', p: '/proc/self/environ' },
        { reason: '/proc/self (a directory)', p: '/proc/self' },
        { reason: 'the tokens file, though inside WORKSPACE_ROOTS', p: tokens },
        { reason: 'DATA_DIR internals', p: path.join(dataDir, 'redis') },
        { reason: 'a symlink inside a workspace to the service\'s environ', p: link },
        { reason: 'a directory outside WORKSPACE_ROOTS', p: os.homedir() },
        { reason: 'a relative path', p: 'ws/SKILL.md' },
      ];
      for (const t of PATH_FIELDS) {
        for (const r of refused) {
          for (const q of ['', '?dry_run=true']) {
            for (const who of [operator(), as('adm')]) {
              const res = await who.call('PUT', `/api/resources/${t.kind}/x${q}`, { scope: { kind: 'global' }, expected_version: 0, spec: t.spec(r.p) });
              expect(res.status, `${t.reason} = ${r.reason} ${q}: ${JSON.stringify(res.body)}`).to.equal(422);
              expect(res.body.diagnostic.code).to.equal('path_not_allowed');
              expect(Object.keys(res.body.diagnostic.evidence), `${t.reason} = ${r.reason}`).to.deep.equal([t.field]);
              expect(leaks(res.body)).to.deep.equal([]);
            }
          }
        }
      }
      expect((await reader().get('/api/resources')).body.records).to.deep.equal([]);
    });

    it('still accepts paths inside a workspace root and the service\'s own skill directory', async () => {
      mkdirSync(path.join(wsRoot, 'skills', 'ok'), { recursive: true });
      const ok = [
        { kind: 'skill', id: 'ok1', spec: { name: 'ok1', description: 'd', source: 'additional', file_path: path.join(wsRoot, 'skills', 'ok', 'SKILL.md') } },
        { kind: 'skill', id: 'ok2', spec: { name: 'ok2', description: 'd', source: 'user', dir: path.join(dataDir, 'skills', 'ok2') } },
      ];
      for (const r of ok) {
        const res = await operator().call('PUT', `/api/resources/${r.kind}/${r.id}?dry_run=true`, { scope: { kind: 'global' }, expected_version: 0, spec: r.spec });
        expect(res.status, JSON.stringify(res.body)).to.equal(201);
      }
      const res = await as('adm').call('PUT', '/api/resources/hook.binding/ok3?dry_run=true', { scope: { kind: 'global' }, expected_version: 0, spec: hook(wsRoot) });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
    });
  });

  describe('at read time (records past the write check, symlinks planted in allowed directories)', () => {
    /** skillServed asserts a reader gets none of the named skill's file: content is an error, views carry no bytes. */
    const skillNotServed = async (name: string, query = '') => {
      const listed = await eventually(async () => {
        const res = await reader().get(`/api/skills${query}`);
        expect(res.body.skills.map((s: { name: string }) => s.name), JSON.stringify(res.body)).to.include(name);
        return res;
      });
      expect(leaks(listed.body)).to.deep.equal([]);
      const one = await reader().get(`/api/skills/${name}${query}`);
      expect(one.status).to.equal(200);
      expect(one.body.skill.enabled).to.equal(false);
      expect(one.body.skill.diagnostics[0].failure.code).to.equal('path_not_allowed');
      expect(leaks(one.body)).to.deep.equal([]);
      const content = await reader().get(`/api/skills/${name}/content${query}`);
      expect(content.status, JSON.stringify(content.body).slice(0, 300)).to.equal(403);
      expect(content.body.diagnostic.code).to.equal('path_not_allowed');
      expect(content.body.content).to.equal(undefined);
      expect(leaks(content.body)).to.deep.equal([]);
    };

    it('does not serve a skill record whose file_path is the environ or the tokens file, or whose dir holds a SKILL.md linked to them', async () => {
      const linkedDir = path.join(wsRoot, 'linked-skill');
      planted(path.join(linkedDir, 'SKILL.md'), tokens);
      const records = [
        { id: 'env-file', spec: { file_path: '/proc/self/environ' } },
        { id: 'env-pid', spec: { file_path: environ } },
        { id: 'tokens-file', spec: { file_path: tokens } },
        { id: 'env-dir', spec: { dir: '/proc/self' } },
        { id: 'linked-dir', spec: { dir: linkedDir } },
      ];
      for (const r of records) await stored('skill', r.id, { name: r.id, description: 'd', source: 'additional', enabled: true, ...r.spec });
      for (const r of records) await skillNotServed(r.id);
    });

    it('does not serve a scanned SKILL.md (DATA_DIR/skills, the workspace\'s, the agent\'s) that is a symlink to the environ or the tokens file', async () => {
      planted(path.join(dataDir, 'skills', 'user-leak', 'SKILL.md'), environ);
      planted(path.join(wsRoot, '.svc', 'skills', 'ws-leak', 'SKILL.md'), tokens);
      planted(path.join(wsRoot, '.svc', 'agents', 'scripted', 'skills', 'agent-leak', 'SKILL.md'), environ);
      await skillNotServed('user-leak');
      await skillNotServed('ws-leak', `?workspace=${ws.id}`);
      await skillNotServed('agent-leak', `?workspace=${ws.id}&for_agent=scripted`);
    });

    it('does not serve a HEARTBEAT.md that is a symlink to the environ or the tokens file, and an agent name cannot climb out', async () => {
      planted(path.join(dataDir, 'agents', 'scripted', 'HEARTBEAT.md'), environ);
      planted(path.join(wsRoot, '.svc', 'agents', 'scripted', 'HEARTBEAT.md'), tokens);
      for (const q of ['', `?workspace=${ws.id}`]) {
        const res = await reader().get(`/api/agents/scripted/heartbeat${q}`);
        expect(res.status, JSON.stringify(res.body).slice(0, 300)).to.equal(200);
        expect(res.body.present).to.equal(false);
        expect(res.body.guidance_markdown).to.equal('');
        expect(res.body.diagnostics.map((d: { code: string }) => d.code)).to.include('heartbeat_path_not_allowed');
        expect(leaks(res.body)).to.deep.equal([]);
      }
      const climb = await reader().get(`/api/agents/..%2F..%2F..%2Fproc%2Fself/heartbeat?workspace=${ws.id}`);
      expect(climb.status).to.be.oneOf([400, 404]);
      expect(leaks(climb.body)).to.deep.equal([]);
    });

    it('does not run a hook whose working_dir is the service\'s /proc entry, so its output cannot carry the environ to a reader', async () => {
      // NOTE: the hook reads `environ` from its cwd and answers it as its deny reason, which the runs list shows.
      const script = path.join(base, 'reason-from-cwd.mjs');
      writeFileSync(script, 'import { readFileSync } from "node:fs";\nlet s="";process.stdin.on("data",(d)=>s+=d).on("end",()=>{let r="";try{r=readFileSync("environ","utf8");}catch(e){r=String(e.code);}console.log(JSON.stringify({decision:"deny",reason:r}));});\n');
      await stored('hook.binding', 'cwd-leak', { name: 'cwd-leak', event: 'session.post_stop', command: process.execPath, args: [script], working_dir: `/proc/${process.pid}` });
      const created = await operator().call('POST', '/api/sessions', { workspace: ws.id });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      expect((await operator().call('POST', `/api/sessions/${created.body.session.id}/stop`, {})).status).to.be.oneOf([200, 202, 204]);
      const runs = await eventually(async () => {
        const res = await reader().get('/api/hooks/runs?binding=cwd-leak');
        expect(res.body.runs, JSON.stringify(res.body).slice(0, 300)).to.have.length(1);
        return res;
      });
      expect(runs.body.runs[0].outcome).to.be.oneOf(['error', 'dead']);
      expect(runs.body.runs[0].reason).to.match(/^WorkingDirNotAllowed: working_dir must not be under \/proc/);
      expect(leaks(runs.body)).to.deep.equal([]);
    });
  });
});
