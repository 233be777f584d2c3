// The dependency rule of DESIGN.md, checked by `make test` (depcruise): dependencies point down,
// api -> runtime -> (controllers' enqueue, store) -> codecs; nothing imports api/ but the composition root;
// no import circles anywhere.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'an import circle hides which layer owns what', from: {}, to: { circular: true } },
    {
      name: 'only-the-root-imports-api', severity: 'error', comment: 'api/ speaks HTTP; everything below it must work without it',
      from: { path: '^(runtime|controllers|store|codecs)/', pathNot: '^runtime/process/service\\.ts$' }, to: { path: '^api/' },
    },
    {
      name: 'store-and-codecs-stay-low', severity: 'error', comment: 'store/ and codecs/ know nothing of the layers above them',
      from: { path: '^(store|codecs)/' }, to: { path: '^(api|runtime|controllers)/' },
    },
    {
      name: 'controllers-below-runtime-views', severity: 'error', comment: 'controllers use the store and codecs, not the API',
      from: { path: '^controllers/' }, to: { path: '^api/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|test|\\.tools|api/console)/' },
    parser: 'swc',
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
