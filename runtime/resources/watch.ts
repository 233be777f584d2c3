import { duplicateConnection } from '../../store/connections.ts';
import { splitMember } from '../../store/keys.ts';
import { parseChange, type ResourceStore } from '../../store/resource-store.ts';
import type { ChangeEvent, ListFilter } from '../../store/types.ts';
import type { ReconcileWaiter } from './reconcile-waiter.ts';

/** WatchFrame is one frame of a watch; the API sends each as a server-sent event. */
export interface WatchFrame {
  id?: number;
  event: string;
  data: unknown;
}

/** matchesFilter applies list filters to a change's record. */
function matchesFilter(c: ChangeEvent, f: ListFilter): boolean {
  const r = c.record;
  if (f.kind && r.kind !== f.kind) return false;
  if (f.scope && (r.scope.kind !== f.scope.kind || (r.scope.id ?? '') !== (f.scope.id ?? ''))) return false;
  if (f.owner && (r.owner.kind !== f.owner.kind || r.owner.id !== f.owner.id)) return false;
  if (f.source && (r.source.kind !== f.source.kind || r.source.id !== f.source.id)) return false;
  return true;
}

/**
 * changeFrames reads the change log after revision `from`: one frame per matching change, `id` the revision, until
 * `signal` aborts. Revisions are contiguous, so a gap between the resume point and the oldest retained entry means
 * the log was trimmed: one `expired` frame ends the watch and the client must list again.
 */
export async function* changeFrames(store: ResourceStore, filter: ListFilter, from: number, signal: AbortSignal): AsyncGenerator<WatchFrame> {
  // NOTE: its own connection, because XREAD BLOCK holds it; an abort disconnects it to end the read at once.
  const conn = duplicateConnection(store.redis);
  const stop = () => conn.disconnect();
  signal.addEventListener('abort', stop);
  let last = from;
  const expired = (firstRetained: number): WatchFrame => ({
    event: 'expired',
    data: { type: 'expired', revision: last, first_retained_revision: firstRetained, message: 'the change log no longer holds this revision; list again and watch from the list revision' },
  });
  try {
    while (!signal.aborted) {
      const res = (await conn.xread('COUNT', 500, 'BLOCK', 10_000, 'STREAMS', store.keys.changes, `${last}-0`)) as [string, [string, string[]][]][] | null;
      if (!res) {
        // No new entries: the resume point must still be at or after the retained log's start.
        const first = await store.firstRetainedRevision();
        if (first > last + 1) return yield expired(first);
        continue;
      }
      for (const [id, fields] of res[0][1]) {
        const change = parseChange(id, fields);
        if (change.revision !== last + 1) return yield expired(change.revision);
        last = change.revision;
        if (matchesFilter(change, filter)) yield { id: change.revision, event: change.type, data: { type: change.type, revision: change.revision, record: change.record } };
      }
    }
  } catch (err) {
    if (!signal.aborted) throw err;
  } finally {
    signal.removeEventListener('abort', stop);
    conn.disconnect();
  }
}

/**
 * statusFrames follows the reconcile statuses of one kind (or one record): first one `snapshot` frame with the
 * current status of every record, then one `status` frame per status change, until `signal` aborts. Every status
 * write announces its key on the `reconciled` channel, which this hears (ReconcileWaiter.onReconciled) before it
 * reads the snapshot, and each announced key is read again, so no change between the two is missed and a frame
 * always carries the status as stored then (never a stale one). A reconnecting client gets a fresh snapshot, so
 * nothing needs resuming by id. Unchanged statuses (a reconcile that wrote the same status) are not sent again.
 */
export async function* statusFrames(store: ResourceStore, waiter: ReconcileWaiter, kind: string, only: string | undefined, signal: AbortSignal): AsyncGenerator<WatchFrame> {
  const pending = new Set<string>();
  /** Set when any key may have changed unannounced (`*`): every record of the watch is read again. */
  let everything = false;
  let wake: (() => void) | undefined;
  // NOTE: the process's one `reconciled` subscription; a batch of reconciles announces many keys in one message.
  const announced = waiter.onReconciled((keys) => {
    for (const key of keys) {
      if (key === '*') {
        everything = true;
        wake?.();
        continue;
      }
      const ref = splitMember(key);
      if (ref.kind !== kind || (only !== undefined && ref.id !== only)) continue;
      pending.add(ref.id);
      wake?.();
    }
  });
  const onAbort = () => wake?.();
  signal.addEventListener('abort', onAbort);
  try {
    await announced.ready;
    const ids = only !== undefined ? ((await store.get(kind, only)) ? [only] : []) : await store.idsOf(kind);
    const statuses = await store.statusesOf(ids.map((id) => ({ kind, id })));
    const snapshot = ids.map((id, i) => ({ id, status: statuses[i] ?? null }));
    const sent = new Map(snapshot.map((s) => [s.id, JSON.stringify(s.status)]));
    yield { event: 'snapshot', data: { type: 'snapshot', kind, statuses: snapshot } };
    while (!signal.aborted) {
      if (!pending.size && !everything) await new Promise<void>((r) => { wake = r; });
      wake = undefined;
      if (signal.aborted) break;
      if (everything) {
        everything = false;
        // NOTE: the records of the moment and those already sent (a deleted one's status is gone: sent as null).
        for (const id of only !== undefined ? [only] : await store.idsOf(kind)) pending.add(id);
        for (const id of sent.keys()) pending.add(id);
      }
      const batch = [...pending];
      pending.clear();
      const read = await store.statusesOf(batch.map((id) => ({ kind, id })));
      for (const [i, id] of batch.entries()) {
        const json = JSON.stringify(read[i] ?? null);
        if (sent.get(id) === json || (json === 'null' && !sent.has(id))) continue;
        sent.set(id, json);
        yield { event: 'status', data: { type: 'status', kind, id, status: read[i] ?? null } };
      }
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    announced.close();
  }
}
