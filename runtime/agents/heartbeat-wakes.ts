import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { HeartbeatConfig, HeartbeatDiagnostic, TimeWindow } from '../../codecs/heartbeat.ts';
import { parseDuration } from '../../codecs/duration.ts';
import { readRegistry } from '../../controllers/registry-controller.ts';
import type { Gate } from '../hooks/gate.ts';
import type { EventBus, Outcome } from '../../store/event-bus.ts';
import { ConflictError, NotFoundError } from '../../store/errors.ts';
import { HeartbeatWakeStore, type WakeRecord, type WakeResult, type WakeSource } from '../../store/heartbeat-wake-store.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { SessionFields, SessionStore } from '../../store/session-store.ts';
import type { Workspace } from '../../store/workspace-store.ts';
import type { Settings } from '../process/settings.ts';
import { SessionService, sessionView } from '../sessions/session-service.ts';
import type { WorkspaceService } from '../workspaces/workspace-service.ts';
import type { PathConfinement } from '../security/paths.ts';
import { HeartbeatService } from './heartbeat.ts';
import { pickAgent, SCRIPTED_AGENT } from './resolve-agent.ts';

export type { WakeRecord, WakeResult, WakeSource } from '../../store/heartbeat-wake-store.ts';

/** WakeRequest asks for one wake decision for an agent in a workspace (optionally of one session). */
export interface WakeRequest {
  agentName: string;
  workspace: Workspace;
  source: WakeSource;
  /** Wake this session only; otherwise the agent's eligible sessions in the workspace. */
  sessionId?: string;
  /** Evaluate every gate, but send nothing and record nothing. */
  dryRun?: boolean;
  /** The schedule tick a scheduled wake belongs to (ms since the epoch). */
  scheduledAt?: number;
}

/** WakeTarget is one (agent, workspace) whose heartbeat is active, with its wake interval. */
export interface WakeTarget {
  agent_name: string;
  workspace_id: string;
  every_ms: number;
}

/** Heartbeat is the view HeartbeatService.get answers (the fields the wakes read). */
interface HeartbeatView {
  active: boolean;
  present: boolean;
  valid: boolean;
  enabled: boolean;
  digest: string;
  config_digest: string;
  snapshot_id: string;
  config_provenance: { subset: HeartbeatConfig };
  preferences: { active_hours: TimeWindow[]; quiet_windows: TimeWindow[]; min_interval: string };
  diagnostics: HeartbeatDiagnostic[];
  prompt: { summary: string; guidance_markdown: string };
}

const HISTORY_LIMIT_MAX = 1000;
const id = (prefix: string) => `${prefix}-${randomBytes(8).toString('hex')}`;
const lastActivity = (s: SessionFields) => String((s.activity as { last_activity_at?: string } | null)?.last_activity_at ?? s.updated_at ?? '');

/** windowContains says whether `now` falls in a local wall-clock window; an end at or before the start wraps midnight. */
export function windowContains(w: TimeWindow, now: Date): boolean {
  const parts = new Intl.DateTimeFormat('en-GB', { timeZone: w.timezone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).formatToParts(now);
  const get = (t: string) => Number(parts.find((p) => p.type === t)?.value ?? 0);
  const minutes = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));
  const cur = get('hour') * 60 + get('minute');
  const [start, end] = [minutes(w.start), minutes(w.end)];
  return end <= start ? cur >= start || cur < end : cur >= start && cur < end;
}

/** allowsAt applies a policy's preferences: inside an active-hours window (when any) and outside every quiet window. */
export function allowsAt(p: { active_hours: TimeWindow[]; quiet_windows: TimeWindow[] }, now: Date): boolean {
  if (p.active_hours.length && !p.active_hours.some((w) => windowContains(w, now))) return false;
  return !p.quiet_windows.some((w) => windowContains(w, now));
}

/**
 * wakePrompt is the text a wake sends: the heartbeat prompt projection's summary and guidance (already fitted
 * into context_projection_bytes) framed as an advisory reorientation, as the original words it.
 */
export function wakePrompt(p: { summary: string; guidance_markdown: string }): string {
  const parts = ['Agent Heartbeat requested a reorientation for this existing session.'];
  if (p.summary.trim()) parts.push(`Policy summary:\n${p.summary.trim()}`);
  if (p.guidance_markdown.trim()) parts.push(`Policy guidance:\n${p.guidance_markdown.trim()}`);
  parts.push('This prompt does not assign ownership or include task-run credentials. Inspect current session state before acting. '
    + 'If there is nothing useful to do, record that no action is needed and remain idle.');
  return parts.join('\n\n');
}

