/**
 * Keys names every Redis key the service uses, under one prefix, so the layout is readable in one place.
 * Record members of the lexicographic indexes are "<kind> <id>": a space sorts before every character an id
 * or kind may contain, so ZRANGE BYLEX yields the spec's (kind, id) order.
 *
 * NOTE: Redis Cluster: every key sits under a hash tag, and every Lua script and MULTI
 * touches keys of one tag. The resource layer (records, status, indexes, change log, revision, observed and
 * reconciled marks, registries, reconcile leases, workspaces, which a record's scope must name) shares the one tag
 * `{r}`: one slot, as Kubernetes keeps its objects in one etcd, so a put is one atomic script with its index and
 * change-log entry. That slot's master bounds the rate of resource writes (measured in test/bench/redis-cluster.ts);
 * sessions (`{s:<id>}`), task queues (`{tasks}`), BullMQ queues (`{q:<name>}`) and the other families spread over
 * the other masters.
 */
export class Keys {
  /** r is the resource layer's key prefix: `<prefix>{r}:`; its scripts build index keys from it (ARGV). */
  readonly r: string;
  constructor(readonly prefix = 'svc:') { this.r = `${prefix}{r}:`; }
  record(kind: string, id: string) { return `${this.r}rec:${kind}:${id}`; }
  status(kind: string, id: string) { return `${this.r}status:${kind}:${id}`; }
  get revision() { return `${this.r}revision`; }
  get changes() { return `${this.r}changes`; }
  get observed() { return `${this.r}observed`; }
  get reconciled() { return `${this.r}reconciled`; }
  get workspaces() { return `${this.r}ws`; }
  get workspaceRoots() { return `${this.r}ws:root`; }
  get workspaceNames() { return `${this.r}ws:name`; }
  get indexAll() { return `${this.r}idx:all`; }
  indexKind(kind: string) { return `${this.r}idx:kind:${kind}`; }
  /** nameClaim is held while a write checks and takes a kind's unique name in a scope (Codec.uniqueName). */
  nameClaim(kind: string, scope: string, name: string) { return `${this.r}name-claim:${kind}:${scope}:${name}`; }
  index(family: 'scope' | 'owner' | 'source', kind: string, id = '') { return `${this.r}idx:${family}:${kind}:${id}`; }
  /** registry is the runtime registry hash a controller projects its kind into. */
  registry(name: string) { return `${this.r}registry:${name}`; }
  /** registryRevision counts changes to a registry, for caches. */
  registryRevision(name: string) { return `${this.r}registry-rev:${name}`; }
  /** registryChannel is the pub/sub channel a registry change is announced on (RegistryWatch; a channel is no key). */
  get registryChannel() { return `${this.prefix}registry-changed`; }
  /** sessionChannel is the pub/sub channel a session's identity change is announced on (SessionIdentities). */
  get sessionChannel() { return `${this.prefix}session-changed`; }
  /** toolApproval holds one approval token's binding, by the token's SHA-256 (its own tag: one key per token). */
  toolApproval(tokenHash: string) { return `${this.prefix}{ta:${tokenHash}}`; }
  /** lock names a lease of the resource layer (a reconcile's key lease sits in the scripts of its record). */
  lock(name: string) { return `${this.r}lock:${name}`; }
  /** session is the tag of one session's keys: its record, events, sequence, lease, permissions, prompt queue. */
  session(id: string) { return `${this.prefix}{s:${id}}:`; }
  /** sessions is the tag of the session indexes (by time, by workspace), agent tokens, start list and live set. */
  get sessions() { return `${this.prefix}{sessions}:`; }
  /** runtimeCommands is one runtime process's command stream (its tag: one reader, one slot per process). */
  runtimeCommands(owner: string) { return `${this.prefix}{rt:${owner}}:cmd`; }
}

/**
 * queuePrefix is a BullMQ queue's key prefix: each queue its own hash tag `<prefix>{q:<queue>}` (BullMQ's scripts
 * touch many keys of one queue, so a Redis Cluster needs them in one slot; one queue is then bound by one master).
 */
export const queuePrefix = (keyPrefix: string, queue: string) => `${keyPrefix}{q:${queue}}`;

/** member is a record's entry in the lexicographic indexes. */
export const member = (kind: string, id: string) => `${kind} ${id}`;

/** splitMember is the inverse of `member`. */
export function splitMember(m: string): { kind: string; id: string } {
  const at = m.indexOf(' ');
  return { kind: m.slice(0, at), id: m.slice(at + 1) };
}
