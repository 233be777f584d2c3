import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';

/**
 * VaultHostStore keeps each vault secret's `allowed_hosts`, the hosts an admin said its value may be sent to, in
 * one hash (ref → JSON list) under the vault's hash tag, `{vault}:hosts`. It holds host names only, never a value.
 * NOTE: beside the vault's own keys rather than in its metadata script, so a host list is written before the value
 * it restricts (a reader never sees a new secret without its list) and a list can be kept across value rewrites.
 */
export class VaultHostStore {
  private readonly key: string;

  constructor(private readonly redis: Redis, keys: Keys) {
    this.key = `${keys.prefix}{vault}:hosts`;
  }

  /** set records a secret's list; an empty list removes it (the secret is no longer bound to hosts). */
  async set(ref: string, hosts: string[]): Promise<void> {
    if (hosts.length) await this.redis.hset(this.key, ref, JSON.stringify(hosts));
    else await this.redis.hdel(this.key, ref);
  }

  /** of reads the lists of refs, in order (undefined where a ref has none). */
  async of(refs: string[]): Promise<(string[] | undefined)[]> {
    if (!refs.length) return [];
    const raw = await this.redis.hmget(this.key, ...refs);
    return raw.map((j) => (j ? (JSON.parse(j) as string[]) : undefined));
  }

  /** delete forgets a deleted secret's list. */
  async delete(ref: string): Promise<void> {
    await this.redis.hdel(this.key, ref);
  }
}
