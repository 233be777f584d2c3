// Sums the closing "N passed, N failed" lines of the test runs named on the command line into one such line (the
// last line `make test` prints, which CI reads); exits 1 when a run failed, ran no test, or printed no summary.
import { readFileSync } from 'node:fs';

let passed = 0;
let failed = 0;
let ok = true;
for (const file of process.argv.slice(2)) {
  const m = /^(\d+) passed, (\d+) failed$/m.exec(readFileSync(file, 'utf8').trimEnd().split('\n').at(-1) ?? '');
  if (!m || Number(m[1]) === 0) {
    process.stderr.write(`make test: ${file} has no test summary or ran no test\n`);
    ok = false;
    continue;
  }
  passed += Number(m[1]);
  failed += Number(m[2]);
}
process.stdout.write(`${passed} passed, ${failed} failed\n`);
process.exit(ok && failed === 0 ? 0 : 1);
