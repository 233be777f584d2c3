import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sha256 } from '../../runtime/process/auth.ts';
import type { Service } from '../../runtime/process/service.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';

const CANARY_ENV = 'SVC_SECRET_BUNDLE_CANARY';
const CANARY = `canary-${randomUUID()}`;
const LOG_TOKEN = `tok${randomUUID().replace(/-/g, '')}`;
const hex = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** download fetches an archive as bytes, with its status and headers. */
async function download(base: string, opId: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}/api/support/bundles/${opId}/download`, { headers });
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

/** extract unpacks an archive with the system tar into a new temp dir and returns the bundle's directory in it. */
function extract(bytes: Buffer): { dir: string; root: string } {
  const root = mkdtempSync(path.join(os.tmpdir(), 'svc-bundle-x-'));
  writeFileSync(path.join(root, 'b.tar.gz'), bytes);
  execFileSync('tar', ['-xzf', 'b.tar.gz'], { cwd: root });
  rmSync(path.join(root, 'b.tar.gz'));
  const [top] = readdirSync(root);
  return { dir: path.join(root, top), root };
}

/** completed waits until an operation is completed and returns it. */
const completed = (api: Client, opId: string) => eventually(async () => {
  const op = (await api.get(`/api/support/bundles/${opId}`)).body.operation;
  expect(op.status).to.equal('completed');
  return op;
}, 30_000, 100);

describe('Support bundles (real Redis, real HTTP)', function () {
  this.timeout(120_000);

  describe('one service with every role', () => {
    const f = new ServiceFixture().install();
    before(() => { process.env[CANARY_ENV] = CANARY; });
    after(() => { delete process.env[CANARY_ENV]; });

    it('refuses a request without consent (400 bundle_consent_required) and unknown fields (422), creating nothing', async () => {
      const table = [
        { reason: 'no body fields', body: {}, status: 400, code: 'bundle_consent_required' },
        { reason: 'consent refused', body: { yes: false }, status: 400, code: 'bundle_consent_required' },
        { reason: 'consent must be the boolean true', body: { yes: 'true' }, status: 400, code: 'bundle_consent_required' },
        { reason: 'an unknown field is refused under strict field validation', body: { yes: true, include_logs: true }, status: 422, code: 'unknown_field' },
        { reason: 'include_status must be a boolean', body: { yes: true, include_status: 'no' }, status: 422, code: 'invalid_body' },
      ];
      for (const t of table) {
        const res = await f.api.post('/api/support/bundles', t.body);
        expect(res.status, t.reason).to.equal(t.status);
        expect(res.body.diagnostic.code, t.reason).to.equal(t.code);
      }
      const c = f.redis.client();
      expect(await c.keys('svc:{support}:*')).to.deep.equal([]);
      c.disconnect();
    });

    it('answers 404 for an unknown operation, on its status and its download', async () => {
      const id = randomUUID();
      for (const p of [`/api/support/bundles/${id}`, `/api/support/bundles/${id}/download`]) {
        const res = await f.api.get(p);
        expect(res.status, p).to.equal(404);
        expect(res.body.diagnostic.code, p).to.equal('bundle_operation_not_found');
      }
    });

    it('builds a bundle: 202, completed, an archive the system tar extracts whose manifest matches its files, no canary anywhere', async () => {
      const { api, service } = f;
      // A record that uses the canary secret by reference, and places it could leak to: a log line, a bus event.
      expect((await api.put('/api/resources/agent/leaky', { scope: { kind: 'global' }, expected_version: 0, spec: { name: 'leaky', prompt: 'p', secret_env: { API_KEY: `env:${CANARY_ENV}` } } })).status).to.equal(201);
      service.logger.warn({ upstream: `provider refused key ${CANARY}` }, 'canary warning line');
      service.logger.error(`retrying with Authorization: Bearer ${LOG_TOKEN}`);
      service.logger.info('an info line the shared stream does not keep');
      await service.bus!.publish({ type: 'test.leak', source: 'tests', summary: `saw ${CANARY}`, data: { usage: { input_tokens: 11, output_tokens: 22 } } });

      const res = await api.post('/api/support/bundles', { yes: true });
      expect(res.status).to.equal(202);
      const op0 = res.body.operation;
      expect(op0).to.include({ status: 'pending', status_url: `/api/support/bundles/${op0.operation_id}`, download_url: '' });
      expect(op0.file_name).to.match(/^svc-support-bundle-\d{8}T\d{6}Z\.tar\.gz$/);
      expect(res.headers.get('location')).to.equal(op0.status_url);

      const op = await completed(api, op0.operation_id);
      expect(op.download_url).to.equal(`/api/support/bundles/${op.operation_id}/download`);
      expect(op.manifest).to.include({ schema_version: 'support-bundle.v1', redaction_version: 'diagnostics-redaction.v1', bundle_max_bytes: 25 * 1024 * 1024, artifact_max_bytes: 1024 * 1024, log_tail_max_bytes: 2 * 1024 * 1024, event_summary_max_bytes: 5 * 1024 * 1024 });

      const got = await download(service.url, op.operation_id);
      expect(got.status).to.equal(200);
      expect(got.headers.get('content-type')).to.equal('application/gzip');
      expect(got.headers.get('content-disposition')).to.equal(`attachment; filename="${op.file_name}"`);
      expect(got.bytes.length).to.equal(op.size_bytes);
      expect(hex(got.bytes)).to.equal(op.sha256);

      const { dir, root } = extract(got.bytes);
      try {
        expect(path.basename(dir)).to.equal(op.file_name.replace(/\.tar\.gz$/, ''));
        const manifest = JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
        expect(manifest).to.deep.equal(op.manifest);
        const included = manifest.artifacts.filter((a: any) => a.included);
        expect(readdirSync(dir).sort()).to.deep.equal([...included.map((a: any) => a.path), 'manifest.json'].sort());
        expect(included.map((a: any) => a.path)).to.include.members(['versions.json', 'configuration.json', 'readiness.json', 'resources.json', 'workspaces.json', 'sessions.json', 'events.json', 'logs.ndjson', 'redaction-report.json']);
        for (const a of included) {
          const bytes = readFileSync(path.join(dir, a.path));
          expect(statSync(path.join(dir, a.path)).size, a.path).to.equal(a.bytes);
          expect(hex(bytes), a.path).to.equal(a.sha256);
          expect(a, a.path).to.include({ truncated: false, omitted_reason: '', redaction_version: 'diagnostics-redaction.v1' });
        }
        // The canary and the logged token are in no file; the report counts what masked them, never the values.
        for (const file of readdirSync(dir)) {
          const text = readFileSync(path.join(dir, file), 'utf8');
          expect(text, file).to.not.include(CANARY);
          expect(text, file).to.not.include(LOG_TOKEN);
        }
        const report = JSON.parse(readFileSync(path.join(dir, 'redaction-report.json'), 'utf8'));
        const rules = (p: string) => report.files.find((x: any) => x.path === p).rules;
        // NOTE: the canary in the log line was masked by the logger itself and the one in the event by the bus as it
        // appended it (both know the allowlisted variables' values), so the bundle's redactor has only the bearer
        // token left to mask.
        expect(rules('logs.ndjson').bearer).to.be.at.least(1);
        expect(rules('events.json').literal ?? 0).to.equal(0);
        // What was masked is still there to read around; token counts are not secrets and stay.
        const logs = readFileSync(path.join(dir, 'logs.ndjson'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
        expect(logs.find((l) => l.msg === 'canary warning line')).to.deep.include({ upstream: 'provider refused key [REDACTED]', level: 40 });
        expect(logs.map((l) => l.msg)).to.include('retrying with Authorization: Bearer [REDACTED]');
        expect(logs.map((l) => l.msg)).to.not.include('an info line the shared stream does not keep');
        const events = JSON.parse(readFileSync(path.join(dir, 'events.json'), 'utf8'));
        expect(events.recent.find((e: any) => e.type === 'test.leak')).to.deep.include({ summary: 'saw [REDACTED]', data: { usage: { input_tokens: 11, output_tokens: 22 } } });
        const versions = JSON.parse(readFileSync(path.join(dir, 'versions.json'), 'utf8'));
        expect(versions.node).to.equal(process.versions.node);
        expect(versions.redis.version).to.match(/^\d+\.\d+/);
        expect(versions.packages.tar).to.match(/^7\./);
        const resources = JSON.parse(readFileSync(path.join(dir, 'resources.json'), 'utf8'));
        expect(resources.by_kind.agent.total).to.equal(1);
      } finally {
        rmSync(root, { recursive: true, force: true });
      }

      // A second api process on the same Redis serves the same bytes.
      const other = await startService(f.redis.env, { SVC_ROLES: 'api', DATA_DIR: f.dataDir });
      try {
        const again = await download(other.url, op.operation_id);
        expect(again.status).to.equal(200);
        expect(again.bytes.equals(got.bytes)).to.equal(true);
      } finally {
        await other.stop();
      }
      // The operation and its archive expire 24 h after the request.
      const c = f.redis.client();
      const ttls = [await c.pttl(`svc:{support}:op:${op.operation_id}`), await c.pttl(`svc:{art:${op.sha256}}:blob`)];
      c.disconnect();
      for (const ttl of ttls) expect(ttl).to.be.within(23 * 3600_000, 24 * 3600_000);
    });
  });

  describe('an api process and a controller process', () => {
    const redis = new RedisServer();
    const data = mkdtempSync(path.join(os.tmpdir(), 'svc-bundle-data-'));
    const started: Service[] = [];
    before(() => redis.start());
    after(async () => {
      for (const s of started) await s.stop();
      await redis.destroy();
      rmSync(data, { recursive: true, force: true });
    });

    it('is pending (download 409) while no controller runs, then any controller builds it', async () => {
      const api = await startService(redis.url, { SVC_ROLES: 'api', DATA_DIR: data });
      started.push(api);
      const client = new Client(api.url);
      const op = (await client.post('/api/support/bundles', { yes: true, include_status: false })).body.operation;
      await new Promise((r) => setTimeout(r, 300));
      expect((await client.get(`/api/support/bundles/${op.operation_id}`)).body.operation.status).to.equal('pending');
      const early = await client.get(`/api/support/bundles/${op.operation_id}/download`);
      expect(early.status).to.equal(409);
      expect(early.body.diagnostic).to.include({ code: 'bundle_not_ready' });
      expect(early.body.diagnostic.evidence).to.deep.equal({ operation_id: op.operation_id, status: 'pending' });

      started.push(await startService(redis.url, { SVC_ROLES: 'controller', DATA_DIR: data }));
      const done = await completed(client, op.operation_id);
      const statusFiles = done.manifest.artifacts.filter((a: any) => ['readiness.json', 'resources.json'].includes(a.path));
      expect(statusFiles.map((a: any) => [a.path, a.included, a.omitted_reason])).to.deep.equal([['readiness.json', false, 'include_status is false'], ['resources.json', false, 'include_status is false']]);
      const got = await download(api.url, op.operation_id);
      expect(got.status).to.equal(200);
      expect(hex(got.bytes)).to.equal(done.sha256);
    });
  });

  describe('roles (token mode)', () => {
    const f = new ServiceFixture({ autoStart: false, workspace: false }).install();

    it('reader and operator get 403, admin gets 202, anonymous 401', async () => {
      const file = path.join(f.dataDir, 'tokens.yaml');
      writeFileSync(file, `tokens:\n  - {name: r, role: reader, sha256: ${sha256('r-tok')}}\n  - {name: o, role: operator, sha256: ${sha256('o-tok')}}\n  - {name: a, role: admin, sha256: ${sha256('a-tok')}}\n`);
      await f.start({ AUTH_MODE: 'token', AUTH_TOKENS_FILE: file });
      const as = (token?: string) => (method: string, p: string, body?: unknown) => f.api.call(method, p, body, token ? { authorization: `Bearer ${token}` } : {});
      expect((await as()('POST', '/api/support/bundles', { yes: true })).status).to.equal(401);
      for (const token of ['r-tok', 'o-tok']) {
        const denied = await as(token)('POST', '/api/support/bundles', { yes: true });
        expect(denied.status, token).to.equal(403);
        expect(denied.body.diagnostic.evidence.required_role).to.equal('admin');
      }
      const ok = await as('a-tok')('POST', '/api/support/bundles', { yes: true });
      expect(ok.status).to.equal(202);
      const id = ok.body.operation.operation_id;
      for (const token of ['r-tok', 'o-tok']) {
        expect((await as(token)('GET', `/api/support/bundles/${id}`)).status, token).to.equal(403);
        expect((await as(token)('GET', `/api/support/bundles/${id}/download`)).status, token).to.equal(403);
      }
      await eventually(async () => expect((await as('a-tok')('GET', `/api/support/bundles/${id}`)).body.operation.status).to.equal('completed'), 30_000, 100);
      const got = await download(f.service.url, id, { authorization: 'Bearer a-tok' });
      expect(got.status).to.equal(200);
    });
  });
});
