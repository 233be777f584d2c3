import type { Context } from 'koa';
import type { Logger } from 'pino';
import { ValidationError } from '../store/errors.ts';
import { splitMember } from '../store/keys.ts';
import type { ResourceStore } from '../store/resource-store.ts';
import type { ReconcileWaiter } from '../runtime/resources/reconcile-waiter.ts';
import { SseStream } from './sse.ts';

/**
 * watchStatuses streams the reconcile statuses of one kind (or one record) as server-sent events: first one
 * `snapshot` frame with the current status of every record, then one `status` frame per status change. Every
 * status write announces its key on the `reconciled` channel, which the stream hears (ReconcileWaiter.onReconciled) before
 * it reads the snapshot and re-reads each announced key, so no change between the two is missed, and a frame
 * always carries the status as stored then (never a stale one). A reconnecting client gets a fresh snapshot, so
 * nothing needs resuming by id: the snapshot is the latest state. Unchanged statuses (a reconcile that wrote the
 * same status) are not sent again.
 */
export async function watchStatuses(ctx: Context, store: ResourceStore, waiter: ReconcileWaiter, kind: string, only: string | undefined, logger: Logger): Promise<void> {
  if (!kind) throw new ValidationError('kind is required', 'invalid_filter', { kind: 'is required' });
  const pending = new Set<string>();
  let wake: (() => void) | undefined;
  // NOTE: the process's one `reconciled` subscription; a batch of reconciles announces many keys in one message.
  const unsubscribe = waiter.onReconciled((keys) => {
    for (const key of keys) {
      const ref = splitMember(key);
      if (ref.kind !== kind || (only !== undefined && ref.id !== only)) continue;
      pending.add(ref.id);
      wake?.();
    }
  });
  const sse = new SseStream(ctx, () => { unsubscribe(); wake?.(); });
  const sent = new Map<string, string>();
  void (async () => {
    try {
      const ids = only !== undefined ? ((await store.get(kind, only)) ? [only] : []) : await store.idsOf(kind);
      const statuses = await store.statusesOf(ids.map((id) => ({ kind, id })));
      const snapshot = ids.map((id, i) => ({ id, status: statuses[i] ?? null }));
      for (const s of snapshot) sent.set(s.id, JSON.stringify(s.status));
      sse.send({ event: 'snapshot', data: { type: 'snapshot', kind, statuses: snapshot } });
      while (!sse.closed) {
        if (!pending.size) await new Promise<void>((r) => { wake = r; });
        wake = undefined;
        if (sse.closed) break;
        const batch = [...pending];
        pending.clear();
        const read = await store.statusesOf(batch.map((id) => ({ kind, id })));
        batch.forEach((id, i) => {
          const json = JSON.stringify(read[i] ?? null);
          if (sent.get(id) === json || (json === 'null' && !sent.has(id))) return;
          sent.set(id, json);
          sse.send({ event: 'status', data: { type: 'status', kind, id, status: read[i] ?? null } });
        });
      }
    } catch (err) {
      if (!sse.closed) logger.warn({ err }, 'status watch failed');
    } finally {
      sse.end();
      unsubscribe();
    }
  })();
}
