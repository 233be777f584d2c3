import type { Redis } from 'ioredis';

/**
 * duplicateConnection opens another connection like `redis` for a blocking reader (XREAD BLOCK, BRPOP,
 * SUBSCRIBE), which must not share the command connection. NOTE: ioredis reports connection errors as `error`
 * events and crashes a process on an unhandled one; the reader sees the failure on its command and retries, and
 * the service's main connection logs the outage once, so this one stays quiet. `name` is its CLIENT SETNAME.
 */
export function duplicateConnection(redis: Redis, name?: string): Redis {
  // NOTE: a name shows in CLIENT LIST, so an operator (or a test) can count the readers of one kind.
  const conn = redis.duplicate(name ? { connectionName: name } : undefined);
  conn.on('error', () => undefined);
  return conn;
}
