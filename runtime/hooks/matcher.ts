import { Minimatch } from 'minimatch';
import type { RegistryEntry } from '../../controllers/registry-controller.ts';
import type { BusEvent } from '../../store/event-bus.ts';

/** HookSpec is a decoded `hook.binding` spec (codecs/hook-binding.ts decodeHook). */
export interface HookSpec {
  name: string;
  event: string;
  source: string;
  mode: 'sync' | 'async';
  required: boolean;
  priority: number;
  timeout?: string;
  matcher: Record<string, unknown>;
  executor_kind: 'native' | 'subprocess' | 'wasm';
  command?: string;
  args?: string[];
  working_dir?: string;
  env?: Record<string, string>;
  secret_env?: Record<string, string>;
  metadata?: Record<string, string>;
  enabled: boolean;
}

/** Binding is one projected hook.binding record. */
export type Binding = RegistryEntry<HookSpec>;

/**
 * HookInput is what a hook receives (JSON on a subprocess's stdin) and what its matcher reads: one flat object,
 * `event` (the catalog name) and `event_id` (the bus entry id), the session, workspace and agent, and the
 * event's own fields (a bus event's `data`, or what a gated point passes: tool_id, tool_name, input, …).
 */
export type HookInput = Record<string, unknown> & { event: string };

/** inputOfBusEvent flattens a bus event into a HookInput (the event's fields win over its data's). */
export function inputOfBusEvent(ev: BusEvent): HookInput {
  return {
    ...ev.data, event: ev.type, event_id: ev.id, timestamp: ev.timestamp, source: ev.source, outcome: ev.outcome, summary: ev.summary,
    session_id: ev.session_id, workspace_id: ev.workspace_id, agent_name: ev.agent_name,
  };
}

const globs = new Map<string, Minimatch>();

/** glob compiles a matcher pattern once per process. */
function glob(pattern: string): Minimatch {
  let g = globs.get(pattern);
  if (!g) {
    if (globs.size > 10_000) globs.clear();
    g = new Minimatch(pattern);
    globs.set(pattern, g);
  }
  return g;
}

const matchString = (have: unknown, want: string) => typeof have === 'string' && (have === want || (/[*?[\]]/.test(want) && glob(want).match(have)));

/**
 * matches applies a binding's matcher to an event: every key must match (strings exactly or as a glob, booleans
 * exactly, `autonomy` key by key against the event's `autonomy` object or its top-level fields). A key the event
 * does not carry never matches, so a binding narrowed by it does not run.
 */
export function matches(matcher: Record<string, unknown>, input: Record<string, unknown>): boolean {
  for (const k in matcher) {
    const want = matcher[k];
    const have = input[k];
    if (typeof want === 'boolean') {
      if (have !== want) return false;
    } else if (typeof want === 'string') {
      if (!matchString(have, want)) return false;
    } else if (k === 'autonomy' && want && typeof want === 'object') {
      const auto = (input.autonomy && typeof input.autonomy === 'object' ? input.autonomy : {}) as Record<string, unknown>;
      for (const [ak, av] of Object.entries(want)) if (!matchString(auto[ak] ?? input[ak], String(av))) return false;
    } else {
      return false;
    }
  }
  return true;
}

/** inScope: a global binding sees every event; a workspace binding only its workspace's. */
export const inScope = (b: Binding, workspaceId: unknown) => b.scope.kind === 'global' || b.scope.id === workspaceId;

/** byPriority orders bindings highest priority first, then by name (the order sync hooks run in). */
export const byPriority = (a: Binding, b: Binding) => b.spec.priority - a.spec.priority || a.spec.name.localeCompare(b.spec.name) || a.id.localeCompare(b.id);

/**
 * BindingIndex groups the enabled bindings by event and mode, ordered by priority, so matching an event costs a
 * map lookup plus the matchers of that event's bindings, not a pass over every binding. It is rebuilt only
 * when the registry array changes (RegistryCache hands the same array back while the registry is unchanged).
 */
export class BindingIndex {
  private source?: Binding[];
  private byEvent = new Map<string, { sync: Binding[]; async: Binding[] }>();
  private byId = new Map<string, Binding>();

  update(entries: Binding[]): this {
    if (entries === this.source) return this;
    this.source = entries;
    this.byEvent = new Map();
    this.byId = new Map(entries.map((b) => [b.id, b]));
    for (const b of [...entries].sort(byPriority)) {
      if (b.spec.enabled === false) continue;
      let slot = this.byEvent.get(b.spec.event);
      if (!slot) this.byEvent.set(b.spec.event, (slot = { sync: [], async: [] }));
      (b.spec.mode === 'sync' ? slot.sync : slot.async).push(b);
    }
    return this;
  }

  /** has is true when any enabled binding (either mode) is on `event`. */
  has(event: string): boolean {
    return this.byEvent.has(event);
  }

  /** get returns one binding by record id (enabled or not). */
  get(id: string): Binding | undefined {
    return this.byId.get(id);
  }

  /** select returns the enabled bindings of `mode` on the input's event, in scope and matching, in priority order. */
  select(mode: 'sync' | 'async', input: HookInput): Binding[] {
    const slot = this.byEvent.get(input.event);
    if (!slot) return [];
    return slot[mode].filter((b) => inScope(b, input.workspace_id) && matches(b.spec.matcher ?? {}, input));
  }
}
