import type { Logger } from 'pino';
import type { RegistryCache } from '../../controllers/registry-controller.ts';
import type { EventBus } from '../../store/event-bus.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { isSyncEligible } from './catalog.ts';
import { execute, type HookOutcome } from './executors.ts';
import { BindingIndex, type Binding, type HookInput } from './matcher.ts';
import type { HookRuns } from './runs.ts';

/** GateOptions tune one gated point. */
export interface GateOptions {
  /** The timeout of a hook that sets none (default HOOK_TIMEOUT; tool.pre_call passes the tool policy's hook_timeout). */
  timeoutMs?: number;
  /** A subprocess hook's working directory when it sets none (default: the payload's workspace_root, else DATA_DIR). */
  cwd?: string;
  /** Fields sync hooks receive but that are never published or recorded (e.g. a tool call's `input`). */
  private?: string[];
  /** The publishing family of the bus event (default: the event's first segment). */
  source?: string;
}

/** GateResult is the decision at a gated point; `hooks` lists every sync hook that ran, in order. */
export type GateResult =
  | { denied: false; hooks: HookOutcome[] }
  | { denied: true; reason: string; hook: string; hooks: HookOutcome[] };

/** Gate is what a gated point calls (HookGate; a test or a process without hooks may pass its own). */
export interface Gate {
  gate(event: string, payload: Record<string, unknown>, opts?: GateOptions): Promise<GateResult>;
}

const TEXT_CAP = 4096;

/**
 * HookGate is the one helper every sync-eligible point calls before it acts (catalog.ts GATED lists them):
 * it publishes the event on the bus (so async bindings on it run too, from the dispatcher), then runs the
 * enabled sync bindings in scope that match, highest priority first, each within its timeout. A `deny` stops
 * the chain and the action; an `error` (crash, timeout, refused command) stops it only for a required hook,
 * so a failing optional hook never blocks. Every run is recorded (HookRuns).
 */
export class HookGate implements Gate {
  private readonly index = new BindingIndex();

  constructor(private readonly o: {
    registries: RegistryCache; bus: EventBus; runs: HookRuns; security: SecurityPolicy; logger: Logger; defaultTimeoutMs: number; dataDir: string;
  }) {}

  async gate(event: string, payload: Record<string, unknown>, opts: GateOptions = {}): Promise<GateResult> {
    const hidden = new Set(opts.private ?? []);
    const visible: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(payload)) if (!hidden.has(k)) visible[k] = typeof v === 'string' && v.length > TEXT_CAP ? v.slice(0, TEXT_CAP) : v;
    const { session_id: sessionId, workspace_id: workspaceId, agent_name: agentName, ...data } = visible;
    const [published, entries] = await Promise.all([
      this.o.bus.publish({
        type: event, source: opts.source ?? event.split('.')[0], session_id: str(sessionId), workspace_id: str(workspaceId), agent_name: str(agentName),
        summary: event, data,
      }).catch((err) => { this.o.logger.warn({ err: (err as Error).message, event }, 'gated event not published'); return undefined; }),
      this.o.registries.read(['hook.binding']),
    ]);
    const meta = { event, event_id: published?.id ?? '', timestamp: published?.timestamp ?? new Date().toISOString() };
    const input: HookInput = { ...payload, ...meta };
    if (!isSyncEligible(event)) return { denied: false, hooks: [] };
    const chosen = this.index.update(entries.entries['hook.binding'] as Binding[]).select('sync', input);
    if (!chosen.length) return { denied: false, hooks: [] };
    // NOTE: what is recorded is what was published, which the bus masked: the same mask, so no run record keeps a secret.
    const publicInput: HookInput = (await this.o.security.secrets.known.mask()).value({ ...visible, ...meta });
    const cwd = opts.cwd || str(payload.workspace_root) || this.o.dataDir;
    const ctx = { defaultTimeoutMs: opts.timeoutMs ?? this.o.defaultTimeoutMs, cwd, security: this.o.security, logger: this.o.logger, publicInput };
    const hooks: HookOutcome[] = [];
    for (const b of chosen) {
      // NOTE: a native hook ends within microseconds: its start is announced with its completion, in one write.
      const native = b.spec.executor_kind === 'native';
      const started = this.o.runs.start(b, publicInput, 'sync', 1, native);
      const out = await execute(b, input, ctx);
      // NOTE: recorded in the background: the decision never waits on the run list or the bus.
      void this.o.runs.complete(b, publicInput, 'sync', 1, started, out, out.decision, native);
      const { record: _record, ...shown } = out;
      hooks.push(shown);
      if (out.decision === 'deny' || (out.decision === 'error' && out.required)) {
        return { denied: true, reason: out.reason || `${out.decision} from hook ${out.name}`, hook: out.name, hooks };
      }
    }
    return { denied: false, hooks };
  }
}

const str = (v: unknown) => (typeof v === 'string' ? v : '');
