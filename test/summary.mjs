// Sums the closing "N passed, N failed" lines of the test runs named on the command line into one such line (the
// last line `make test` prints, which CI reads), after repeating each run's "failed: ..." lines (test/reporter.cjs)
// so the failures are in the tail CI shows; exits 1 when a run failed, ran no test, or printed no summary.
import { readFileSync } from 'node:fs';

let passed = 0;
let failed = 0;
let ok = true;
for (const file of process.argv.slice(2)) {
  const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
  for (const line of lines) if (line.startsWith('failed: ')) process.stdout.write(`${file}: ${line}\n`);
  const m = /^(\d+) passed, (\d+) failed$/.exec(lines.at(-1) ?? '');
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
