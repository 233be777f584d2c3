/** VAULT_NAMESPACES are the namespaces a vault ref may name. */
export const VAULT_NAMESPACES = ['providers', 'bridges', 'automation', 'mcp', 'hooks', 'extensions', 'sandbox', 'sessions'] as const;

/** VaultNamespace is one of VAULT_NAMESPACES. */
export type VaultNamespace = (typeof VAULT_NAMESPACES)[number];

/** MAX_REF_LENGTH is the longest ref the vault stores (bytes of ASCII: the grammar allows nothing else). */
export const MAX_REF_LENGTH = 512;

const FIRST = /^[a-z0-9][a-z0-9_.-]*$/;
const LATER = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** VaultRef is a parsed `vault:<namespace>/<seg0>(/<segN>)*`. */
export interface VaultRef {
  ref: string;
  namespace: VaultNamespace;
  segments: string[];
}

/** parseVaultRef checks a ref against the vault ref grammar: the parsed ref, or why it is not one. */
export function parseVaultRef(ref: string): { ok: true; value: VaultRef } | { ok: false; problem: string } {
  if (ref.length > MAX_REF_LENGTH) return { ok: false, problem: `must be at most ${MAX_REF_LENGTH} characters` };
  if (!ref.startsWith('vault:')) return { ok: false, problem: 'must be vault:<namespace>/<path>' };
  const [ns, ...segments] = ref.slice(6).split('/');
  if (!(VAULT_NAMESPACES as readonly string[]).includes(ns)) return { ok: false, problem: `namespace "${ns}" must be one of ${VAULT_NAMESPACES.join(', ')}` };
  if (!segments.length || !FIRST.test(segments[0])) return { ok: false, problem: 'the first path segment must match [a-z0-9][a-z0-9_.-]*' };
  const bad = segments.slice(1).find((s) => !LATER.test(s));
  if (bad !== undefined) return { ok: false, problem: `path segment "${bad}" must match [A-Za-z0-9][A-Za-z0-9_.-]*` };
  return { ok: true, value: { ref, namespace: ns as VaultNamespace, segments } };
}

/**
 * parseVaultPrefix checks a list `prefix`: `vault:<ns>/` plus zero or more complete `seg/` parts. A
 * prefix without the trailing `/` names the same segments (`vault:mcp/github` = `vault:mcp/github/`), so
 * matching is always by whole segments: it never matches `vault:mcp/github2`. Returns the `/`-terminated form.
 */
export function parseVaultPrefix(prefix: string): { ok: true; value: string } | { ok: false; problem: string } {
  const p = prefix.endsWith('/') ? prefix : `${prefix}/`;
  const ns = p.slice(6, p.indexOf('/'));
  if (!p.startsWith('vault:') || !(VAULT_NAMESPACES as readonly string[]).includes(ns)) {
    return { ok: false, problem: `must be vault:<namespace>/ (namespaces: ${VAULT_NAMESPACES.join(', ')}) plus whole path segments` };
  }
  if (p === `vault:${ns}/`) return { ok: true, value: p };
  const asRef = parseVaultRef(p.slice(0, -1));
  return asRef.ok ? { ok: true, value: p } : { ok: false, problem: asRef.problem };
}
