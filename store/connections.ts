import type { Redis } from 'ioredis';

/**
 * duplicateConnection opens another connection like `redis` for a blocking reader (XREAD BLOCK, BRPOP,
 * SUBSCRIBE), which must not share the command connection. NOTE: ioredis reports connection errors as `error`
 * events and crashes a process on an unhandled one; the reader sees the failure on its command and retries, and
 * the service's main connection logs the outage once, so this one stays quiet.
 */
export function duplicateConnection(redis: Redis): Redis {
  const conn = redis.duplicate();
  conn.on('error', () => undefined);
  return conn;
}
