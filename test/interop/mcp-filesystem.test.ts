import { expect } from 'chai';
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import type { Service } from '../../runtime/process/service.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { Client, eventually, startService } from '../helpers/service.ts';

/** FILESYSTEM is the entry of @modelcontextprotocol/server-filesystem, the MCP project's reference file server. */
const FILESYSTEM = path.join(path.dirname(createRequire(import.meta.url).resolve('@modelcontextprotocol/server-filesystem/package.json')), 'dist/index.js');

describe('MCP tools of @modelcontextprotocol/server-filesystem allowed one directory (stdio, real Redis)', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  let service: Service;
  let api: Client;
  let allowed = '';
  let outside = '';

  before(async () => {
    await redis.start();
    // NOTE: realpath, because the server compares resolved paths (macOS's /var is a symlink to /private/var).
    allowed = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'svc-fs-allowed-')));
    outside = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'svc-fs-outside-')));
    writeFileSync(path.join(allowed, 'inside.txt'), 'the allowed text\n');
    writeFileSync(path.join(outside, 'secret.txt'), 'must never be read\n');
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-fs-data-'));
    writeFileSync(path.join(dataDir, 'config.yaml'), 'tools:\n  trusted_sources: [files]\n  permission_mode: approve-all\n');
    service = await startService(redis.url, { DATA_DIR: dataDir });
    api = new Client(service.url);
    const spec = { name: 'files', command: process.execPath, args: [FILESYSTEM, allowed] };
    const res = await api.put('/api/resources/mcp_server/files?wait=true', { scope: { kind: 'global' }, spec, expected_version: 0 });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  });
  after(async () => {
    await service?.stop();
    await redis.stop();
    rmSync(allowed, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  });

  const callable = (id: string) => eventually(async () => {
    const res = await api.get(`/api/tools/${id}`);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.tool.decision.callable).to.equal(true);
  });
  const invoke = (id: string, input: unknown) => api.post(`/api/tools/${id}/invoke`, { input });

  it('reads a file inside the allowed directory through the invoke route', async () => {
    await callable('mcp__files__read_text_file');
    const res = await invoke('mcp__files__read_text_file', { path: path.join(allowed, 'inside.txt') });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.status).to.equal('completed');
    expect(res.body.result.content).to.deep.equal([{ type: 'text', text: 'the allowed text\n' }]);
  });

  it('a read outside the allowed directory reaches the caller as tool_backend_failed carrying the server\'s own error result, and no file content', async () => {
    await callable('mcp__files__read_text_file');
    const target = path.join(outside, 'secret.txt');
    const res = await invoke('mcp__files__read_text_file', { path: target });
    expect(res.status, JSON.stringify(res.body)).to.equal(502);
    expect(res.body.error.code).to.equal('tool_backend_failed');
    const result = res.body.error.details.result;
    const text = (result.content as { type: string; text?: string }[]).map((b) => b.text ?? '').join('\n');
    expect(text).to.include(`Access denied - path outside allowed directories: ${target} not in ${allowed}`);
    expect(JSON.stringify(res.body)).not.to.include('must never be read');
    // The server is still usable afterwards: the error was the tool's answer, not a broken connection.
    const again = await invoke('mcp__files__read_text_file', { path: path.join(allowed, 'inside.txt') });
    expect(again.status, JSON.stringify(again.body)).to.equal(200);
  });
});
