/** FieldError names one failing field of a spec by its dotted path (e.g. `schedule.expr`, `hooks[0].event`). */
export interface FieldError {
  path: string;
  message: string;
}

/** ResourceScope is the record's scope binding; `id` is the workspace id for workspace scope. */
export interface ResourceScope {
  kind: 'global' | 'workspace';
  id?: string;
}

/** DecodeContext carries what a codec needs beyond the spec itself, e.g. the scope for scope-binding rules. */
export interface DecodeContext {
  scope: ResourceScope;
  /**
   * unknownFields, when given, receives the path of every field of the input that the kind does not define
   * (`enabeld`, `hooks[0].requird`), whether or not the decode succeeds; the caller decides whether they refuse
   * the write (server-side field validation: strict, warn or ignore).
   */
  unknownFields?: string[];
}

/** DecodeResult is the outcome of a decode: the canonical spec, or every field error found. */
export type DecodeResult<S = unknown> = { ok: true; spec: S } | { ok: false; errors: FieldError[] };

/**
 * Codec validates and canonicalizes the spec of one resource kind.
 * `decode` never throws on bad input; `decode(decode(x).spec)` deep-equals `decode(x).spec`.
 * Object key order does not matter: the store serializes specs with sorted keys.
 */
export interface Codec<S = unknown> {
  kind: string;
  /** Largest accepted serialized spec, in bytes. */
  maxBytes: number;
  decode(input: unknown, ctx: DecodeContext): DecodeResult<S>;
  /**
   * uniqueName, when a kind has it, is the name a decoded spec holds, unique among the kind's records of one scope:
   * a write of another record with a name a record already holds is 409 naming the holder.
   */
  uniqueName?(spec: S): string | undefined;
}