/** OUTCOMES ranks each result for the bus's notification filters. */
const OUTCOMES: Record<WakeResult, Outcome> = { sent: 'success', skipped: 'info', coalesced: 'info', rate_limited: 'warning', failed: 'failure' };

/**
 * HeartbeatWakes decides and sends heartbeat wakes; the wake route, the native tools and the scheduler's ticks
 * all come through `wake`. A wake reads the agent's heartbeat (HeartbeatService), checks its gates in the
 * original's order (config enabled, policy present and valid and active, active hours and quiet windows), picks
 * the agent's live sessions in the workspace, and for each eligible one (active, no prompt running) claims the
 * session's cooldown (`wake_cooldown`) and queues the heartbeat prompt (never interrupting a turn). One cycle
 * sends at most `max_wakes_per_cycle`; the rest are `rate_limited`. Every decision is recorded in the history
 * (kept `wake_event_retention`) and published on the bus (`agent.heartbeat.wake.before` / `.after`).
 */
export class HeartbeatWakes {
  readonly history: HeartbeatWakeStore;

  constructor(private readonly o: {
    store: ResourceStore; sessions: SessionStore; workspaces: WorkspaceService; heartbeat: HeartbeatService;
    prompter: Pick<SessionService, 'sendPrompt'>; bus: EventBus; logger: Logger;
    /** The hook gate of `agent.heartbeat.wake.before` (it publishes the event). */
    gate: Gate;
  }) {
    this.history = new HeartbeatWakeStore(o.store.redis, o.store.keys);
  }

  /** workspace resolves a workspace reference (id, name or path); 404 when there is none. */
  workspace(ref: string): Promise<Workspace> {
    return this.o.workspaces.get(ref);
  }

  /** requireAgent is 404 `agent_not_found` for a name no definition has (`scripted` always exists). */
  async requireAgent(name: string, workspaceId?: string): Promise<void> {
    if (name === SCRIPTED_AGENT) return;
    const entries = await readRegistry(this.o.store, 'agent');
    const known = workspaceId ? pickAgent(entries, name, workspaceId) : entries.some((e) => (e.spec as { name?: string }).name === name);
    if (!known) throw new NotFoundError(`agent "${name}" does not exist`, 'agent_not_found', { agent_name: name });
  }

