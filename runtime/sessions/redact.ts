import { SecretMask, SECRET_MASK } from '../security/secret-mask.ts';

const SECRET_KEY = /(apikey|accesstoken|refreshtoken|mcpauthtoken|oauthcode|authorizationcode|codeverifier|pkceverifier|secretbinding|authorization|privatekey|password|cookie|secret|token)/;

/** USAGE_KEY: counters named after tokens (input_tokens, total_tokens, max_tokens, token_count) hold no secret. */
const USAGE_KEY = /(tokens|tokencount|tokenlimit|tokenbudget)$/;

/** MASK is what every rule puts in place of a secret. */
export const MASK = SECRET_MASK;

/**
 * REDACTION_VERSION names this rule set; support bundles record it so a reader knows which
 * rules a bundle went through. Bump it when a rule changes what it masks.
 */
export const REDACTION_VERSION = 'diagnostics-redaction.v1';

/** RedactionRule names one rule of the Redactor; a redaction report counts by these names. */
export type RedactionRule = 'literal' | 'url-credentials' | 'bearer' | 'json-field' | 'key-value' | 'key-name' | 'token-shape';

/** RedactionCounts counts, per rule, the values masked (never the values themselves). */
export type RedactionCounts = Partial<Record<RedactionRule, number>>;

/**
 * isSecretKey says whether a field name looks like it holds a secret (normalized: letters only, lower case).
 * NOTE: the secret word list matches `token` anywhere, which would destroy usage counters (`input_tokens`) that
 * budgets read; counter names are exempt.
 */
export function isSecretKey(k: string): boolean {
  const n = k.toLowerCase().replace(/[^a-z]/g, '');
  return SECRET_KEY.test(n) && !USAGE_KEY.test(n);
}

const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s:/?#@"'\\]+):([^\s/?#@"'\\]+)@/gi;
const BEARER = /\bBearer\s+(?!\[REDACTED\])[A-Za-z0-9._~+/=-]{8,}/gi;
// NOTE: JSON text inside a string arrives escaped (`{\"apiKey\":\"…\"}`), the leak users report against
// troubleshoot's default redactors; the escaped form is matched on its own, before the plain one.
const JSON_FIELD_ESCAPED = /\\"([A-Za-z0-9_.-]{1,64})\\"(\s*:\s*)\\"((?:[^"\\]|\\[^"])*)\\"/g;
const JSON_FIELD = /"([A-Za-z0-9_.-]{1,64})"(\s*:\s*)"((?:[^"\\]|\\.)*)"/g;
const KEY_VALUE = /\b([A-Za-z][A-Za-z0-9_.-]{0,63})(\s*[=:]\s*)((?:(?:Basic|Bearer|Token|Digest)\s+)?[^\s,;&"'<>)\]}]+)/g;
const TOKEN_SHAPES = [
  /\b(sk|pk|rk|ghp|gho|ghs|xox[abprs])[-_][A-Za-z0-9_-]{12,}\b/g,
  /\b(AKIA|ASIA)[A-Z0-9]{16}\b/g,
  /\bsvc_st_[0-9a-f]{16,}\b/g,
];

/**
 * Redactor is the service's one redaction mechanism: session events, tool results, crash and support bundles
 * all go through it. Its rules, in order: `literal` (each known secret value: resolved `env:` secrets, vault
 * values), `url-credentials` (`scheme://user:pass@host`), `bearer` (`Bearer …`), `json-field` (`"apiKey":"…"`,
 * plain or escaped inside a string), `key-value` (`password=…`, `Authorization: Basic …` in free text),
 * `key-name` (a JSON field whose name looks secret) and `token-shape` (API-key shapes: `sk-…`, `ghp_…`, `AKIA…`).
 * Each call can count what each rule masked into a RedactionCounts, for redaction reports.
 */
export class Redactor {
  private readonly literals: SecretMask;

  /**
   * `literals` are secret values to mask wherever they appear, in every form SecretMask knows (the value, its base64
   * and URL encodings); empty ones are ignored. A SecretMask already built for them may be given instead.
   */
  constructor(literals: readonly string[] | SecretMask = []) {
    this.literals = literals instanceof SecretMask ? literals : new SecretMask(literals);
  }

  /** text masks secrets in free text. */
  text(s: string, counts: RedactionCounts = {}): string {
    const hit = (rule: RedactionRule) => { counts[rule] = (counts[rule] ?? 0) + 1; };
    let out = this.literals.text(s, () => hit('literal'));
    out = out.replace(URL_CREDENTIALS, (m, scheme: string, _user: string, pass: string) => {
      if (pass === MASK) return m;
      hit('url-credentials');
      return `${scheme}${MASK}@`;
    });
    out = out.replace(BEARER, () => { hit('bearer'); return `Bearer ${MASK}`; });
    const field = (q: string) => (m: string, key: string, sep: string, value: string) => {
      if (!isSecretKey(key) || value === '' || value === MASK) return m;
      hit('json-field');
      return `${q}${key}${q}${sep}${q}${MASK}${q}`;
    };
    out = out.replace(JSON_FIELD_ESCAPED, field('\\"')).replace(JSON_FIELD, field('"'));
    out = out.replace(KEY_VALUE, (m, key: string, sep: string, value: string) => {
      if (!isSecretKey(key) || value.includes('[REDACTED')) return m;
      hit('key-value');
      return `${key}${sep}${MASK}`;
    });
    for (const re of TOKEN_SHAPES) out = out.replace(re, () => { hit('token-shape'); return MASK; });
    return out;
  }

  /**
   * value returns a copy of a JSON value in which every field whose name looks secret holds MASK and every string
   * went through `text`. NOTE: a number or boolean is never a credential; only strings and structures under a
   * secret name are hidden, so usage counters and flags stay.
   */
  value(v: unknown, counts: RedactionCounts = {}): unknown {
    if (typeof v === 'string') return this.text(v, counts);
    if (Array.isArray(v)) return v.map((x) => this.value(x, counts));
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        const secret = isSecretKey(k) && ((typeof x === 'string' && x !== '' && x !== MASK) || (x !== null && typeof x === 'object'));
        if (secret) counts['key-name'] = (counts['key-name'] ?? 0) + 1;
        out[k] = secret ? MASK : this.value(x, counts);
      }
      return out;
    }
    return v;
  }
}

/**
 * redactText replaces secret-looking substrings in free text, and every occurrence of a `known` secret value
 * (those the service resolved for the process that produced the text).
 */
export function redactText(s: string, known: readonly string[] = []): string {
  return redactorOf(known).text(s);
}

/** redactValue is Redactor.value with the `known` secret values, for callers that do not count. */
export function redactValue(v: unknown, known: readonly string[] = []): unknown {
  return redactorOf(known).value(v);
}

// NOTE: a session redacts each of its events with the same array of values; building the mask (every encoded form,
// one regular expression) once per array, not once per event, keeps that cheap.
const redactors = new WeakMap<readonly string[], Redactor>();

function redactorOf(known: readonly string[]): Redactor {
  let r = redactors.get(known);
  if (!r) redactors.set(known, (r = new Redactor(known)));
  return r;
}
