import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import type { ScriptCommands } from './scripts.ts';

/** SupportOperationFields are the fields every stored support bundle operation has (the rest is the runtime's). */
export interface SupportOperationFields {
  operation_id: string;
  status: string;
  created_at: string;
}

/**
 * SupportStore keeps support bundle operations in Redis under their own hash tag (`{support}`), each with a time to
 * live, so any api replica answers for an operation any controller works on, and Redis removes it when it expires.
 */
export class SupportStore {
  private readonly prefix: string;

  constructor(private readonly redis: Redis & ScriptCommands, keys: Keys) {
    this.prefix = `${keys.prefix}{support}:`;
  }

  private key(id: string) { return `${this.prefix}op:${id}`; }

  /** create stores a new operation that Redis removes at `expiresAt` (epoch ms). */
  async create<T extends SupportOperationFields>(op: T, expiresAt: number): Promise<void> {
    await this.redis.set(this.key(op.operation_id), JSON.stringify(op), 'PXAT', expiresAt, 'NX');
  }

  /** get returns an operation, or undefined when it is unknown or expired. */
  async get<T extends SupportOperationFields>(id: string): Promise<T | undefined> {
    const json = await this.redis.get(this.key(id));
    return json ? (JSON.parse(json) as T) : undefined;
  }

  /**
   * advance merges `patch` into an operation whose status is one of `from` (store/scripts/update-run-1.lua, which
   * keeps the key's time to live): `updated` with the operation as stored, `skipped` when its status was another
   * (the operation as it is), `missing` when it is gone.
   */
  async advance<T extends SupportOperationFields>(id: string, patch: Partial<T>, from: readonly string[]): Promise<{ outcome: 'updated' | 'skipped'; op: T } | { outcome: 'missing' }> {
    const [code, json] = await this.redis.updateRun(this.key(id), JSON.stringify(patch), from.join(','));
    if (code === -1) return { outcome: 'missing' };
    return { outcome: code === 1 ? 'updated' : 'skipped', op: JSON.parse(json!) as T };
  }

  /** ttlMs is how long an operation has left (0 when it is gone). */
  async ttlMs(id: string): Promise<number> {
    return Math.max(0, await this.redis.pttl(this.key(id)));
  }
}
