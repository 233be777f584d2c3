const SECRET_KEY = /(apikey|accesstoken|refreshtoken|mcpauthtoken|oauthcode|authorizationcode|codeverifier|pkceverifier|secretbinding|authorization|password|secret|token)/;
const SECRET_TEXT = [
  /\b(sk|pk|rk|ghp|gho|ghs|xox[abprs])[-_][A-Za-z0-9_-]{12,}\b/g,
  /\bBearer\s+[A-Za-z0-9._~+/=-]{8,}/gi,
  /\b(AKIA|ASIA)[A-Z0-9]{16}\b/g,
  /\bsvc_st_[0-9a-f]{16,}\b/g,
];

/** isSecretKey says whether a field name looks like it holds a secret (normalized: letters only, lower case). */
export function isSecretKey(k: string): boolean {
  return SECRET_KEY.test(k.toLowerCase().replace(/[^a-z]/g, ''));
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
      out[k] = isSecretKey(k) ? '[REDACTED]' : redactValue(x, known);
    }
    return out;
  }
  return v;
}
