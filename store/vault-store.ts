import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import type { RegistryWatch } from './registry-watch.ts';
import { defineScripts } from './scripts.ts';

/** StoredVaultMeta is the metadata the vault keeps beside a sealed value (never the value). */
export interface StoredVaultMeta {
  kind: string;
  created_at: string;
  updated_at: string;
}

type VaultCommands = {
  vaultPut(sealed: string, meta: string, refs: string, rev: string, keyuse: string, ref: string, value: string, kind: string, now: string, channel: string): Promise<[number, string]>;
  vaultDelete(sealed: string, meta: string, refs: string, rev: string, keyuse: string, ref: string, channel: string): Promise<number>;
  vaultReseal(sealed: string, keyuse: string, ...triples: string[]): Promise<number>;
};

/**
 * VaultStore keeps the vault in Redis under its own hash tag, `{vault}`: `sealed` (hash ref → sealed value),
 * `meta` (hash ref → {kind, created_at, updated_at}), `refs` (zset of refs, listed by lexical range), `rev` (a
 * counter every write and delete bumps) and `keyuse` (hash key id → how many secrets it seals). It holds only
 * sealed values: encryption and opening are runtime/vault's.
 */
export class VaultStore {
  private readonly base: string;
  private readonly redis: Redis & VaultCommands;
  private readonly channel: string;

  /**
   * `watch` is the process's subscription to the change channel (absent on a Redis Cluster, where revisionMark is
   * always undefined and readers read the revision each time).
   */
  constructor(redis: Redis, keys: Keys, private readonly watch?: RegistryWatch) {
    this.base = `${keys.prefix}{vault}:`;
    // NOTE: the registry channel: a write or delete is announced with the revision key, which no registry cache reads.
    this.channel = keys.registryChannel;
    defineScripts();
    this.redis = redis as Redis & VaultCommands;
  }

  private get keys5(): [string, string, string, string, string] {
    const b = this.base;
    return [`${b}sealed`, `${b}meta`, `${b}refs`, `${b}rev`, `${b}keyuse`];
  }

  /** revision is the counter every write and delete bumps ('0' before the first). */
  async revision(): Promise<string> {
    return (await this.redis.get(`${this.base}rev`)) ?? '0';
  }

  /**
   * revisionMark stays the same while no write or delete was announced on the change channel, so what was read
   * under one mark is still current while the mark is; undefined while the subscription is down or absent.
   */
  revisionMark(): string | undefined {
    const gen = this.watch?.generation();
    return gen === undefined ? undefined : `${gen}:${this.watch!.stamp(`${this.base}rev`)}`;
  }

  /** put stores a sealed value and its metadata (vault-put-5.lua); `created` is false when it replaced one. */
  async put(ref: string, sealed: string, kind: string, now: string): Promise<{ created: boolean; meta: StoredVaultMeta }> {
    const [created, json] = await this.redis.vaultPut(...this.keys5, ref, sealed, kind, now, this.channel);
    return { created: created === 1, meta: JSON.parse(json) as StoredVaultMeta };
  }

  /** delete removes a secret; false when the ref holds none. */
  async delete(ref: string): Promise<boolean> {
    return (await this.redis.vaultDelete(...this.keys5, ref, this.channel)) === 1;
  }

  /** meta returns a secret's metadata, or undefined when the ref holds none. */
  async meta(ref: string): Promise<StoredVaultMeta | undefined> {
    const json = await this.redis.hget(`${this.base}meta`, ref);
    return json ? (JSON.parse(json) as StoredVaultMeta) : undefined;
  }

  /** sealedOf reads the sealed values of refs, in order (null where a ref holds none). */
  async sealedOf(refs: string[]): Promise<(string | null)[]> {
    return refs.length ? this.redis.hmget(`${this.base}sealed`, ...refs) : [];
  }

  /**
   * refsPage lists up to `count` refs after `after` (exclusive; '' = from the first) that start with `prefix`, in
   * ref order, with their metadata.
   */
  async refsPage(prefix: string, after: string, count: number): Promise<{ ref: string; meta: StoredVaultMeta }[]> {
    const min = after ? `(${after}` : prefix ? `[${prefix}` : '-';
    const max = prefix ? `[${prefix}\xff` : '+';
    const refs = await this.redis.zrangebylex(`${this.base}refs`, min, max, 'LIMIT', 0, count);
    if (!refs.length) return [];
    const metas = await this.redis.hmget(`${this.base}meta`, ...refs);
    return refs.flatMap((ref, i) => (metas[i] ? [{ ref, meta: JSON.parse(metas[i]!) as StoredVaultMeta }] : []));
  }

  /** refsAfter lists up to `count` refs after `after` (exclusive; '' = from the first), in ref order. */
  async refsAfter(after: string, count: number): Promise<string[]> {
    return this.redis.zrangebylex(`${this.base}refs`, after ? `(${after}` : '-', '+', 'LIMIT', 0, count);
  }

  /** reseal rewrites sealed values where they are unchanged since read (vault-reseal-2.lua); how many it rewrote. */
  async reseal(rewrites: { ref: string; expected: string; sealed: string }[]): Promise<number> {
    if (!rewrites.length) return 0;
    return this.redis.vaultReseal(`${this.base}sealed`, `${this.base}keyuse`, ...rewrites.flatMap((r) => [r.ref, r.expected, r.sealed]));
  }

  /** keyUse returns how many secrets each key id seals. */
  async keyUse(): Promise<Record<string, number>> {
    const raw = await this.redis.hgetall(`${this.base}keyuse`);
    return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, Number(v)]).filter(([, n]) => (n as number) > 0));
  }

  /** count is how many secrets the vault holds. */
  async count(): Promise<number> {
    return this.redis.zcard(`${this.base}refs`);
  }
}
