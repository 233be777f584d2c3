import http from 'node:http';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '/work/main/test/helpers/service.ts';
const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };
const port = Number(process.env.P ?? 8099); const url = `http://127.0.0.1:${port}`;
const api = new Client(url);
const ws = (await api.post('/api/workspaces', { root_dir: mkdtempSync(path.join(os.tmpdir(), 'b-')) })).body.workspace;
const p = (await api.post('/api/sessions', { workspace: ws.id })).body.session;
const agentPool = new http.Agent({ keepAlive: true, maxSockets: 1 });
const promptHttp = (id: string, message: string) => new Promise<string>((resolve, reject) => {
  const req = http.request({ host: '127.0.0.1', port, path: `/api/workspaces/${ws.id}/sessions/${id}/prompt`, method: 'POST', agent: agentPool, headers: { 'content-type': 'application/json' } }, (res) => {
    let body = ''; res.setEncoding('utf8'); res.on('data', (c) => { body += c; }); res.on('end', () => resolve(body));
  });
  req.on('error', reject); req.end(JSON.stringify({ message }));
});
const N = Number(process.argv[2] ?? 500);
const xs: number[] = [];
for (let i = 0; i < N; i++) { const s = performance.now(); await promptHttp(p.id, 'hello'); xs.push(performance.now() - s); }
console.log(`p50 ${pct(xs, 50).toFixed(2)} p90 ${pct(xs, 90).toFixed(2)}`);
process.exit(0);
