// Mocha's spec reporter plus one final line "N passed, N failed", which `make test` and CI read.
const Mocha = require('mocha');

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once('end', () => {
      const { passes = 0, failures = 0 } = runner.stats ?? {};
      process.stdout.write(`${passes} passed, ${failures} failed\n`);
    });
  }
}

module.exports = SummaryReporter;
