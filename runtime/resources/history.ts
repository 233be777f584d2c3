import { parseChange, type ResourceStore } from '../../store/resource-store.ts';
import type { ChangeEvent } from '../../store/types.ts';

/** HISTORY_PAGE is how many change-log entries one read takes while walking the log backwards. */
const HISTORY_PAGE = 2000;

/**
 * recordHistory reads one record's changes (puts and deletes, each with the record as written) from the change
 * log, the newest `limit` of them, oldest first. Only what the log still retains (CHANGE_LOG_RETENTION) is there.
 * NOTE: the log is one stream for every record, so this walks it backwards page by page and parses only the
 * entries whose kind and id match; a record unchanged for a long time costs a walk over the whole retained log
 * (100,000 entries by default: tens of milliseconds of Redis reads).
 */
export async function recordHistory(store: ResourceStore, kind: string, id: string, limit: number): Promise<ChangeEvent[]> {
  const out: ChangeEvent[] = [];
  let end = '+';
  for (;;) {
    const rows = (await store.redis.xrevrange(store.keys.changes, end, '-', 'COUNT', HISTORY_PAGE)) as [string, string[]][];
    for (const [entryId, fields] of rows) {
      if (fieldOf(fields, 'kind') === kind && fieldOf(fields, 'id') === id) {
        out.push(parseChange(entryId, fields));
        if (out.length >= limit) return out.reverse();
      }
    }
    if (rows.length < HISTORY_PAGE) return out.reverse();
    end = `(${rows.at(-1)![0]}`;
  }
}

function fieldOf(fields: string[], name: string): string | undefined {
  for (let i = 0; i < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}
