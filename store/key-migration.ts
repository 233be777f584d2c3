import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { isCluster } from './connections.ts';
import type { Keys } from './keys.ts';

/** KEY_LAYOUT is the version of the key layout (2: the hash-tag layout of store/keys.ts). */
export const KEY_LAYOUT = 2;

/**
 * legacyKeyName maps a key of the layout before hash tags (version 1) to its name now, or undefined when the key
 * is kept as it is (it already carries a tag) or dropped (a dead runtime's command stream: null).
 */
export function legacyKeyName(key: string, keys: Keys): string | null | undefined {
  const p = keys.prefix;
  if (!key.startsWith(p) || key.startsWith(`${p}{`)) return undefined;
  const rest = key.slice(p.length);
  const m = (re: RegExp) => re.exec(rest);
  let x: RegExpExecArray | null;
  if ((x = m(/^(rec|status|idx|registry|registry-rev|lock):(.*)$/s))) return `${keys.r}${x[1]}:${x[2]}`;
  if (['revision', 'changes', 'observed', 'reconciled', 'ws', 'ws:root', 'ws:name'].includes(rest)) return `${keys.r}${rest}`;
  if ((x = m(/^tool-approval:(.*)$/s))) return keys.toolApproval(x[1]);
  if ((x = m(/^session:([^:]+):(events|seq|lease|permissions|queue|reap)$/))) return `${keys.session(x[1])}${x[2]}`;
  if ((x = m(/^session:([^:]+)$/))) return `${keys.session(x[1])}session`;
  if (rest === 'sessions') return `${keys.sessions}all`;
  if ((x = m(/^sessions:(ws:.*|starts|live)$/s))) return `${keys.sessions}${x[1]}`;
  if ((x = m(/^session-token:(.*)$/s))) return `${keys.sessions}token:${x[1]}`;
  if (m(/^runtime:.*:cmd$/s)) return null;
  // NOTE: BullMQ keys were `<prefix>q:<queue>:<suffix>`; BullMQ builds every key from prefix and queue name, so a
  // rename keeps the queues' jobs, schedulers and counters.
  if ((x = m(/^q:([^:]+):(.*)$/s))) return `${p}{q:${x[1]}}:${x[1]}:${x[2]}`;
  return undefined;
}

/**
 * migrateKeyLayout renames the keys a version before the hash-tag layout stored (one Redis only: that version
 * could not run on a cluster), once, before anything else reads the store. NOTE: every replica of the old version
 * must be stopped first (its writes would land under the old names); the first new process renames under a lock
 * while the others wait for the layout mark. It returns how many keys it renamed.
 */
export async function migrateKeyLayout(redis: Redis, keys: Keys, logger: Logger): Promise<number> {
  if (isCluster(redis)) return 0;
  const mark = `${keys.r}key-layout`;
  const lock = `${keys.r}lock:key-layout`;
  for (;;) {
    if (Number(await redis.get(mark)) >= KEY_LAYOUT) return 0;
    if ((await redis.set(lock, String(process.pid), 'PX', 120_000, 'NX')) === 'OK') break;
    await new Promise((r) => setTimeout(r, 200));
  }
  try {
    let renamed = 0;
    let cursor = '0';
    do {
      const [next, found] = await redis.scan(cursor, 'MATCH', `${keys.prefix}*`, 'COUNT', 1000);
      cursor = next;
      for (const key of found) {
        const to = legacyKeyName(key, keys);
        if (to === undefined) continue;
        if (to === null) await redis.del(key);
        else { await redis.rename(key, to); renamed++; }
      }
    } while (cursor !== '0');
    await redis.set(mark, String(KEY_LAYOUT));
    if (renamed) logger.warn({ renamed, layout: KEY_LAYOUT }, 'renamed the keys of the previous layout to the hash-tag layout (Redis Cluster ready)');
    return renamed;
  } finally {
    await redis.del(lock);
  }
}
