/**
 * Keys names every Redis key the service uses, under one prefix, so the layout is readable in one place.
 * Record members of the lexicographic indexes are "<kind> <id>": a space sorts before every character an id
 * or kind may contain, so ZRANGE BYLEX yields the spec's (kind, id) order.
 */
export class Keys {
  constructor(readonly prefix = 'svc:') {}
  record(kind: string, id: string) { return `${this.prefix}rec:${kind}:${id}`; }
  status(kind: string, id: string) { return `${this.prefix}status:${kind}:${id}`; }
  get revision() { return `${this.prefix}revision`; }
  get changes() { return `${this.prefix}changes`; }
  get observed() { return `${this.prefix}observed`; }
  get reconciled() { return `${this.prefix}reconciled`; }
  get workspaces() { return `${this.prefix}ws`; }
  get workspaceRoots() { return `${this.prefix}ws:root`; }
  get workspaceNames() { return `${this.prefix}ws:name`; }
  get indexAll() { return `${this.prefix}idx:all`; }
  indexKind(kind: string) { return `${this.prefix}idx:kind:${kind}`; }
  index(family: 'scope' | 'owner' | 'source', kind: string, id = '') { return `${this.prefix}idx:${family}:${kind}:${id}`; }
  /** registry is the runtime registry hash a controller projects its kind into. */
  registry(name: string) { return `${this.prefix}registry:${name}`; }
  /** registryRevision counts changes to a registry, for caches. */
  registryRevision(name: string) { return `${this.prefix}registry-rev:${name}`; }
  /** toolApproval holds one approval token's binding, by the token's SHA-256. */
  toolApproval(tokenHash: string) { return `${this.prefix}tool-approval:${tokenHash}`; }
  lock(name: string) { return `${this.prefix}lock:${name}`; }
}

/** member is a record's entry in the lexicographic indexes. */
export const member = (kind: string, id: string) => `${kind} ${id}`;

/** splitMember is the inverse of `member`. */
export function splitMember(m: string): { kind: string; id: string } {
  const at = m.indexOf(' ');
  return { kind: m.slice(0, at), id: m.slice(at + 1) };
}
