#!/usr/bin/env node
// The `svcctl` bin: runs the built dist/ when it is as new as the sources (`make build`, `make run`), else the
// TypeScript source through tsx (a clone edited since its last build must not run stale code).
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const built = path.join(root, 'dist/runtime/cli/svcctl.js');

/** newest is the latest modification time of the files under `dir` (the Makefile's SOURCES: not the console). */
function newest(dir) {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) { if (p !== path.join(root, 'api/console')) t = Math.max(t, newest(p)); } else t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

const sources = ['api', 'codecs', 'controllers', 'runtime', 'store'].map((d) => path.join(root, d)).filter((d) => existsSync(d));
const stamp = path.join(root, 'dist/runtime/main.js');
const fresh = existsSync(built) && existsSync(stamp) && sources.every((d) => newest(d) <= statSync(stamp).mtimeMs);
let mod;
if (fresh) {
  mod = await import(built);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  mod = await import('./svcctl.ts');
}
process.exitCode = await mod.main(process.argv.slice(2));
