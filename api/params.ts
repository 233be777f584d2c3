import type { Context } from 'koa';
import { InputError, ValidationError } from '../store/errors.ts';
import { FIELD_VALIDATION, type FieldValidation } from '../runtime/validation/field-validation.ts';

type Query = Record<string, string | string[] | undefined>;

/** queryString returns a single-valued query parameter; repeating it is a 400. */
export function queryString(q: Query, name: string): string | undefined {
  const v = q[name];
  if (Array.isArray(v)) throw new InputError(`query parameter "${name}" is given more than once`, 'invalid_query', { [name]: v });
  return v === undefined || v === '' ? undefined : v;
}

/** queryBool parses `true|false|1|0`; anything else is a 400. */
export function queryBool(q: Query, name: string): boolean {
  const v = queryString(q, name);
  if (v === undefined) return false;
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  throw new InputError(`query parameter "${name}" must be true or false`, 'invalid_query', { [name]: v });
}

/**
 * queryInt parses a non-negative int32. NOTE: one rule for every value outside 0..max, `abc` as `-1`: a 422 naming
 * the parameter, as an unknown enum value (`status=bogus`) is; a query string always decodes, only its value is wrong.
 */
export function queryInt(q: Query, name: string, dflt: number, max = 2_147_483_647): number {
  const v = queryString(q, name);
  if (v === undefined) return dflt;
  const n = /^-?\d+$/.test(v) ? Number(v) : NaN;
  if (!(n >= 0 && n <= max)) throw new ValidationError(`query parameter "${name}" must be an integer from 0 to ${max}`, 'invalid_query', { [name]: `must be an integer from 0 to ${max}` });
  return n;
}

/** bodyObject returns the JSON body as an object; any other JSON value is a 422 naming the body. */
export function bodyObject(body: unknown): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new ValidationError('request body must be a JSON object', 'invalid_body', { body: 'must be a JSON object' });
  }
  return body as Record<string, unknown>;
}

/** queryFieldValidation reads `?field_validation=strict|warn|ignore` (default strict); anything else is a 400. */
export function queryFieldValidation(q: Query): FieldValidation {
  const v = queryString(q, 'field_validation') ?? 'strict';
  if (!(FIELD_VALIDATION as readonly string[]).includes(v)) {
    throw new InputError(`query parameter "field_validation" must be one of ${FIELD_VALIDATION.join(', ')}`, 'invalid_query', { field_validation: v });
  }
  return v as FieldValidation;
}

/** setWarnings answers each warning as its own `Warning: 299 - "…"` header, as kube-apiserver does. */
export function setWarnings(ctx: Context, warnings: readonly string[] | undefined): void {
  if (warnings?.length) ctx.set('Warning', warnings.map((w) => `299 - ${JSON.stringify(w)}`));
}
