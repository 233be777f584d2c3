import { expect } from 'chai';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sha256 } from '../../runtime/process/auth.ts';
import type { Service } from '../../runtime/process/service.ts';
import { childEnv } from '../../runtime/security/child-env.ts';
import { loaderRefusal, loaderVariablesOf } from '../../runtime/security/loader-env.ts';
import { childPids } from '../helpers/agent-processes.ts';
import { environOf, SCRIPTED } from '../helpers/agents.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, startService } from '../helpers/service.ts';

/** The variables the review used to load code through an allowed program, and others of the same families. */
const LOADERS = [
  'ESBUILD_BINARY_PATH', 'TSX_DISABLE_CACHE', 'TSX_TSCONFIG_PATH', 'LD_AUDIT', 'LD_LIBRARY_PATH', 'LD_PRELOAD', 'GCONV_PATH', 'OPENSSL_CONF',
  'OPENSSL_MODULES', 'NODE_PATH', 'NODE_OPTIONS', 'NODE_EXTRA_CA_CERTS', 'NPM_CONFIG_NODE_OPTIONS', 'npm_config_script_shell', 'PYTHONPATH',
  'PYTHONHOME', 'PYTHONSTARTUP', 'PERL5LIB', 'PERL5OPT', 'RUBYOPT', 'RUBYLIB', 'JAVA_TOOL_OPTIONS', '_JAVA_OPTIONS', 'CLASSPATH',
  'DYLD_INSERT_LIBRARIES', 'GLIBC_TUNABLES', 'BASH_ENV', 'ENV', 'GIT_SSH_COMMAND', 'GIT_EXEC_PATH', 'EDITOR', 'SHELL', 'HOME',
  'XDG_CONFIG_HOME', 'ZDOTDIR', 'GOFLAGS', 'PATH', 'MY_PLUGIN_PATH', 'TOOL_HOME', 'PHPRC', 'R_PROFILE_USER',
];

