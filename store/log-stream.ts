import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';

/** LOG_STREAM_RETENTION is about how many log lines the shared stream keeps (MAXLEN ~). */
export const LOG_STREAM_RETENTION = 10_000;

/**
 * LogStream is the shared, capped Redis stream (its own hash tag, `{logs}`) where every process of the service
 * appends its warning and error log lines, so a support bundle built by one replica shows every replica's.
 * Each entry holds one pino JSON line (field `l`).
 */
export class LogStream {
  readonly key: string;

  constructor(private readonly redis: Redis, keys: Keys, private readonly retention = LOG_STREAM_RETENTION) {
    this.key = `${keys.prefix}{logs}:lines`;
  }

  /** append adds lines in order with one round trip. */
  async append(lines: readonly string[]): Promise<void> {
    if (!lines.length) return;
    const pipe = this.redis.pipeline();
    for (const line of lines) pipe.xadd(this.key, 'MAXLEN', '~', this.retention, '*', 'l', line);
    for (const [err] of (await pipe.exec()) ?? []) if (err) throw err;
  }

  /** newestFirst yields the kept lines from the newest back, a page at a time. */
  async *newestFirst(pageSize = 500): AsyncGenerator<string> {
    let end = '+';
    for (;;) {
      const rows = (await this.redis.xrevrange(this.key, end, '-', 'COUNT', pageSize)) as [string, string[]][];
      for (const [, fields] of rows) yield fields[fields.indexOf('l') + 1];
      if (rows.length < pageSize) return;
      end = `(${rows[rows.length - 1][0]}`;
    }
  }
}