  /**
   * projected waits (up to `timeoutMs`) until every record change (its key and change-log revision) has been
   * reconciled into its registry, which the heartbeat views read; one read of all the keys per look. NOTE: the
   * relay publishes a change when it enqueues its reconcile, so a reader of the bus event may otherwise still see
   * the registry from before it.
   */
  async projected(changes: { kind: string; id: string; revision: number }[], timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (let waiting = changes; ;) {
      const seen = await this.o.store.observedRevisions(waiting);
      waiting = waiting.filter((c, i) => seen[i] < c.revision);
      if (!waiting.length) return true;
      if (Date.now() > deadline) return false;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** list returns an agent's retained wakes, newest first (of one workspace when given). */
  async list(agentName: string, workspace: Workspace | undefined, limit: number): Promise<WakeRecord[]> {
    await this.requireAgent(agentName, workspace?.id);
    return this.history.list(agentName, workspace?.id, Math.min(Math.max(1, limit), HISTORY_LIMIT_MAX));
  }

  /**
   * targets lists every (agent, workspace) whose heartbeat is active, with its interval: the policy's
   * preferred min_interval (else the configured default_interval), never below the configured min_interval
   * (the view has already clamped it).
   */
  async targets(): Promise<WakeTarget[]> {
    // NOTE: targets are per workspace: with none, the agent registry (possibly large) is not read.
    const workspaces = await this.o.workspaces.list();
    const agents = workspaces.length ? await readRegistry(this.o.store, 'agent') : [];
    const out: WakeTarget[] = [];
    for (const ws of workspaces) {
      const names = new Set([SCRIPTED_AGENT, ...agents.filter((e) => e.scope.kind === 'global' || e.scope.id === ws.id).map((e) => String((e.spec as { name?: string }).name))]);
      for (const name of [...names].sort()) {
        const view = await this.view(name, ws).catch((err: Error) => {
          this.o.logger.warn({ err: err.message, agent_name: name, workspace_id: ws.id }, 'heartbeat: cannot read the policy');
          return undefined;
        });
        const every = view?.active ? parseDuration(view.preferences.min_interval) ?? 0 : 0;
        if (every > 0) out.push({ agent_name: name, workspace_id: ws.id, every_ms: every });
      }
    }
    return out;
  }

  private async view(name: string, ws: Workspace): Promise<HeartbeatView> {
    return (await this.o.heartbeat.get(name, ws)) as unknown as HeartbeatView;
  }

  /**
   * status is the `agent_heartbeat_status` answer: the policy's state, the cooldown of each of the agent's live
   * sessions in the workspace, and the most recent wakes.
   */
  async status(agentName: string, ws: Workspace, recent = 10): Promise<Record<string, unknown>> {
    const view = await this.view(agentName, ws);
    const sessions = (await this.o.sessions.list(ws.id)).filter((s) => s.agent_name === agentName && s.state !== 'stopped');
    const wakeStates = await Promise.all(sessions.map(async (s) => {
      const left = await this.history.cooldownLeft(agentName, ws.id, s.id);
      const health = sessionView(s, true).health as Record<string, unknown>;
      return { session_id: s.id, eligible_for_wake: health.eligible_for_wake, ineligibility_reason: health.ineligibility_reason, next_allowed_at: left ? new Date(Date.now() + left).toISOString() : '' };
    }));
    return {
      agent_name: agentName, workspace_id: ws.id, active: view.active, enabled: view.enabled, present: view.present, valid: view.valid,
      digest: view.digest, config_digest: view.config_digest, snapshot_id: view.snapshot_id, summary: view.prompt.summary,
      interval: view.preferences.min_interval, preferences: view.preferences, diagnostics: view.diagnostics,
      wake_states: wakeStates, wake_events: await this.history.list(agentName, ws.id, recent),
    };
  }

  /**
   * wake runs one wake cycle and answers its decisions (at least one). A manual wake considers one session:
   * the one asked for, else the agent's most recently active eligible session.
   */
  async wake(req: WakeRequest): Promise<WakeRecord[]> {
    const { agentName, workspace: ws } = req;
    // NOTE: the view is 404 agent_not_found for an unknown agent.
    const view = await this.view(agentName, ws);
    const cfg = view.config_provenance.subset;
    const now = new Date();
    const retentionMs = parseDuration(cfg.wake_event_retention) ?? 0;
    const decide = (result: WakeResult, reason: string, sessionId = '', message = ''): WakeRecord => ({
      id: id('hwe'), workspace_id: ws.id, agent_name: agentName, session_id: sessionId,
      policy_snapshot_id: view.present ? view.snapshot_id : '', policy_digest: view.present ? view.digest : '', config_digest: view.config_digest,
      source: req.source, result, reason, synthetic_prompt_id: '',
      ...(req.scheduledAt ? { scheduled_at: new Date(req.scheduledAt).toISOString() } : {}),
      ...(message ? { message } : {}),
      created_at: now.toISOString(), expires_at: new Date(now.getTime() + retentionMs).toISOString(),
    });
    const done = async (records: WakeRecord[]) => {
      if (req.dryRun) return records.map((r) => ({ ...r, id: '', synthetic_prompt_id: '' }));
      for (const r of records) {
        r.created_at = new Date().toISOString();
        r.expires_at = new Date(Date.parse(r.created_at) + retentionMs).toISOString();
        await this.history.record(r, retentionMs);
      }
      await this.o.bus.publishMany(records.map((r) => ({
        type: 'agent.heartbeat.wake.after', source: 'agents', workspace_id: r.workspace_id, session_id: r.session_id, agent_name: r.agent_name,
        outcome: OUTCOMES[r.result], summary: `heartbeat wake ${r.result} (${r.reason})`, data: { ...r },
      })));
      return records;
    };

    // NOTE: the gates in the original's order; a heartbeat that is off answers one decision, not one per session.
    if (!cfg.enabled) return done([decide('skipped', 'heartbeat_disabled')]);
    if (!view.present) return done([decide('skipped', 'heartbeat_no_policy')]);
    if (!view.valid) return done([decide('skipped', 'heartbeat_invalid', '', view.diagnostics.filter((d) => d.severity === 'error').map((d) => d.code).join(', '))]);
    if (!view.active) return done([decide('skipped', 'heartbeat_disabled')]);
    if (!allowsAt(view.preferences, now)) return done([decide('skipped', 'quiet_window')]);

    let sessions: SessionFields[];
    if (req.sessionId) {
      const s = await this.o.sessions.get(req.sessionId);
      if (!s || s.workspace_id !== ws.id || s.agent_name !== agentName) return done([decide('skipped', 'session_not_found', req.sessionId)]);
      sessions = s.state === 'stopped' ? [] : [s];
      if (!sessions.length) return done([decide('skipped', 'session_not_attachable', s.id)]);
    } else {
      // NOTE: active_session_only (true by default) has no other behaviour in the original either: a wake
      // never starts or resumes a session, it only reorients a live one.
      sessions = (await this.o.sessions.list(ws.id)).filter((s) => s.agent_name === agentName && s.state !== 'stopped')
        .sort((a, b) => lastActivity(b).localeCompare(lastActivity(a)));
      if (!sessions.length) return done([decide('skipped', 'heartbeat_no_eligible_session')]);
      if (req.source === 'manual') {
        const eligible = sessions.find((s) => (sessionView(s, true).health as { eligible_for_wake: boolean }).eligible_for_wake);
        sessions = [eligible ?? sessions[0]];
      }
    }

    const cooldownMs = parseDuration(cfg.wake_cooldown) ?? 0;
    const records: WakeRecord[] = [];
    let sent = 0;
    for (const s of sessions) {
      const health = sessionView(s, true).health as { eligible_for_wake: boolean; ineligibility_reason: string };
      if (sent >= cfg.max_wakes_per_cycle) { records.push(decide('rate_limited', 'heartbeat_rate_limited', s.id)); continue; }
      if (!health.eligible_for_wake) { records.push(decide('skipped', health.ineligibility_reason || 'heartbeat_no_eligible_session', s.id)); continue; }
      const record = decide('sent', 'wake_sent', s.id);
      const claimed = req.dryRun ? !(await this.history.cooldownLeft(agentName, ws.id, s.id)) : await this.history.claimCooldown(agentName, ws.id, s.id, record.id, cooldownMs);
      if (!claimed) {
        records.push(req.source === 'manual' ? decide('rate_limited', 'cooldown_active', s.id) : decide('coalesced', 'wake_coalesced', s.id));
        continue;
      }
      sent++;
      if (req.dryRun) { records.push(record); continue; }
      record.synthetic_prompt_id = id('turn');
      const before = { wake_event_id: record.id, source: req.source, synthetic_prompt_id: record.synthetic_prompt_id, policy_digest: record.policy_digest };
      // NOTE: the gate publishes `agent.heartbeat.wake.before` itself (HookGate publishes what it gates).
      const verdict = await this.o.gate.gate('agent.heartbeat.wake.before', { ...before, workspace_id: ws.id, session_id: s.id, agent_name: agentName }, { source: 'agents' });
      if (verdict.denied) { records.push(decide('skipped', 'hook_denied', s.id, `hook ${verdict.hook}: ${verdict.reason}`)); continue; }
      try {
        // NOTE: mode queue: a turn that started since the check above finishes first; the wake waits its turn.
        await this.o.prompter.sendPrompt(s, { type: 'prompt', session_id: s.id, turn_id: record.synthetic_prompt_id, text: wakePrompt(view.prompt), mode: 'queue' });
        records.push(record);
      } catch (err) {
        this.o.logger.warn({ err: (err as Error).message, session_id: s.id, agent_name: agentName }, 'heartbeat: wake prompt failed');
        records.push({ ...decide('failed', 'synthetic_prompt_failed', s.id, (err as { code?: string }).code ?? 'prompt failed'), id: record.id, synthetic_prompt_id: record.synthetic_prompt_id });
      }
    }
    return done(records);
  }

  /**
   * wakeNow is the manual wake (route and tool): the one decision, or 409 with a code naming why nothing was
   * sent (`heartbeat_no_eligible_session`, `cooldown_active`, `session_prompt_active`, `heartbeat_no_policy`…).
   */
  async wakeNow(req: Omit<WakeRequest, 'source' | 'scheduledAt'>): Promise<WakeRecord> {
    const [record] = await this.wake({ ...req, source: 'manual' });
    if (record.result !== 'sent') {
      throw new ConflictError(`no heartbeat wake was sent: ${record.reason}${record.message ? ` (${record.message})` : ''}`, record.reason, { wake: record });
    }
    return record;
  }
}

/**
 * createHeartbeatWakes builds the wake engine from the process's shared services (the composition root builds one
 * workspace and session service for every family), for the api role's route and tools and the controller's ticks.
 */
export function createHeartbeatWakes(o: {
  store: ResourceStore; sessions: SessionStore; workspaces: WorkspaceService; prompter: SessionService;
  settings: Settings; dataDir: string; paths: PathConfinement; bus: EventBus; logger: Logger; gate: Gate;
}): HeartbeatWakes {
  const heartbeat = new HeartbeatService({ store: o.store, settings: o.settings, dataDir: o.dataDir, paths: o.paths });
  return new HeartbeatWakes({ store: o.store, sessions: o.sessions, workspaces: o.workspaces, heartbeat, prompter: o.prompter, bus: o.bus, logger: o.logger, gate: o.gate });
}
