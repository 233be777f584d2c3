// The test run's settings. `npx mocha` runs every suite; `npx mocha <file>...` runs only the files named.
// NOTE: mocha adds a configuration's spec to the files on the command line, so naming one file ran the whole suite
// as well; the spec is left out when the command line names a test file or folder.
const named = process.argv.slice(2).some((a) => !a.startsWith('-') && /^(\.\/)?test\//.test(a));

module.exports = {
  spec: named ? [] : ['test/**/*.test.ts'],
  require: ['test/helpers/slot-guard.ts'],
  'node-option': ['import=tsx'],
  extension: ['ts'],
  exit: true,
  timeout: 60000,
  reporter: './test/reporter.cjs',
};
