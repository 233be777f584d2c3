/** SECRET_MASK is what a masked secret reads as. */
export const SECRET_MASK = '[REDACTED]';

/**
 * ENCODED_MIN_BYTES: only values this long or longer are also looked for in their encodings, and an encoded
 * fragment shorter than this is not looked for. NOTE: the base64 of a 4-byte value is 6 characters, which random
 * identifiers hold by chance; masking it would garble ordinary text.
 */
export const ENCODED_MIN_BYTES = 8;

const base64url = (b64: string) => b64.replace(/\+/g, '-').replace(/\//g, '_');

/**
 * base64Fragments are the runs of base64 characters that encode `bytes` whatever surrounds them, for each of the
 * three alignments (the value starting 0, 1 or 2 bytes into a 3-byte group): the value inside a longer encoded
 * text, such as `user:secret` in a Basic auth header. The one or two characters at each end that mix the value's
 * bits with its neighbours' are left out.
 */
function base64Fragments(bytes: Buffer): string[] {
  const out: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
    const from = Math.ceil((8 * offset) / 6);
    const to = Math.floor((8 * (offset + bytes.length)) / 6);
    if (to - from >= ENCODED_MIN_BYTES) out.push(encoded.slice(from, to));
  }
  return out;
}

/**
 * secretForms lists the texts a secret value can appear as in what the service writes: the value itself, as a JSON
 * string body (quotes and backslashes escaped, as in a log line or a nested JSON text), and, for a value of
 * ENCODED_MIN_BYTES or more, its base64 (standard and url-safe, with and without padding, whole or inside a longer
 * encoded text at any alignment) and its usual URL encodings (encodeURIComponent's, with upper or lower case hex,
 * and a form field's with `+` for spaces). Longest first, each once. Other percent-encodings are found by decoding
 * (SecretMask.text), as there are too many to list.
 */
export function secretForms(value: string): string[] {
  if (!value) return [];
  const forms = new Set<string>([value, JSON.stringify(value).slice(1, -1)]);
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length >= ENCODED_MIN_BYTES) {
    const b64 = bytes.toString('base64');
    const bare = b64.replace(/=+$/, '');
    for (const f of [b64, bare, base64url(b64), base64url(bare)]) forms.add(f);
    for (const f of base64Fragments(bytes)) forms.add(f).add(base64url(f));
    // NOTE: the usual spellings are listed, so a text that has them needs no decoding; any other mix of escapes
    // is found by SecretMask.text decoding a run that holds one.
    const uri = encodeURIComponent(value);
    forms.add(uri).add(uri.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase()));
    forms.add(new URLSearchParams({ v: value }).toString().slice(2));
  }
  return [...forms].sort((a, b) => b.length - a.length);
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** ESCAPES is a run of `%XX` escapes; decodeEscapes reads one as UTF-8 bytes (invalid UTF-8 as U+FFFD). */
const ESCAPES = /(?:%[0-9A-Fa-f]{2})+/g;
const decodeEscapes = (run: string) => Buffer.from(run.replace(/%/g, ''), 'hex').toString('utf8');

/**
 * percentDecoded reads a text's `%XX` escapes as bytes (any escape, either case; invalid UTF-8 as U+FFFD), `+` left
 * as is, and says for each decoded UTF-16 unit where in the text it came from (`from`, `to`: the escapes it was
 * decoded from, or its own place).
 */
function percentDecoded(s: string): { text: string; from: number[]; to: number[] } {
  const parts: string[] = [];
  const from: number[] = [];
  const to: number[] = [];
  let last = 0;
  const plain = (end: number) => {
    parts.push(s.slice(last, end));
    for (let i = last; i < end; i++) { from.push(i); to.push(i + 1); }
  };
  for (const m of s.matchAll(ESCAPES)) {
    plain(m.index);
    const decoded = decodeEscapes(m[0]);
    parts.push(decoded);
    for (let k = 0; k < decoded.length; k++) { from.push(m.index); to.push(m.index + m[0].length); }
    last = m.index + m[0].length;
  }
  plain(s.length);
  return { text: parts.join(''), from, to };
}

/**
 * SecretMask masks a set of secret values, in every form secretForms lists, in text and in JSON values. It is
 * built once per set (one regular expression of every form, longest first, so a value holding another is masked
 * whole) and is immutable: a changed set is a new SecretMask.
 */
