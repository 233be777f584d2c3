#!/usr/bin/env node
// The `svcctl` bin: runs the built dist/ when there is one, else the TypeScript source through tsx (a clone).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const built = fileURLToPath(new URL('../../dist/runtime/cli/svcctl.js', import.meta.url));
let mod;
if (existsSync(built)) {
  mod = await import(built);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  mod = await import('./svcctl.ts');
}
process.exitCode = await mod.main(process.argv.slice(2));
