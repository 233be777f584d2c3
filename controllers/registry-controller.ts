import { decodeSpec } from '../codecs/index.ts';
import { canonicalJson } from '../store/canonical.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { ResourceRecord } from '../store/types.ts';
import type { ConditionReport, KindController, ReconcileResult, ResourceKey } from './types.ts';

/** RegistryEntry is what a controller projects into its kind's runtime registry: the decoded record. */
export type RegistryEntry<S = any> = Omit<ResourceRecord<S>, 'created_at' | 'updated_at'>;

/** RegistryControllerOptions configures a RegistryController. */
export interface RegistryControllerOptions {
  kind: string;
  store: ResourceStore;
  /**
   * Called after registry entries changed (written or removed), e.g. to re-enqueue dependents: once for the keys one
   * reconcile or one batch changed.
   */
  onChange?: (keys: ResourceKey[]) => Promise<void>;
  /**
   * commandRefusal re-checks a decoded spec's executables (SecurityPolicy.commandRefusal): why one may not run
   * now, or undefined. NOTE: EXEC_ALLOWLIST may have tightened since the record was written.
   */
  commandRefusal?: (kind: string, spec: unknown) => string | undefined;
  /**
   * dependencies says why a decoded spec that would project cannot do its job yet (e.g. a secret ref that does not
   * resolve), or undefined when it can. NOTE: the entry is still projected, so the record works as soon as the
   * dependency appears; the status says Degraded until then.
   */
  dependencies?: (spec: unknown) => Promise<{ reason: string; message: string } | undefined>;
  /**
   * warnings reports conditions that do not stop a projected spec from working (an agent's model the catalog does
   * not know: live sources lag), written beside Ready and Degraded.
   */
  warnings?: (spec: unknown) => Promise<ConditionReport[]>;
}

/**
 * RegistryController projects one kind's records into its runtime registry (a Redis hash of id → entry):
 * re-decode the record and write or remove the entry where it differs from what the registry holds.
 * A record that no longer decodes, or whose executables the execution policy no longer allows, is Degraded
 * alone (`InvalidSpec`, `CommandNotAllowed`); its last good entry stays, and the check
 * right before each spawn keeps that entry from running a refused program.
 */
export class RegistryController implements KindController {
  readonly kind: string;

  constructor(private readonly o: RegistryControllerOptions) {
    this.kind = o.kind;
  }

  async reconcile(key: ResourceKey, record: ResourceRecord | undefined): Promise<ReconcileResult> {
    const { result, entry } = await this.planWithDependencies(record);
    if (entry !== undefined) await this.project(key, entry);
    return result;
  }

  /** planWithDependencies is plan, then, for a record that would be Ready, the `dependencies` check (Degraded when one is missing). */
  async planWithDependencies(record: ResourceRecord | undefined): Promise<{ result: ReconcileResult; entry?: string }> {
    const planned = this.plan(record);
    if (!record || planned.spec === undefined) return planned;
    const conditions = this.o.warnings ? await this.o.warnings(planned.spec) : [];
    const withWarnings = <T extends { result: ReconcileResult }>(p: T): T => (conditions.length ? { ...p, result: { ...p.result, conditions: [...(p.result.conditions ?? []), ...conditions] } } : p);
    if (!this.o.dependencies || planned.result.outcome !== 'ready') return withWarnings(planned);
    const missing = await this.o.dependencies(planned.spec);
    return withWarnings(missing ? { result: { outcome: 'degraded', ...missing }, entry: planned.entry } : planned);
  }

