import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';

/** sha256Hex is the lower-case hex SHA-256 of some bytes: an artifact's address. */
export const sha256Hex = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

/**
 * ArtifactStore is the service's one content-addressed blob store: a blob lives
 * in Redis under its SHA-256, each under a hash tag of its own (`{art:<sha256>}`), so any replica reads what any
 * other wrote and the blobs spread over a cluster's slots. A blob with a time to live is removed by Redis.
 */
export class ArtifactStore {
  constructor(private readonly redis: Redis, private readonly keys: Keys) {}

  /** key is where the blob with this digest lives. */
  key(sha256: string) { return `${this.keys.prefix}{art:${sha256}}:blob`; }

  /**
   * put stores bytes under their digest and returns it; `ttlMs` bounds how long they are kept (0: kept). A blob
   * already stored keeps its bytes (same digest, same bytes) and takes the longer of the two lives.
   */
  async put(bytes: Buffer, ttlMs: number): Promise<string> {
    const digest = sha256Hex(bytes);
    const key = this.key(digest);
    if (ttlMs > 0) {
      // NOTE: GT only lengthens a life; a fresh SET gives the blob its first one.
      const set = await this.redis.set(key, bytes, 'PX', ttlMs, 'NX');
      if (set === null) await this.redis.pexpire(key, ttlMs, 'GT');
    } else {
      await this.redis.multi().set(key, bytes).persist(key).exec();
    }
    return digest;
  }

  /** get returns the blob with this digest, or undefined when it is gone (expired) or its bytes do not match. */
  async get(sha256: string): Promise<Buffer | undefined> {
    const bytes = await this.redis.getBuffer(this.key(sha256));
    // NOTE: a blob is verified on every read: a digest is a promise about the bytes a reader gets.
    return bytes && sha256Hex(bytes) === sha256 ? bytes : undefined;
  }

  /** delete removes the blob with this digest (a caller that knows nothing else refers to it). */
  async delete(sha256: string): Promise<void> {
    await this.redis.del(this.key(sha256));
  }
}
