import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { compiledArgv, ServiceProcess } from './helpers/process.ts';
import { RedisServer } from './helpers/redis-server.ts';

const README = fileURLToPath(new URL('../README.md', import.meta.url));
// NOTE: examples that use files of the repository (the example extension) find it through SVC_REPO.
const REPO = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
// NOTE: `make cli` puts svcctl on PATH; the examples get the same from this clone's bin (package.json "bin").
const BIN = mkdtempSync(path.join(os.tmpdir(), 'readme-bin-'));
symlinkSync(fileURLToPath(new URL('../runtime/cli/svcctl.mjs', import.meta.url)), path.join(BIN, 'svcctl'));

/** runnableBlocks returns the README's `sh` blocks that talk to localhost:8080 and have no `…` placeholders. */
function runnableBlocks(): string[] {
  const blocks = [...readFileSync(README, 'utf8').matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
  return blocks.filter((b) => b.includes('localhost:8080') && !b.includes('…'));
}

/**
 * run runs a README block in a shell against the service at `host` from `cwd`, and returns its exit code and
 * output. Every request must answer below 400; `again` (the block's second run) also lets a request answer 409,
 * as the create of something the first run made does, and requires every other line to work.
 */
async function run(block: string, host: string, cwd: string, again = false): Promise<{ code: unknown; out: string }> {
  // NOTE: streams (-N) never end by themselves: a timeout (curl exit 28) after their output is their success.
  const tolerated = again ? '[ "$rc" -eq 28 ] || { [ "$rc" -eq 22 ] && [ "$(tail -n1 "$CODES")" = 409 ]; }' : '[ "$rc" -eq 28 ]';
  const prelude = `set -euo pipefail\nCODES=$(mktemp)\ncurl() { command curl --fail-with-body --max-time 3 -w '%{stderr}%{http_code}\\n' "$@" 2>>"$CODES" || { rc=$?; ${tolerated} || return "$rc"; }; }\n`;
  const child = spawn('bash', ['-c', prelude + block.replaceAll('localhost:8080', host)], { cwd, env: { PATH: `${BIN}:${process.env.PATH}`, HOME: process.env.HOME, SVCCTL_CONFIG: path.join(BIN, 'none.yaml'), SVC_REPO: REPO } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  const code = await new Promise((resolve) => child.on('close', resolve));
  // NOTE: an error body is `{"error": …, "diagnostic": …}`; a 409 is what a second run may meet.
  if (!again) expect(stdout).to.not.match(/"error":\s*"[^"]*",\s*"diagnostic"/);
  return { code, out: `${stdout}\n${stderr}` };
}

describe('README: every runnable curl example works against the compiled service, twice', function () {
  this.timeout(120_000);
  const redis = new RedisServer();
  let service: ServiceProcess | undefined;
  let root = '';
  let data = '';
  before(() => redis.start());
  after(() => redis.destroy());
  // NOTE: what `make run` starts (node dist/runtime/main.js), fresh for each example; the examples create their own
  // workspace (at $PWD).
  beforeEach(async () => {
    await redis.flush();
    root = mkdtempSync(path.join(os.tmpdir(), 'svc-readme-'));
    data = mkdtempSync(path.join(os.tmpdir(), 'svc-readme-data-'));
    service = await new ServiceProcess({ ...redis.env, DATA_DIR: data }, compiledArgv()).start();
  });
  afterEach(async () => {
    await service?.kill('SIGKILL');
    rmSync(root, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  });

  it('finds the examples to run', () => {
    expect(runnableBlocks().length).to.be.at.least(2);
  });

  for (const [i, block] of runnableBlocks().entries()) {
    it(`runs block ${i + 1} (${block.split('\n')[0].slice(0, 60)}…) twice, every request answered below 400`, async () => {
      const host = new URL(service!.url).host;
      const first = await run(block, host, root);
      expect(first.code, first.out).to.equal(0);
      // NOTE: a user pastes a snippet again: it must find what its first run made, not fail on it.
      const again = await run(block, host, root, true);
      expect(again.code, `second run:\n${again.out}`).to.equal(0);
    });
  }
});

describe('README: statements about the code stay true', () => {
  const text = readFileSync(README, 'utf8').replace(/\s+/g, ' ');

  it('the status of every tool error code it names is the one the service answers', async () => {
    const { TOOL_STATUS } = await import('../runtime/tools/types.ts');
    for (const m of text.matchAll(/(\d{3}) `(tool_[a-z_]+)`|`(tool_[a-z_]+)` is (\d{3})/g)) {
      const [code, status] = m[2] ? [m[2], m[1]] : [m[3], m[4]];
      expect(TOOL_STATUS[code], code).to.equal(Number(status));
    }
  });

  it('the hook events it lists as emitted are emitted, and those it lists as not emitted are not', async () => {
    const { HOOK_EVENTS, isEmitted } = await import('../runtime/hooks/catalog.ts');
    const between = (from: string, to: string) => text.slice(text.indexOf(from), text.indexOf(to, text.indexOf(from)));
    /** names expands a list's backticked names, `a.b`/`c` as a.b and a.c, `x.*` as every catalog event under x. */
    const names = (s: string) => [...s.matchAll(/`([a-z_.*]+)`(?:\/`([a-z_]+)`)*/g)].flatMap((m) => {
      const all = [m[1], ...[...m[0].matchAll(/\/`([a-z_]+)`/g)].map((x) => m[1].replace(/[a-z_]+$/, x[1]))];
      return all.flatMap((n) => (n.endsWith(".*") ? HOOK_EVENTS.filter((e) => e.startsWith(n.slice(0, -1))) : [n]));
    }).filter((n) => (HOOK_EVENTS as readonly string[]).includes(n));
    const emitted = names(between('Emitted today:', '**Not emitted**'));
    const notEmitted = names(between('**Not emitted**', 'Hook declarations inside'));
    expect(emitted.length).to.be.greaterThan(10);
    for (const e of emitted) expect(isEmitted(e), `${e} is listed as emitted`).to.equal(true);
    for (const e of notEmitted) expect(isEmitted(e), `${e} is listed as not emitted`).to.equal(false);
    for (const e of HOOK_EVENTS) expect(emitted.includes(e) || notEmitted.includes(e), `${e} is listed`).to.equal(true);
  });
});
