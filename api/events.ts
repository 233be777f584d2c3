import Router from '@koa/router';
import type { Context } from 'koa';
import type { Logger } from 'pino';
import { busFrames, typePatternProblem, type BusStreamFilter } from '../runtime/events/bus-stream.ts';
import { InputError, ValidationError } from '../store/errors.ts';
import { BUS_ID, type EventBus } from '../store/event-bus.ts';
import { queryString } from './params.ts';
import { streamFrames } from './sse.ts';
import type { StreamSlots } from './stream-slots.ts';

/** busFilter reads `?type=` (repeatable: any pattern matching sends an event) and `?workspace_id=`. */
function busFilter(ctx: Context): BusStreamFilter {
  const raw = ctx.query.type;
  const types = (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).map((t) => t.trim());
  const bad = types.map((t) => [t, typePatternProblem(t)] as const).filter(([, why]) => why);
  if (bad.length) throw new ValidationError(`query parameter "type": ${bad.map(([t]) => JSON.stringify(t)).join(', ')} ${bad[0][1]}`, 'invalid_query', Object.fromEntries(bad.map(([t, why]) => [`type=${t}`, why!])));
  return { types, workspaceId: queryString(ctx.query, 'workspace_id') };
}

/** resumePoint reads `Last-Event-ID` (what EventSource sends on a reconnect), else `?since=`: a bus event id. */
function resumePoint(ctx: Context): string | undefined {
  const raw = ctx.get('Last-Event-ID') || queryString(ctx.query, 'since');
  if (!raw) return undefined;
  if (!BUS_ID.test(raw)) throw new InputError('Last-Event-ID / since must be an event bus id (<ms>-<n>)', 'invalid_last_event_id', { since: raw });
  return raw;
}

/** eventRoutes serves the event bus (store/event-bus.ts) to clients as server-sent events, each stream in a slot of `streams`. */
export function eventRoutes(deps: { bus: EventBus; logger: Logger; streams: StreamSlots }): Router {
  const { bus, logger, streams } = deps;
  const router = new Router({ prefix: '/api/events' });
  router.get('Stream event bus events (SSE; ?type= exact or prefix.* pattern, repeatable; ?workspace_id=; Last-Event-ID or ?since= resumes after a bus id)', '/stream', async (ctx) => {
    const filter = busFilter(ctx);
    const after = resumePoint(ctx);
    await streamFrames(ctx, (signal) => busFrames(bus, filter, after, signal), logger, 'event stream', streams);
  });
  return router;
}
