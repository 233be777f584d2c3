import { parseVaultRef, type VaultNamespace } from './vault-ref.ts';
import * as yup from 'yup';
import { passes } from './fast-check.ts';
import { MAX_ID_LENGTH, tooLong } from './limits.ts';
import type { FieldError } from './types.ts';

/**
 * Issues collects every field error of one decode, so a rejection names all failing paths at once.
 * Paths use dots and `[i]` (e.g. `profiles[0].jobs[1].schedule.expr`).
 */
export class Issues {
  readonly list: FieldError[] = [];
  /** unknown is the caller's sink for unknown field paths (DecodeContext.unknownFields); check() fills it. */
  constructor(readonly unknown?: string[]) {}
  add(path: string, message: string): void {
    this.list.push({ path, message });
  }
  get ok(): boolean {
    return this.list.length === 0;
  }
}

/** join builds a child path. */
export const at = (base: string, key: string | number) => (typeof key === 'number' ? `${base}[${key}]` : base ? `${base}.${key}` : key);

/**
 * check validates a value's shape with a yup schema in strict mode (no coercion: `"1"` is not a number)
 * and records every error under `base`. It returns whether the shape held.
 */
export function check(schema: yup.Schema, value: unknown, issues: Issues, base = ''): boolean {
  if (issues.unknown) unknownFields(schema, value, base, issues.unknown);
  // NOTE: a value that passes the schema's own tests needs no yup run (see fast-check.ts); yup names the errors.
  if (passes(schema, value)) return true;
  try {
    schema.validateSync(value, { strict: true, abortEarly: false });
    return true;
  } catch (err) {
    if (!(err instanceof yup.ValidationError)) throw err;
    const all = err.inner.length ? err.inner : [err];
    // NOTE: yup's own messages start with the path ("a must be …"); a schema's custom ones ("must be at least 1") do not.
    for (const e of all) issues.add(at(base, e.path ?? '').replace(/\.$/, '') || base || 'spec', stripPath(e.message, e.path || 'this'));
    return false;
  }
}

const stripPath = (message: string, path: string) => (message.startsWith(`${path} `) ? message.slice(path.length + 1) : message);

/**
 * unknownFields appends the path of each key of `value` that its object schema does not define, through nested
 * object shapes and arrays of them. NOTE: an object schema without fields (`y.object()`, `y.stringMap()`) is an
 * open map; an array without an item schema is decoded (and checked) element by element by its own decoder.
 */
function unknownFields(schema: yup.Schema, value: unknown, base: string, out: string[]): void {
  if (schema instanceof yup.ArraySchema && Array.isArray(value) && schema.innerType) {
    value.forEach((v, i) => unknownFields(schema.innerType as yup.Schema, v, at(base, i), out));
  }
  if (!(schema instanceof yup.ObjectSchema) || !isObject(value)) return;
  const fields = schema.fields as Record<string, yup.Schema>;
  if (!Object.keys(fields).length) return;
  for (const [k, v] of Object.entries(value)) {
    const p = at(base, k);
    if (!Object.hasOwn(fields, k)) {
      if (!out.includes(p)) out.push(p);
    } else unknownFields(fields[k], v, p, out);
  }
}

