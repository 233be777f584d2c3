import { InputError, ServiceError, ValidationError } from '../../store/errors.ts';

export { TooManyRequestsError } from '../../store/errors.ts';

/** GoneError is a task whose workspace root directory no longer exists: 410. */
export class GoneError extends ServiceError { readonly status = 410; }

type ErrCtor = typeof InputError | typeof ValidationError;

/**
 * Input reads one request body field by field; a bad field throws the route family's error (400 on the general
 * task routes, 422 on the agent routes) naming the field, before anything is changed.
 */
export class Input {
  readonly body: Record<string, unknown>;
  constructor(body: unknown, private readonly Err: ErrCtor = InputError) {
    if (body !== undefined && body !== null && (typeof body !== 'object' || Array.isArray(body))) throw new Err('the body must be a JSON object', 'invalid_body', { body: 'must be an object' });
    this.body = (body ?? {}) as Record<string, unknown>;
  }

  fail(field: string, msg: string, code = 'invalid_field'): never { throw new this.Err(`${field} ${msg}`, code, { [field]: msg }); }
  has(f: string) { return this.body[f] !== undefined; }

  str(f: string, o: { required?: boolean; max?: number; def?: string } = {}): string {
    const v = this.body[f];
    if (v === undefined || v === null || v === '') {
      if (o.required) this.fail(f, 'is required', 'required');
      return o.def ?? '';
    }
    if (typeof v !== 'string') this.fail(f, 'must be a string');
    const t = v.trim();
    if (o.required && !t) this.fail(f, 'is required', 'required');
    if (o.max && t.length > o.max) this.fail(f, `must be at most ${o.max} characters`);
    return t;
  }

  oneOf<T extends string>(f: string, set: readonly T[], def?: T): T {
    const v = this.str(f, { required: def === undefined, def });
    if (!set.includes(v as T)) this.fail(f, `must be one of ${set.join(', ')}`);
    return v as T;
  }

  int(f: string, o: { min?: number; max?: number; def?: number } = {}): number | undefined {
    const v = this.body[f];
    if (v === undefined || v === null) return o.def;
    if (typeof v !== 'number' || !Number.isInteger(v)) this.fail(f, 'must be an integer');
    if ((o.min !== undefined && v < o.min) || (o.max !== undefined && v > o.max)) this.fail(f, `must be between ${o.min ?? '-∞'} and ${o.max ?? '∞'}`);
    return v;
  }

  bool(f: string, def = false): boolean {
    const v = this.body[f];
    if (v === undefined || v === null) return def;
    if (typeof v !== 'boolean') this.fail(f, 'must be a boolean');
    return v;
  }

  strings(f: string, max = 64): string[] {
    const v = this.body[f];
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'string' || !x.trim())) this.fail(f, 'must be a list of non-empty strings');
    if (v.length > max) this.fail(f, `must have at most ${max} entries`);
    return [...new Set((v as string[]).map((x) => x.trim()))].sort();
  }

  obj(f: string, maxBytes?: number): Record<string, unknown> | undefined {
    const v = this.body[f];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'object' || Array.isArray(v)) this.fail(f, 'must be an object');
    if (maxBytes && Buffer.byteLength(JSON.stringify(v)) > maxBytes) this.fail(f, `must be at most ${maxBytes} bytes as JSON`, 'too_large');
    return v as Record<string, unknown>;
  }

  identity(f: string, kinds: readonly string[]): { kind: string; ref: string } | undefined {
    const v = this.obj(f);
    if (!v) return undefined;
    if (typeof v.kind !== 'string' || !kinds.includes(v.kind)) this.fail(`${f}.kind`, `must be one of ${kinds.join(', ')}`);
    if (typeof v.ref !== 'string' || !v.ref.trim()) this.fail(`${f}.ref`, 'is required', 'required');
    return { kind: v.kind as string, ref: (v.ref as string).trim() };
  }
}
