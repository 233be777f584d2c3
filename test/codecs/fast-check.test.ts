import { expect } from 'chai';
import fc from 'fast-check';
import * as yup from 'yup';
import { passes } from '../../codecs/fast-check.ts';
import { y } from '../../codecs/shared.ts';

const isValid = (s: yup.Schema, v: unknown) => {
  try {
    s.validateSync(v, { strict: true, abortEarly: false });
    return true;
  } catch (err) {
    if (err instanceof yup.ValidationError) return false;
    throw err;
  }
};

// Every yup piece the codecs use (codecs/*.ts), alone and nested the way the codecs nest them.
const leaves: Record<string, yup.Schema> = {
  string: y.string(), requiredString: y.string().required('is required'), bool: y.bool(), int32: y.int32(),
  stringList: y.stringList(), stringMap: y.stringMap(), object: y.object(), oneOf: y.oneOf(['a', 'b', '']),
  requiredOneOf: y.oneOf(['x', 'y']).required('is required'), array: yup.array(), number: yup.number().min(1).max(10),
  nullableObject: y.object().nullable(), requiredObject: y.object().required('is required'), definedString: yup.string().defined(),
  trimmed: yup.string().trim(), positiveInt: yup.number().integer().min(0), nullableString: yup.string().nullable(),
};
const nested = yup.object({
  ...leaves,
  inner: y.object().shape({ name: y.string().required('is required'), tags: y.stringList(), mode: y.oneOf(['cron', 'every']).required('is required') }).default(undefined),
  list: yup.array(yup.object({ id: y.string().required('is required'), n: y.int32() })),
  required: y.object().required('is required').shape({ kind: y.oneOf(['k1', 'k2']).required('is required'), extra: y.stringMap() }),
});

const scalar = fc.oneof(fc.string({ maxLength: 4 }), fc.constantFrom('', ' ', 'a', 'b', 'x', 'cron', 'k1'), fc.integer({ min: -3, max: 12 }),
  fc.double(), fc.boolean(), fc.constant(null), fc.constant(undefined), fc.constant(2 ** 40));
const value = fc.letrec((tie) => ({
  v: fc.oneof({ depthSize: 'small' }, scalar, fc.array(tie('v'), { maxLength: 3 }), fc.dictionary(fc.constantFrom(...Object.keys(leaves), 'inner', 'list', 'required', 'name', 'tags', 'mode', 'id', 'n', 'kind', 'extra'), tie('v'), { maxKeys: 6 })),
})).v;

describe('Codecs: the fast shape check (codecs/fast-check.ts) agrees with yup', () => {
  it('agrees with yup strict validation on every piece the codecs use, for random values', () => {
    fc.assert(fc.property(value, (v) => {
      for (const [name, s] of Object.entries(leaves)) expect(passes(s, v), `${name} ${JSON.stringify(v)}`).to.equal(isValid(s, v));
      expect(passes(nested, v), JSON.stringify(v)).to.equal(isValid(nested, v));
    }), { numRuns: 3000 });
  });

  it('agrees on nested values built around the schema (valid ones and one field off)', () => {
    const good = {
      string: 's', requiredString: 'r', bool: true, int32: 3, stringList: ['a'], stringMap: { A: 'b' }, object: {}, oneOf: '', requiredOneOf: 'x',
      array: [1, 'x'], number: 5, nullableObject: null, requiredObject: { any: 1 }, definedString: '', trimmed: 't', positiveInt: 0, nullableString: null,
      inner: { name: 'n', tags: [], mode: 'every' }, list: [{ id: 'i', n: 1 }], required: { kind: 'k2', extra: {} },
    };
    expect(passes(nested, good)).to.equal(true);
    expect(isValid(nested, good)).to.equal(true);
    fc.assert(fc.property(fc.constantFrom(...Object.keys(good)), scalar, (key, x) => {
      const v = { ...good, [key]: x };
      expect(passes(nested, v), JSON.stringify(v)).to.equal(isValid(nested, v));
    }), { numRuns: 2000 });
  });

  it('declines what it does not model (conditions, lazy schemas, references), so yup decides', () => {
    const withWhen = yup.object({ a: yup.string(), b: yup.string().when('a', { is: 'x', then: (s) => s.required() }) });
    expect(passes(withWhen, { a: 'y' })).to.equal(false);
    expect(passes(yup.lazy(() => yup.string()) as unknown as yup.Schema, 'a')).to.equal(false);
    expect(passes(yup.object({ a: yup.string(), b: yup.string().oneOf([yup.ref('a')]) }), { a: 'q', b: 'q' })).to.equal(false);
    expect(passes(yup.mixed().test('ctx', 'needs yup', function (v) { return v === (this as unknown as { parent?: unknown }).parent; }), 1)).to.equal(false);
  });
});
