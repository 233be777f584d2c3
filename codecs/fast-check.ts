import type * as yup from 'yup';

/**
 * passes tells, without yup's validation machinery, that a value satisfies a schema in strict mode: it runs the
 * schema's own test functions (type check, nullability, optionality, oneOf, required, min, max, custom tests) and
 * descends into object fields and array items as yup does. It answers true only when every test returned exactly
 * `true`; anything else (a failure, a reference, a condition, a lazy or tuple schema, a test that throws or needs
 * yup's context) is false, and the caller then asks yup, which decides and names the errors. So a valid value
 * costs a walk (about a tenth of `validateSync`, which allocates options, error arrays and closures per field)
 * and an invalid one the same as before.
 */
export function passes(schema: yup.Schema, value: unknown): boolean {
  const fn = compiled(schema);
  if (!fn) return false;
  try {
    return fn(value, undefined);
  } catch {
    return false;
  }
}

type Check = (value: unknown, parent: unknown) => boolean;

// NOTE: yup's own sentinel-free shapes: tests are functions carrying OPTIONS; a ref has __isYupRef.
interface TestFn { OPTIONS?: { name?: string; skipAbsent?: boolean; test: (this: unknown, v: unknown, ctx: unknown) => unknown } }
interface SchemaInternals {
  type: string;
  spec: { recursive?: boolean };
  conditions: unknown[];
  internalTests: Record<string, TestFn | undefined>;
  tests: TestFn[];
  _whitelist: Set<unknown>;
  _blacklist: Set<unknown>;
  fields?: Record<string, unknown>;
  _nodes?: string[];
  innerType?: unknown;
}

const SUPPORTED = new Set(['mixed', 'string', 'number', 'boolean', 'object', 'array']);
const cache = new WeakMap<object, Check | null>();
const isRef = (x: unknown) => Boolean(x && (x as { __isYupRef?: boolean }).__isYupRef);
const FAIL = Symbol('fail');
const resolve = (x: unknown) => {
  if (isRef(x)) throw new Error('reference');
  return x;
};
// NOTE: yup's object type check (lib/util/isObject): a plain object, not an array.
const isPlainObject = (v: unknown) => Object.prototype.toString.call(v) === '[object Object]';

function compiled(schema: unknown): Check | null {
  let fn = cache.get(schema as object);
  if (fn === undefined) {
    fn = compile(schema as SchemaInternals);
    cache.set(schema as object, fn);
  }
  return fn;
}

function compile(s: SchemaInternals): Check | null {
  if (!s || !SUPPORTED.has(s.type) || s.conditions?.length) return null;
  for (const x of [...(s._whitelist ?? []), ...(s._blacklist ?? [])]) if (isRef(x)) return null;
  // NOTE: yup's internal tests (lib/schema.ts: typeError, nullable, optionality, whiteList, blacklist) are read
  // straight from the schema; any other test runs its own function with a context like yup's.
  const checks: ((v: unknown, parent: unknown) => boolean)[] = [];
  const spec = s.spec as { nullable?: boolean; optional?: boolean; recursive?: boolean };
  for (const [name, t] of Object.entries(s.internalTests ?? {})) {
    if (!t) continue;
    const typeCheck = (s as unknown as { _typeCheck: (v: unknown) => boolean })._typeCheck.bind(s);
    if (name === 'typeError') checks.push((v) => v == null || typeCheck(v));
    else if (name === 'nullable') checks.push((v) => v !== null || spec.nullable === true);
    else if (name === 'optionality') checks.push((v) => v !== undefined || spec.optional === true);
    else if (name === 'whiteList') { const ok = new Set(s._whitelist); checks.push((v) => v == null || ok.has(v)); }
    else if (name === 'blacklist') { const no = new Set(s._blacklist); checks.push((v) => v == null || !no.has(v)); }
    else return null;
  }
  for (const t of s.tests ?? []) {
    const o = t?.OPTIONS;
    if (!o || typeof o.test !== 'function') return null;
    const { test, skipAbsent } = o;
    const type = o.name ?? '';
    checks.push((v, parent) => {
      if (skipAbsent && v == null) return true;
      const ctx = { schema: s, parent, path: '', options: {}, originalValue: v, from: [], resolve, createError: () => FAIL, type };
      return test.call(ctx, v, ctx) === true;
    });
  }
  const recursive = spec?.recursive !== false;
  const fields: [string, Check][] = [];
  let item: Check | null = null;
  if (recursive && s.type === 'object') {
    for (const key of s._nodes ?? []) {
      const f = s.fields?.[key];
      if (!f || isRef(f)) continue;
      const c = compiled(f);
      if (!c) return null;
      fields.push([key, c]);
    }
  }
  if (recursive && s.type === 'array' && s.innerType) {
    item = compiled(s.innerType);
    if (!item) return null;
  }
  return (value, parent) => {
    for (let i = 0; i < checks.length; i++) if (!checks[i](value, parent)) return false;
    if (fields.length && isPlainObject(value)) {
      const o = value as Record<string, unknown>;
      for (const [key, c] of fields) if (!c(o[key], o)) return false;
    }
    if (item && Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) if (!item(value[i], value)) return false;
    }
    return true;
  };
}
