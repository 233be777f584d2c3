// Mocha's spec reporter plus, at the end, one line "failed: <test> (<file>): <error>" per failure and one final line
// "N passed, N failed", which `make test` and CI read (CI shows only the output's tail: the failures must be there).
const Mocha = require('mocha');

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const failed = [];
    runner.on('fail', (test, err) => {
      const where = test.file ? ` (${require('node:path').relative(process.cwd(), test.file)})` : '';
      failed.push(`failed: ${test.fullTitle()}${where}: ${String(err?.message ?? err).split('\n')[0].slice(0, 300)}`);
    });
    runner.once('end', () => {
      const { passes = 0, failures = 0 } = runner.stats ?? {};
      process.stdout.write(failed.map((line) => `${line}\n`).join('') + `${passes} passed, ${failures} failed\n`);
    });
  }
}

module.exports = SummaryReporter;
