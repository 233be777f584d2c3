// `make bench`, tools part: prints figures from one run on this machine. Not a test: no assertions.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { RedisServer } from '../helpers/redis-server.ts';
import { ServiceProcess } from '../helpers/process.ts';
import { Client } from '../helpers/service.ts';
import { KeepAliveClient } from '../helpers/keep-alive.ts';

const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };
const FIXTURE = path.resolve('test/helpers/mcp-server.ts');
const TOOLS = 1000;

async function timed(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    out.push(performance.now() - t);
  }
  return out;
}

async function main() {
  const redis = await new RedisServer().start();
  const data = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-tools-'));
  writeFileSync(path.join(data, 'config.yaml'), 'tools:\n  trusted_sources: [fixture]\n');
  const svc = await new ServiceProcess({ REDIS_URL: redis.url, DATA_DIR: data }).start();
  const api = new Client(svc.url);
  try {
    // 1. GET /api/tools with 1,000 tool records registered (plus the built-ins and an MCP server's tools).
    const spec = (i: number) => ({
      id: `bench__tool_${i}`, display_title: `Bench tool ${i}`, description: 'A registered tool for the list benchmark.',
      backend: { kind: 'native_go', native_name: 'tool_search' }, source: { kind: 'extension', owner: 'bench' },
      input_schema: { type: 'object', properties: { query: { type: 'string' } } }, visibility: 'session', risk: 'read', read_only: true,
      toolsets: ['bench__all'], tags: ['bench'],
    });
    for (let i = 0; i < TOOLS; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, j) => api.put(`/api/resources/tool/t${i + j}`, { scope: { kind: 'global' }, spec: spec(i + j), expected_version: 0 })));
    }
    await api.put('/api/resources/mcp_server/fixture?wait=true', { scope: { kind: 'global' }, spec: { name: 'fixture', command: process.execPath, args: ['--import', 'tsx', FIXTURE] }, expected_version: 0 });
    for (;;) {
      const n = (await api.get('/api/tools')).body.tools.length;
      if (n >= TOOLS + 9 + 6) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    await timed(50, () => api.get('/api/tools'));
    const keepAlive = new KeepAliveClient(svc.url);
    const list = await timed(500, () => keepAlive.drain('/api/tools'));
    console.log(`GET /api/tools with ${TOOLS} tools registered (${TOOLS + 15} views): p50 ${pct(list, 50).toFixed(1)} ms, p99 ${pct(list, 99).toFixed(1)} ms over ${list.length} sequential calls (target p99 <= 20 ms)`);

    // 2. Invoke overhead: the same echo call through POST /api/tools/{id}/invoke and directly over MCP stdio.
    const direct = new McpClient({ name: 'bench', version: '1.0.0' });
    await direct.connect(new StdioClientTransport({ command: process.execPath, args: ['--import', 'tsx', FIXTURE], env: getDefaultEnvironment(), stderr: 'ignore' }));
    const N = 500;
    const call = () => direct.callTool({ name: 'echo', arguments: { text: 'ping' } });
    const invoke = () => keepAlive.request('POST', '/api/tools/mcp__fixture__echo/invoke', { input: { text: 'ping' } });
    await timed(50, call);
    await timed(50, invoke);
    const d: number[] = [];
    const v: number[] = [];
    // NOTE: alternate the two so both see the same machine load.
    for (let i = 0; i < N; i++) {
      d.push(...(await timed(1, call)));
      v.push(...(await timed(1, invoke)));
    }
    await direct.close();
    keepAlive.close();
    console.log(`Invoke overhead over a direct MCP stdio call (echo): direct p50 ${pct(d, 50).toFixed(2)} ms, via the service p50 ${pct(v, 50).toFixed(2)} ms -> overhead ${(pct(v, 50) - pct(d, 50)).toFixed(2)} ms at p50, ${(pct(v, 99) - pct(d, 99)).toFixed(2)} ms at p99 (target <= 3 ms at p50)`);
  } finally {
    await svc.kill("SIGTERM");
    await redis.destroy();
    rmSync(data, { recursive: true, force: true });
  }
}

await main();