describe('Security: environment variables that load code are admin-only', function () {
  describe('loaderRefusal (the rule)', () => {
    const table: { reason: string; name: string; value?: string; refused: boolean }[] = [
      ...LOADERS.map((name) => ({ reason: `${name} is a loader variable whatever its value`, name, value: 'x', refused: true })),
      { reason: 'a loader name is refused ignoring case', name: 'ld_preload', value: 'x', refused: true },
      { reason: 'an unlisted name whose value is an absolute path', name: 'FOO', value: '/tmp/evil.so', refused: true },
      { reason: 'an unlisted name whose value is dot-relative', name: 'FOO', value: './evil.js', refused: true },
      { reason: 'an unlisted name whose value is home-relative', name: 'FOO', value: '~/evil', refused: true },
      { reason: 'a path inside a :-separated list', name: 'FOO', value: 'a:/tmp/lib', refused: true },
      { reason: 'a file: URL', name: 'FOO', value: 'file:///tmp/x.js', refused: true },
      { reason: 'a data: URL (inline code)', name: 'FOO', value: 'data:text/javascript,process.exit()', refused: true },
      { reason: 'a plain setting', name: 'AGENT_MODE', value: 'audit', refused: false },
      { reason: 'an https URL is not a file', name: 'ANTHROPIC_BASE_URL', value: 'https://api.example.com/v1', refused: false },
      { reason: 'a mode of a runtime family that loads nothing', name: 'NODE_ENV', value: 'production', refused: false },
      { reason: 'the pool switch of agent definitions', name: 'SVC_AGENT_POOL', value: '1', refused: false },
      { reason: 'a locale', name: 'LANG', value: 'C.UTF-8', refused: false },
      { reason: 'a secret_env name is judged by its name alone', name: 'API_KEY', refused: false },
    ];
    for (const t of table) {
      it(`${t.refused ? 'refuses' : 'allows'}: ${t.reason}`, () => {
        expect(loaderRefusal(t.name, t.value) !== undefined).to.equal(t.refused);
      });
    }

    it('finds env and secret_env entries at any depth, with their paths', () => {
      const spec = { env: { MODE: 'a', LD_PRELOAD: 'x' }, mcp_servers: [{ env: { NODE_OPTIONS: '--x' }, secret_env: { PYTHONPATH: 'env:SVC_SECRET_X', KEY: 'env:SVC_SECRET_Y' } }] };
      expect(loaderVariablesOf(spec).map((v) => v.path).sort()).to.deep.equal(['env.LD_PRELOAD', 'mcp_servers[0].env.NODE_OPTIONS', 'mcp_servers[0].secret_env.PYTHONPATH']);
    });

    it('the service\'s own loader variables never reach a child (childEnv passes only the basics and what the record declares)', () => {
      const from = Object.fromEntries([...LOADERS.filter((n) => n !== 'PATH' && n !== 'HOME'), 'REDIS_URL', 'AUTH_TOKENS_FILE'].map((n) => [n, '/tmp/evil']));
      const env = childEnv({ MODE: 'a' }, { SVC_API_URL: 'http://x' }, { ...from, PATH: '/usr/bin', HOME: '/root', LANG: 'C' });
      expect(env).to.deep.equal({ PATH: '/usr/bin', HOME: '/root', LANG: 'C', MODE: 'a', SVC_API_URL: 'http://x' });
    });
  });

  describe('through the API (token mode, real Redis, real agent processes)', function () {
    this.timeout(120_000);
    const redis = new RedisServer();
    let dir: string;
    let service: Service | undefined;
    const call = (token: string, method: string, p: string, body?: unknown) => new Client(service!.url).call(method, p, body, { authorization: `Bearer ${token}` });
    const put = (token: string, kind: string, id: string, spec: unknown, q = '') => call(token, 'PUT', `/api/resources/${kind}/${id}${q}`, { scope: { kind: 'global' }, expected_version: 0, spec });

    before(async () => { await redis.start(); });
    after(async () => { await redis.destroy(); });
    beforeEach(async () => {
      dir = mkdtempSync(path.join(os.tmpdir(), 'svc-loader-'));
      const tokens = path.join(dir, 'tokens.yaml');
      writeFileSync(tokens, `tokens:\n  - {name: gitops, role: operator, sha256: ${sha256('op')}}\n  - {name: platform, role: admin, sha256: ${sha256('adm')}}\n`);
      service = await startService(redis.url, { AUTH_MODE: 'token', AUTH_TOKENS_FILE: tokens, DATA_DIR: dir });
    });
    afterEach(async () => {
      await service?.stop();
      service = undefined;
      await redis.flush();
      rmSync(dir, { recursive: true, force: true });
    });

    it('refuses each loader variable in an operator\'s agent env or secret_env with 403 naming the field (dry runs too), stores nothing, and lets an admin write it', async () => {
      for (const name of LOADERS) {
        for (const q of ['', '?dry_run=true']) {
          const res = await put('op', 'agent', 'a1', { name: 'a1', prompt: 'p', env: { [name]: '/tmp/evil' } }, q);
          expect(res.status, `${name}${q}`).to.equal(403);
          expect(res.body.diagnostic.code).to.equal('env_requires_admin');
          expect(res.body.diagnostic.evidence).to.have.property(`spec.env.${name}`).that.match(/admin role/);
        }
      }
      const secret = await put('op', 'agent', 'a1', { name: 'a1', prompt: 'p', secret_env: { LD_PRELOAD: 'env:SVC_SECRET_X' } });
      expect(secret.status).to.equal(403);
      expect(secret.body.diagnostic.evidence).to.have.property('spec.secret_env.LD_PRELOAD');
      const byValue = await put('op', 'agent', 'a1', { name: 'a1', prompt: 'p', env: { HELPER: '/tmp/evil.so' } });
      expect(byValue.status).to.equal(403);
      expect(byValue.body.diagnostic.evidence['spec.env.HELPER']).to.match(/names a file/);
      expect((await call('op', 'GET', '/api/resources')).body.records).to.deep.equal([]);

      // An operator still sets plain settings; an admin may set a loader variable, as an admin may set a command.
      expect((await put('op', 'agent', 'plain', { name: 'plain', prompt: 'p', env: { AGENT_MODE: 'audit', NODE_ENV: 'production' } })).status).to.equal(201);
      expect((await put('adm', 'agent', 'tuned', { name: 'tuned', prompt: 'p', env: { NODE_OPTIONS: '--max-old-space-size=256' } })).status).to.equal(201);
    });

    it('names the env of MCP servers and hooks too, beside their command', async () => {
      const cases = [
        { kind: 'mcp_server', spec: { name: 'm', transport: 'stdio', command: 'true', env: { LD_AUDIT: '/tmp/a.so' } }, field: 'spec.env.LD_AUDIT' },
        { kind: 'hook.binding', spec: { name: 'h', event: 'tool.pre_call', mode: 'sync', command: 'true', env: { GCONV_PATH: '/tmp/g' } }, field: 'spec.env.GCONV_PATH' },
        { kind: 'agent', spec: { name: 'a', prompt: 'p', mcp_servers: [{ name: 'm', transport: 'stdio', command: 'true', env: { OPENSSL_CONF: '/tmp/o' } }] }, field: 'spec.mcp_servers[0].env.OPENSSL_CONF' },
      ];
      for (const c of cases) {
        const res = await put('op', c.kind, 'x1', c.spec);
        expect(res.status, c.kind).to.equal(403);
        expect(res.body.diagnostic.evidence, c.kind).to.have.property(c.field);
      }
      expect((await call('op', 'GET', '/api/resources')).body.records).to.deep.equal([]);
    });

    it('the review\'s attack: ESBUILD_BINARY_PATH on an agent that runs the built-in agent under tsx does not start the writer\'s program', async () => {
      const marker = path.join(dir, 'marker');
      const program = path.join(dir, 'evil.sh');
      writeFileSync(program, `#!/bin/sh\necho ran > ${marker}\nexit 1\n`);
      chmodSync(program, 0o755);
      const res = await put('op', 'agent', 'esb', { name: 'esb', prompt: 'p', env: { ESBUILD_BINARY_PATH: program, TSX_DISABLE_CACHE: '1' } });
      const root = path.join(dir, 'workspaces', 'w');
      mkdirSync(root, { recursive: true });
      const ws = await call('op', 'POST', '/api/workspaces', { root_dir: root });
      expect(ws.status, JSON.stringify(ws.body)).to.equal(201);
      await call('op', 'POST', '/api/sessions', { workspace: ws.body.workspace.id, agent_name: 'esb' });
      await call('op', 'POST', '/api/sessions', { workspace: ws.body.workspace.id, agent_name: 'scripted' });
      expect(existsSync(marker), 'the writer\'s program ran').to.equal(false);
      expect(res.status).to.equal(403);
    });

    it('the service\'s own NODE_OPTIONS and LD_LIBRARY_PATH do not reach the agent it starts', async () => {
      const marker = path.join(dir, 'preloaded');
      const preload = path.join(dir, 'preload.cjs');
      writeFileSync(preload, `require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'ran');\n`);
      const saved = { NODE_OPTIONS: process.env.NODE_OPTIONS, LD_LIBRARY_PATH: process.env.LD_LIBRARY_PATH };
      process.env.NODE_OPTIONS = `--require ${preload}`;
      process.env.LD_LIBRARY_PATH = dir;
      try {
        const root = path.join(dir, 'workspaces', 'w');
        mkdirSync(root, { recursive: true });
        const ws = (await call('op', 'POST', '/api/workspaces', { root_dir: root })).body.workspace;
        const s = await call('op', 'POST', '/api/sessions', { workspace: ws.id, agent_name: 'scripted' });
        expect(s.body.session.state, JSON.stringify(s.body)).to.equal('active');
        const pids = childPids(process.pid, SCRIPTED);
        expect(pids).to.have.length(1);
        const env = environOf(String(pids[0]));
        expect(env).not.to.have.any.keys('NODE_OPTIONS', 'LD_LIBRARY_PATH');
        expect(existsSync(marker)).to.equal(false);
      } finally {
        for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
      }
    });
  });
});
