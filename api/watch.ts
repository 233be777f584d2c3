import type { Context } from 'koa';
import type { Logger } from 'pino';
import { InputError } from '../store/errors.ts';
import { parseChange, type ResourceStore } from '../store/resource-store.ts';
import type { ChangeEvent, ListFilter } from '../store/types.ts';
import { SseStream } from './sse.ts';
import { duplicateConnection } from '../store/connections.ts';

/** matchesFilter applies list filters to a change's record. */
function matchesFilter(c: ChangeEvent, f: ListFilter): boolean {
  const r = c.record;
  if (f.kind && r.kind !== f.kind) return false;
  if (f.scope && (r.scope.kind !== f.scope.kind || (r.scope.id ?? '') !== (f.scope.id ?? ''))) return false;
  if (f.owner && (r.owner.kind !== f.owner.kind || r.owner.id !== f.owner.id)) return false;
  if (f.source && (r.source.kind !== f.source.kind || r.source.id !== f.source.id)) return false;
  return true;
}

/** startRevision reads `Last-Event-ID` (or `since_revision`); without either the watch starts at the head. */
function startRevision(ctx: Context): number | undefined {
  const raw = ctx.get('Last-Event-ID') || (ctx.query.since_revision as string | undefined);
  if (raw === undefined || raw === '') return undefined;
  if (!/^\d+$/.test(raw)) throw new InputError('Last-Event-ID / since_revision must be a revision number', 'invalid_revision', { since_revision: raw });
  return Number(raw);
}

/**
 * watchResources streams the change log as server-sent events: one frame per matching change, `id:` the
 * revision. Revisions are contiguous, so a gap between the resume point and the oldest retained entry means
 * the log was trimmed: the client gets one `expired` frame and must re-list.
 */
export async function watchResources(ctx: Context, store: ResourceStore, filter: ListFilter, logger: Logger): Promise<void> {
  const requested = startRevision(ctx);
  const conn = duplicateConnection(store.redis);
  let last = requested ?? (await store.revision());
  const sse = new SseStream(ctx, () => conn.disconnect());
  void (async () => {
    try {
      while (!sse.closed) {
        const res = (await conn.xread('COUNT', 500, 'BLOCK', 10_000, 'STREAMS', store.keys.changes, `${last}-0`)) as [string, [string, string[]][]][] | null;
        if (!res) {
          // No new entries: the resume point must still be at or after the retained log's start.
          const first = await store.firstRetainedRevision();
          if (first > last + 1) return expire(first);
          continue;
        }
        for (const [id, fields] of res[0][1]) {
          const change = parseChange(id, fields);
          if (change.revision !== last + 1) return expire(change.revision);
          last = change.revision;
          if (matchesFilter(change, filter)) sse.send({ id: change.revision, event: change.type, data: { type: change.type, revision: change.revision, record: change.record } });
        }
      }
    } catch (err) {
      if (!sse.closed) logger.warn({ err }, 'watch stream failed');
    } finally {
      sse.end();
      conn.disconnect();
    }
  })();

  function expire(firstRetained: number) {
    sse.send({ event: 'expired', data: { type: 'expired', revision: last, first_retained_revision: firstRetained, message: 'the change log no longer holds this revision; list again and watch from the list revision' } });
  }
}
