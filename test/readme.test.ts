import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ServiceFixture } from './helpers/fixture.ts';

const README = fileURLToPath(new URL('../README.md', import.meta.url));
// NOTE: `make cli` puts svcctl on PATH; the examples get the same from this clone's bin (package.json "bin").
const BIN = mkdtempSync(path.join(os.tmpdir(), 'readme-bin-'));
symlinkSync(fileURLToPath(new URL('../runtime/cli/svcctl.mjs', import.meta.url)), path.join(BIN, 'svcctl'));

/** runnableBlocks returns the README's `sh` blocks that talk to localhost:8080 and have no `…` placeholders. */
function runnableBlocks(): string[] {
  const blocks = [...readFileSync(README, 'utf8').matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
  return blocks.filter((b) => b.includes('localhost:8080') && !b.includes('…'));
}

describe('README: every runnable curl example works against a real service', function () {
  this.timeout(120_000);
  // NOTE: the README's examples create their own workspace (at $PWD), so the fixture makes none.
  const f = new ServiceFixture({ workspace: false }).install();

  it('finds the examples to run', () => {
    expect(runnableBlocks().length).to.be.at.least(2);
  });

  for (const [i, block] of runnableBlocks().entries()) {
    it(`runs block ${i + 1} (${block.split('\n')[0].slice(0, 60)}…) with every request answered below 400`, async () => {
      const host = new URL(f.service.url).host;
      // NOTE: streams (-N) never end by themselves: a timeout (curl exit 28) after their output is their success.
      const prelude = 'set -euo pipefail\ncurl() { command curl --fail-with-body --max-time 3 "$@" || { rc=$?; [ "$rc" -eq 28 ] || return "$rc"; }; }\n';
      // NOTE: spawn, not spawnSync: the service runs in this process and must keep answering.
      const child = spawn('bash', ['-c', prelude + block.replaceAll('localhost:8080', host)], { cwd: f.root, env: { PATH: `${BIN}:${process.env.PATH}`, HOME: process.env.HOME, SVCCTL_CONFIG: path.join(BIN, 'none.yaml') } });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => { stdout += d; });
      child.stderr.on('data', (d) => { stderr += d; });
      const code = await new Promise((resolve) => child.on('close', resolve));
      expect(code, `${stdout}\n${stderr}`).to.equal(0);
      expect(stdout).to.not.match(/"error":/);
    });
  }
});
