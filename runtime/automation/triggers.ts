import type { Logger } from 'pino';
import { RegistryCache, type RegistryEntry } from '../../controllers/registry-controller.ts';
import type { BusEvent, EventBus } from '../../store/event-bus.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { StreamGroupReader } from '../../store/stream-group.ts';
import type { AutomationQueue } from './queue.ts';
import type { OwnerSpec } from './runs.ts';
import { renderTemplate, valueAt } from './template.ts';

/** eventMatches: a trigger's `event` is the bus event's type exactly, or a prefix pattern with one trailing `.*`. */
export function eventMatches(pattern: string, type: string): boolean {
  if (pattern === 'webhook') return false;
  if (pattern.endsWith('.*')) return type.startsWith(pattern.slice(0, -1));
  return pattern === type;
}

/**
 * filterMatches applies a trigger's `filter` to a bus event: `kind` is the event's type, `scope`,
 * `workspace_id` and `source` its fields, `data.a.b.c` the value at that path of its data; every key must equal
 * its value exactly (a non-string value is compared as its JSON).
 */
export function filterMatches(filter: Record<string, string> | undefined, ev: BusEvent): boolean {
  for (const [key, want] of Object.entries(filter ?? {})) {
    let got: unknown;
    if (key === 'kind') got = ev.type;
    else if (key === 'scope') got = ev.scope;
    else if (key === 'workspace_id') got = ev.workspace_id;
    else if (key === 'source') got = ev.source;
    else if (key === 'session_id') got = ev.session_id;
    else if (key === 'agent_name') got = ev.agent_name;
    else if (key === 'origin') got = ev.data?.origin ?? '';
    else if (key.startsWith('data.')) got = valueAt(ev.data, key.slice(5));
    else return false;
    const s = got === undefined || got === null ? undefined : typeof got === 'string' ? got : JSON.stringify(got);
    if (s !== want) return false;
  }
  return true;
}

/**
 * triggerMatches: the trigger is an enabled event trigger, its event pattern and filter match, and a
 * workspace-scoped trigger sees only events of its own workspace. NOTE: events of the sessions the trigger itself
 * started do not fire it unless it opts in (`include_own_events`): a trigger on `turn.end` would otherwise fire
 * again from its own run's turn until its fire_limit.
 */
export function triggerMatches(t: RegistryEntry<OwnerSpec>, ev: BusEvent): boolean {
  const s = t.spec;
  if (!s.enabled || !eventMatches(s.event ?? '', ev.type)) return false;
  if (t.scope.kind === 'workspace' && ev.workspace_id !== t.scope.id) return false;
  if (!s.include_own_events && ev.data?.origin === `automation.trigger/${t.id}`) return false;
  return filterMatches(s.filter, ev);
}

/** eventContext is what a trigger's prompt template sees of an event: its fields (`{{ .type }}`, `{{ .data.id }}`). */
export const eventContext = (ev: BusEvent): Record<string, unknown> => ({ ...ev, event: ev.type });

/** TriggerEngineOptions configures the event trigger reader. */
export interface TriggerEngineOptions {
  bus: EventBus;
  store: ResourceStore;
  queue: AutomationQueue;
  logger: Logger;
}

/**
 * TriggerEngine matches every bus event against the enabled event triggers (consumer group `triggers`, at least
 * once) and fires each match through the automation queue with the stable job id `evt.<event id>.<trigger id>`,
 * so a page handled twice fires once (the run is keyed by the same name).
 */
export class TriggerEngine {
  private readonly reader: StreamGroupReader;
  private readonly registries: RegistryCache;

  constructor(private readonly o: TriggerEngineOptions) {
    this.registries = new RegistryCache(o.store);
    // NOTE: only the events some enabled trigger is on are decoded (most events have none).
    this.reader = o.bus.reader('triggers', o.logger, (events) => this.handle(events), async () => {
      const live = (await this.live()).map((t) => t.spec.event!);
      return (type) => live.some((p) => eventMatches(p, type));
    });
  }

  start(): Promise<void> { return this.reader.start(); }
  stop(): Promise<void> { return this.reader.stop(); }

  /** live reads the enabled triggers on bus events (not webhooks). */
  private async live(): Promise<RegistryEntry<OwnerSpec>[]> {
    const triggers = (await this.registries.read(['automation.trigger'])).entries['automation.trigger'] as RegistryEntry<OwnerSpec>[];
    return triggers.filter((t) => t.spec.enabled && t.spec.event && t.spec.event !== 'webhook');
  }

  private async handle(events: BusEvent[]): Promise<void> {
    const live = await this.live();
    if (!live.length) return;
    const fires: Promise<void>[] = [];
    for (const ev of events) {
      for (const t of live) {
        if (!triggerMatches(t, ev)) continue;
        const key = `evt.${ev.id}.${t.id}`;
        fires.push(this.o.queue.fire({
          kind: 'trigger', trigger_id: t.id, fire_key: key, event_id: ev.id, workspace_id: ev.workspace_id,
          prompt: renderTemplate(t.spec.prompt ?? '', eventContext(ev)), scheduled_at: Date.parse(ev.timestamp),
        }, key, t.spec.retry));
      }
    }
    await Promise.all(fires);
  }
}
