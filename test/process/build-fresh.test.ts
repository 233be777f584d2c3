import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

describe('The build: an unchanged tree is not rebuilt', () => {
  it('make finds dist/runtime/main.js up to date right after it was built (make run then starts at once)', () => {
    // NOTE: `make test` builds first, so the compiled service is fresh here; the build script also rebuilds the
    // console after compiling, which left the entry point older than the console and rebuilt it at every start.
    const q = spawnSync('make', ['-q', 'dist/runtime/main.js'], { cwd: root, encoding: 'utf8' });
    expect(q.status, `make -q says dist/runtime/main.js is stale (run \`make build\` if you changed a source): ${q.stdout}${q.stderr}`).to.equal(0);
  });
});