export class SecretMask {
  /** EMPTY masks nothing. */
  static readonly EMPTY = new SecretMask([]);
  private readonly pattern?: RegExp;
  /** The number of distinct values masked. */
  readonly size: number;

  constructor(values: Iterable<string>) {
    const distinct = new Set([...values].filter((v) => v));
    this.size = distinct.size;
    const forms = new Set<string>();
    for (const v of distinct) for (const f of secretForms(v)) forms.add(f);
    if (forms.size) this.pattern = new RegExp([...forms].sort((a, b) => b.length - a.length).map(escapeRegExp).join('|'), 'g');
  }

  /** empty says whether the mask has no value to mask. */
  get empty(): boolean {
    return !this.pattern;
  }

  /**
   * text replaces every form of every value in `s` with SECRET_MASK; `onHit` is called once per replacement. A value
   * percent-encoded some other way (a URL, a form body) is found in the text decoded, and the text it was decoded
   * from is masked. NOTE: decoded, not matched against spellings: a decoder reads `%2D` as `-` and `%61` as `a`
   * alike, so any mix of escaped and plain characters spells the value, too many spellings to list.
   */
  text(s: string, onHit?: () => void): string {
    if (!this.pattern || s.length === 0) return s;
    const out = this.has(s) ? s.replace(this.pattern, () => { onHit?.(); return SECRET_MASK; }) : s;
    if (!out.includes('%')) return out;
    // NOTE: the decoded text alone first: the map of where each unit came from is built only for a text that holds one.
    const plain = out.replace(ESCAPES, decodeEscapes);
    if (!this.has(plain) && !this.has(plain.replace(/\+/g, ' '))) return out;
    const d = percentDecoded(out);
    const spans: [number, number][] = [];
    // NOTE: a form body writes a space as `+`: both readings keep the decoded text's length, so its map holds.
    for (const reading of [d.text, d.text.replace(/\+/g, ' ')]) {
      if (!this.has(reading)) continue;
      this.pattern.lastIndex = 0;
      for (const m of reading.matchAll(this.pattern)) spans.push([d.from[m.index], d.to[m.index + m[0].length - 1]]);
    }
    if (!spans.length) return out;
    spans.sort((a, b) => a[0] - b[0]);
    let masked = '';
    let at = 0;
    for (const [start, end] of spans) {
      if (end <= at) continue;
      if (start >= at) {
        masked += out.slice(at, start) + SECRET_MASK;
        onHit?.();
      }
      at = end;
    }
    return masked + out.slice(at);
  }

  /** has says whether `s` holds a form of a value as written. */
  private has(s: string): boolean {
    this.pattern!.lastIndex = 0;
    return this.pattern!.test(s);
  }

  /** holds says whether `s` holds any form of any value. */
  holds(s: string): boolean {
    return this.text(s) !== s;
  }

  /**
   * value returns `v` with every string in it (object keys too) masked; the parts that held nothing are the same
   * objects, so a value without a secret is returned as it was.
   */
  value<T>(v: T, onHit?: () => void): T {
    if (!this.pattern) return v;
    return this.walk(v, onHit) as T;
  }

  /** found says whether any string in a JSON value (object keys too) holds a form of a value. */
  found(v: unknown): boolean {
    if (!this.pattern) return false;
    let hit = false;
    this.walk(v, () => { hit = true; });
    return hit;
  }

  private walk(v: unknown, onHit?: () => void): unknown {
    if (typeof v === 'string') return this.text(v, onHit);
    if (Array.isArray(v)) {
      let out: unknown[] | undefined;
      v.forEach((x, i) => {
        const m = this.walk(x, onHit);
        if (m !== x) (out ??= [...v])[i] = m;
      });
      return out ?? v;
    }
    if (v && typeof v === 'object') {
      // NOTE: what JSON.stringify would write is what is masked: a Date or a Buffer by its toJSON, any other object
      // by its own enumerable fields (a class instance's too); a value with nothing to mask is returned as it was.
      const toJSON = (v as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === 'function') {
        const json: unknown = toJSON.call(v);
        const m = this.walk(json, onHit);
        return m === json ? v : m;
      }
      let out: Record<string, unknown> | undefined;
      for (const [k, x] of Object.entries(v)) {
        const mk = this.text(k, onHit);
        const m = this.walk(x, onHit);
        if (mk === k && m === x) continue;
        out ??= { ...(v as Record<string, unknown>) };
        if (mk !== k) delete out[k];
        out[mk] = m;
      }
      return out ?? v;
    }
    return v;
  }
}