/** ID_PATTERN is the record id grammar: one case-sensitive path segment of at most MAX_ID_LENGTH. */
export const ID_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._-]{0,${MAX_ID_LENGTH - 1}}$`);

/**
 * checkLengths records an issue for every string in a spec, at any depth, under a field with a maximum length
 * (codecs/limits.ts) that is longer: so every kind's names and ids are bounded by one rule, nested ones too (an
 * agent's `mcp_servers[0].name`, a bundle profile's agents), without a limit in each codec.
 */
export function checkLengths(v: unknown, base: string, issues: Issues): void {
  const stack: [unknown, string][] = [[v, base]];
  while (stack.length) {
    const [x, path] = stack.pop()!;
    if (Array.isArray(x)) x.forEach((e, i) => stack.push([e, at(path, i)]));
    else if (x !== null && typeof x === 'object') {
      for (const [k, e] of Object.entries(x)) {
        const problem = tooLong(k, e);
        if (problem) issues.add(at(path, k), problem);
        else stack.push([e, at(path, k)]);
      }
    }
  }
}

/** isNonEmptyString is true for a string with something besides white space. */
export const isNonEmptyString = (v: unknown): v is string => typeof v === 'string' && v.trim() !== '';

/** isObject is true for a plain JSON object. */
export const isObject = (v: unknown): v is Record<string, any> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** str trims a string field; anything not a string becomes "". */
export const str = (v: unknown): string => (typeof v === 'string' ? v.trim() : '');

/** strs trims each entry of a string list and drops empties; `dedupe` keeps the first of equal entries. */
export function strs(v: unknown, dedupe = false): string[] {
  const out = Array.isArray(v) ? v.map(str).filter(Boolean) : [];
  return dedupe ? [...new Set(out)] : out;
}

/** strMap trims keys and values of a string map, dropping empty keys; an empty map becomes undefined. */
export function strMap(v: unknown): Record<string, string> | undefined {
  if (!isObject(v)) return undefined;
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) if (k.trim()) out[k.trim()] = str(x);
  return Object.keys(out).length ? out : undefined;
}

/** Common yup pieces. */
export const y = {
  string: () => yup.string(),
  bool: () => yup.boolean(),
  int32: () => yup.number().integer('must be an integer').min(-2147483648).max(2147483647),
  stringList: () => yup.array(yup.string().defined('must be a string')),
  stringMap: () => yup.object().test('string-map', 'must be an object of strings', (v) => v === undefined || v === null || (isObject(v) && Object.values(v).every((x) => typeof x === 'string'))),
  object: () => yup.object().test('object', 'must be an object', (v) => v === undefined || v === null || isObject(v)),
  oneOf: <T extends string>(values: readonly T[]) => yup.string().oneOf([...values, undefined as unknown as T], `must be one of ${values.join(', ')}`),
};

/** ENV_KEY is the grammar of an environment variable name. */
export const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SECRET_WORDS = ['SECRET', 'TOKEN', 'PASSWORD', 'PASSWD', 'API_KEY', 'APIKEY', 'PRIVATE_KEY', 'PRIVATEKEY', 'AUTHORIZATION', 'BEARER', 'CREDENTIAL'];
const NOT_SECRET_SUFFIX = ['_URL', '_URI', '_PATH', '_FILE', '_DIR'];

/** looksSecret is the spec's secret-like env name rule (they belong in `secret_env`). */
export function looksSecret(key: string): boolean {
  const k = key.toUpperCase();
  return SECRET_WORDS.some((w) => k.includes(w)) && !NOT_SECRET_SUFFIX.some((s) => k.endsWith(s));
}

/** checkEnv applies the env key grammar and the secret-like name rule. */
export function checkEnv(env: Record<string, string> | undefined, base: string, issues: Issues): void {
  for (const key of Object.keys(env ?? {})) {
    if (!ENV_KEY.test(key)) issues.add(at(base, key), 'must match ^[A-Za-z_][A-Za-z0-9_]*$');
    else if (looksSecret(key)) issues.add(at(base, key), 'looks like a secret; put it in secret_env');
  }
}

/**
 * secretRefProblem says why a secret ref is not `env:NAME` or a vault ref of `namespace`, or
 * undefined when it is one.
 */
export function secretRefProblem(ref: string, namespace: VaultNamespace): string | undefined {
  if (/^env:[A-Za-z_][A-Za-z0-9_]*$/.test(ref)) return undefined;
  const v = parseVaultRef(ref);
  if (v.ok && v.value.namespace === namespace) return undefined;
  return `must be env:NAME or vault:${namespace}/<path>${ref.startsWith(`vault:${namespace}/`) && !v.ok ? ` (${v.problem})` : ''}`;
}

/** checkSecretRefs requires each value to be `env:NAME` or `vault:<namespace>/<path>`. */
export function checkSecretRefs(refs: Record<string, string> | undefined, namespace: VaultNamespace, base: string, issues: Issues): void {
  for (const [key, ref] of Object.entries(refs ?? {})) {
    if (!ENV_KEY.test(key)) issues.add(at(base, key), 'must match ^[A-Za-z_][A-Za-z0-9_]*$');
    const problem = secretRefProblem(ref, namespace);
    if (problem) issues.add(at(base, key), problem);
  }
}

/** compactJson re-marshals a JSON value with sorted keys (a canonical, comparable form). */
export function sortedJson(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortedJson);
  if (isObject(v)) return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortedJson(v[k])]));
  return v;
}
