import { ValidationError } from '../../store/errors.ts';

/**
 * FieldValidation is what a write does with fields it does not define, as kube-apiserver's server-side field
 * validation: `strict` (the default) refuses the write with 422 naming every unknown field, `warn` applies it and
 * answers a warning per field, `ignore` applies it silently.
 */
export type FieldValidation = 'strict' | 'warn' | 'ignore';

/** FIELD_VALIDATION lists the modes, as `?field_validation=` takes them. */
export const FIELD_VALIDATION: readonly FieldValidation[] = ['strict', 'warn', 'ignore'];

/** unknownKeys lists the keys of a JSON object body that are not among `known`, as field paths under `base`. */
export function unknownKeys(body: unknown, known: readonly string[], base = ''): string[] {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return [];
  return Object.keys(body).filter((k) => !known.includes(k)).map((k) => (base ? `${base}.${k}` : k));
}

/**
 * fieldWarnings applies a mode to a write's unknown field paths: under `strict` it throws 422 `unknown_field`
 * naming each (with `problems`, the write's other field errors, so one answer lists them all); otherwise it returns
 * the warning texts to send (none under `ignore`).
 */
export function fieldWarnings(mode: FieldValidation, unknown: readonly string[], problems: Record<string, string> = {}): string[] {
  if (!unknown.length) return [];
  if (mode === 'strict') {
    const evidence: Record<string, string> = { ...problems };
    for (const p of unknown) evidence[p] = 'unknown field';
    const others = Object.keys(problems).length ? `; ${Object.entries(problems).map(([k, v]) => `${k}: ${v}`).join('; ')}` : '';
    throw new ValidationError(`unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((p) => `"${p}"`).join(', ')}${others} (?field_validation=warn or ignore applies the write anyway)`, 'unknown_field', evidence);
  }
  return mode === 'warn' ? unknown.map((p) => `unknown field "${p}"`) : [];
}