  /**
   * plan decides a reconcile without touching Redis: the result, and the registry entry to project ("" removes
   * it; undefined leaves the last good one). The batch reconciler (batch-reconciler.ts) projects it in one script.
   */
  plan(record: ResourceRecord | undefined): { result: ReconcileResult; entry?: string; spec?: unknown } {
    if (!record) return { result: { outcome: 'ready', message: 'removed from the registry' }, entry: '' };
    const decoded = decodeSpec(this.kind, record.spec, { scope: record.scope });
    if (!decoded.ok) {
      return { result: { outcome: 'degraded', reason: 'InvalidSpec', message: decoded.errors.map((e) => `${e.path}: ${e.message}`).join('; ') } };
    }
    const refusal = this.o.commandRefusal?.(this.kind, decoded.spec);
    if (refusal) return { result: { outcome: 'degraded', reason: 'CommandNotAllowed', message: refusal } };
    const { kind, id, scope, owner, source, version } = record;
    return {
      result: { outcome: 'ready', message: `projected into the ${this.kind} registry` },
      entry: canonicalJson({ kind, id, scope, owner, source, version, spec: decoded.spec }),
      spec: decoded.spec,
    };
  }

  /** changed runs the `onChange` hook once after projections changed the registry entries of `keys`. */
  async changed(keys: ResourceKey[]): Promise<void> {
    await this.o.onChange?.(keys);
  }

  /** project writes (or, for "", removes) the entry only where it differs; see project-entry-2.lua. */
  private async project(key: ResourceKey, entry: string): Promise<void> {
    const { store } = this.o;
    // NOTE: the per-kind revision the script bumps lets readers cache a registry and re-read it only when it changed.
    const changed = await store.redis.projectEntry(store.keys.registry(this.kind), store.keys.registryRevision(this.kind), key.id, entry, store.keys.registryChannel);
    if (changed) await this.o.onChange?.([key]);
  }
}

/** readRegistry returns every entry of a kind's registry, ordered by id. */
export async function readRegistry<S = any>(store: ResourceStore, kind: string): Promise<RegistryEntry<S>[]> {
  const all = await store.redis.hgetall(store.keys.registry(kind));
  return Object.keys(all).sort().map((id) => JSON.parse(all[id]) as RegistryEntry<S>);
}

/**
 * RegistryCache keeps parsed registries in memory and re-reads a kind only when its registry revision moved,
 * so hot read paths (the tool catalog, every hook gate, each page of bus events) cost one MGET instead of an
 * HGETALL and a parse per request; with the store's RegistryWatch running, a read of unchanged registries costs no
 * round trip at all (a change message makes the next read check the revision again).
 */
export class RegistryCache {
  private readonly cache = new Map<string, { rev: string; entries: RegistryEntry[]; gen?: number; stamp: number }>();

  constructor(private readonly store: ResourceStore) {}

  /** read returns each kind's entries and a stamp that changes whenever any of them changed. */
  async read(kinds: string[]): Promise<{ entries: Record<string, RegistryEntry[]>; stamp: string }> {
    const watch = this.store.registryWatch;
    const revKeys = kinds.map((k) => this.store.keys.registryRevision(k));
    // NOTE: the generation and stamps are taken before the MGET, so a change announced while it is in flight
    // makes the next read check again rather than trust what this one read.
    const gen = watch?.generation();
    const stamps = revKeys.map((k) => watch?.stamp(k) ?? 0);
    if (gen !== undefined) {
      const hits = kinds.map((kind, i) => {
        const hit = this.cache.get(kind);
        return hit && hit.gen === gen && hit.stamp === stamps[i] ? hit : undefined;
      });
      if (hits.every(Boolean)) {
        return { entries: Object.fromEntries(kinds.map((kind, i) => [kind, hits[i]!.entries])), stamp: hits.map((h) => h!.rev).join(':') };
      }
    }
    const revs = await this.store.redis.mget(revKeys);
    const entries: Record<string, RegistryEntry[]> = {};
    await Promise.all(kinds.map(async (kind, i) => {
      const rev = revs[i] ?? '0';
      const hit = this.cache.get(kind);
      if (hit?.rev === rev) {
        entries[kind] = hit.entries;
        this.cache.set(kind, { ...hit, gen, stamp: stamps[i] });
        return;
      }
      entries[kind] = await readRegistry(this.store, kind);
      this.cache.set(kind, { rev, entries: entries[kind], gen, stamp: stamps[i] });
    }));
    return { entries, stamp: revs.map((r) => r ?? '0').join(':') };
  }
}
