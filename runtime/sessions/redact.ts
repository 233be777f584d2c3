const SECRET_KEY = /(apikey|accesstoken|refreshtoken|mcpauthtoken|oauthcode|authorizationcode|codeverifier|pkceverifier|secretbinding|authorization|password|secret|token)/;
const SECRET_TEXT = [
  /\b(sk|pk|rk|ghp|gho|ghs|xox[abprs])[-_][A-Za-z0-9_-]{12,}\b/g,
  /\bBearer\s+[A-Za-z0-9._~+/=-]{8,}/gi,
  /\b(AKIA|ASIA)[A-Z0-9]{16}\b/g,
  /\bsvc_st_[0-9a-f]{16,}\b/g,
];

/** USAGE_KEY: counters named after tokens (input_tokens, total_tokens, max_tokens, token_count) hold no secret. */
const USAGE_KEY = /(tokens|tokencount|tokenlimit|tokenbudget)$/;

/**
 * isSecretKey says whether a field name looks like it holds a secret (normalized: letters only, lower case).
 * NOTE: gaps §1.4's word list matches `token` anywhere, which would destroy usage counters (`input_tokens`) that
 * budgets read; counter names are exempt.
 */
export function isSecretKey(k: string): boolean {
  const n = k.toLowerCase().replace(/[^a-z]/g, '');
  return SECRET_KEY.test(n) && !USAGE_KEY.test(n);
}

/**
 * redactText replaces secret-looking substrings (API keys, bearer tokens, session tokens) in free text, and
 * every occurrence of a `known` secret value (those the service resolved for the process that produced the text).
 */
export function redactText(s: string, known: readonly string[] = []): string {
  const text = known.reduce((acc, v) => (v && acc.includes(v) ? acc.split(v).join('[REDACTED]') : acc), s);
  return SECRET_TEXT.reduce((acc, re) => acc.replace(re, '[REDACTED]'), text);
}

/**
 * redactValue returns a copy of a JSON value in which every key whose normalized name looks secret
 * (gaps.md §1.4) has the value "[REDACTED]" and every string has secret-looking substrings and `known` values replaced.
 */
export function redactValue(v: unknown, known: readonly string[] = []): unknown {
  if (typeof v === 'string') return redactText(v, known);
  if (Array.isArray(v)) return v.map((x) => redactValue(x, known));
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      // NOTE: a number or boolean is never a credential; only strings and structures under a secret name are hidden.
      out[k] = isSecretKey(k) && (typeof x === 'string' || (x !== null && typeof x === 'object')) ? '[REDACTED]' : redactValue(x, known);
    }
    return out;
  }
  return v;
}
