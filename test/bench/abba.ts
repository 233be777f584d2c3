// A before/after of one benchmark on this machine: `node --import tsx test/bench/abba.ts <rev> <bench> [blocks]`
// runs test/bench/<bench>.ts on a detached, built worktree of <rev> (A) and on this checkout as built (B), in ABBA
// order, `blocks` times (default 2), and prints each run's output under its label. Not a test: no assertions.
//
// NOTE: ABBA, not ABAB: on the shared 2-core machines here the second run of a back-to-back pair differs from the
// first by more than most changes do (README "Memory injection in two reads, and the order of an A/B pair"), and
// ABBA puts each side first and second equally often. Build this checkout first (`npm run build`): the benches
// run the compiled service.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const [rev, bench, blocksArg] = process.argv.slice(2);
if (!rev || !bench) {
  console.error('usage: node --import tsx test/bench/abba.ts <rev> <bench> [blocks]   (e.g. HEAD~1 tasks 2)');
  process.exit(2);
}
const here = process.cwd();
const script = path.join('test/bench', `${bench}.ts`);
if (!existsSync(script)) throw new Error(`no benchmark ${script}`);
const blocks = Number(blocksArg ?? 2);

const base = mkdtempSync(path.join(os.tmpdir(), 'svc-abba-'));
const git = (...args: string[]) => execFileSync('git', args, { cwd: here, stdio: ['ignore', 'pipe', 'inherit'] }).toString().trim();
const sha = git('rev-parse', '--short', rev);
let added = false;
try {
  git('worktree', 'add', '--detach', base, sha);
  added = true;
  symlinkSync(path.join(here, 'node_modules'), path.join(base, 'node_modules'));
  // NOTE: the console's built assets are not in git; the service serves them, the benchmarks never read them.
  if (existsSync(path.join(here, 'api/console/dist'))) cpSync(path.join(here, 'api/console/dist'), path.join(base, 'api/console/dist'), { recursive: true });
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: base, stdio: 'inherit' });
  const run = (label: string, cwd: string) => {
    console.log(`== ${label}`);
    const r = spawnSync(process.execPath, ['--import', 'tsx', script], { cwd, stdio: 'inherit', env: process.env });
    if (r.status !== 0) throw new Error(`${label}: ${script} exited with ${r.status}`);
  };
  for (let b = 1; b <= blocks; b++) {
    for (const side of ['A', 'B', 'B', 'A']) run(side === 'A' ? `A (${sha}) block ${b}` : `B (this checkout) block ${b}`, side === 'A' ? base : here);
  }
} finally {
  if (added) git('worktree', 'remove', '--force', base);
  rmSync(base, { recursive: true, force: true });
}
