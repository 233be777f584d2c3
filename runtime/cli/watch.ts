import type { EventSourceMessage } from 'eventsource-parser';
import type { ResourceRecord } from '../../store/types.ts';
import type { ApiClient } from './client.ts';
import { ApiError, CliError } from './errors.ts';
import type { Format } from './output.ts';
import { readSse } from './sse.ts';

/** WatchOptions are `svcctl watch`'s: a kind, where to start, when to stop, how long to wait between reconnects. */
export interface WatchOptions {
  kind?: string;
  since?: number;
  count: number;
  signal: AbortSignal;
  format: Format;
  retryMs?: number;
}

const sleep = (ms: number, signal: AbortSignal) => new Promise<void>((resolve) => {
  const t = setTimeout(resolve, ms);
  signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

/**
 * watchChanges prints the change stream of the resources (one line per put/delete) and keeps it going: after a
 * dropped connection it reconnects from the last revision it printed (so no change is lost or printed twice),
 * and after an `expired` frame (the change log no longer holds that revision) it lists the records again, prints
 * each as a `sync` line (the latest state), and watches on from the list's revision. Without `since` it starts
 * at the current revision (read first, so a drop before the first change loses nothing either). Only the first
 * connection's failure ends it (exit 3 or the API error); later failures are retried until the signal aborts.
 */
export async function watchChanges(api: ApiClient, o: WatchOptions): Promise<void> {
  const kindQ: Record<string, string> = o.kind ? { kind: o.kind } : {};
  // NOTE: `limit` 1 when only the revision is wanted (the header is read before the list, a safe start).
  const list = async (limit?: number) => {
    const r = await api.call<{ records: ResourceRecord[] }>('GET', `/api/resources?${new URLSearchParams({ ...kindQ, ...(limit ? { limit: String(limit) } : {}) })}`);
    if (r.status >= 400) throw new ApiError(r.status, r.body, 'watch');
    return { revision: Number(r.headers.get('x-svc-revision') ?? 0), records: r.body.records };
  };
  const json = o.format === 'json' || o.format === 'yaml';
  const print = (event: string, d: Record<string, any>) => {
    if (json) process.stdout.write(`${JSON.stringify(d)}\n`);
    else process.stdout.write(`${d.revision ?? ''} ${event} ${d.record ? `${d.record.kind}/${d.record.id} v${d.record.version}` : ''}\n`);
  };
  let last = o.since ?? (await list(1)).revision;
  let left = o.count;
  let connected = false;
  let retry = 0;
  let expired = false;
  while (!o.signal.aborted && left > 0) {
    try {
      if (expired) {
        const now = await list();
        for (const record of now.records) print('sync', { type: 'sync', revision: now.revision, record });
        last = now.revision;
        expired = false;
      }
      const q = new URLSearchParams({ watch: 'true', ...kindQ, since_revision: String(last) });
      const res = await api.raw('GET', `/api/resources?${q}`, { headers: { accept: 'text/event-stream' }, signal: o.signal });
      if (res.status >= 400) throw new ApiError(res.status, await res.json().catch(() => undefined), 'watch');
      connected = true;
      retry = 0;
      await readSse(res, (ev: EventSourceMessage) => {
        const d = JSON.parse(ev.data);
        if (ev.event === 'expired') {
          expired = true;
          process.stderr.write(`watch: revision ${last} is no longer in the change log; listing again\n`);
          return false;
        }
        if (ev.id !== undefined) last = Number(ev.id);
        print(ev.event ?? 'message', d);
        return --left > 0;
      });
    } catch (err) {
      if (o.signal.aborted || (err as Error).name === 'AbortError') return;
      const retryable = err instanceof ApiError ? err.status >= 500 : err instanceof CliError;
      if (!connected || !retryable) throw err;
      process.stderr.write(`watch: ${(err as Error).message}; reconnecting from revision ${last}\n`);
    }
    if (left <= 0 || o.signal.aborted) return;
    if (expired) continue;
    // NOTE: a stream the server ended (or cut) is resumed after a short wait growing to 5 s while it stays down.
    await sleep(Math.min(5_000, (o.retryMs ?? 500) * 2 ** retry++), o.signal);
  }
}
