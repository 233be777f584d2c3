import type { Logger } from 'pino';
import { MAX_ID_LENGTH } from '../../codecs/limits.ts';
import type { EventBus } from '../../store/event-bus.ts';
import { NotFoundError } from '../../store/errors.ts';
import { MemoryError, memoryValidation } from './errors.ts';
import type { LedgerStore, PutLedgerOutcome, StoredLedger } from '../../store/ledger-store.ts';
import type { SessionStore } from '../../store/session-store.ts';
import { lineageOf } from '../sessions/types.ts';
import type { WorkspaceService } from '../workspaces/workspace-service.ts';
import { checksumOf, ledgerPath, parseLedger, renderLedger, replayEvents, type LedgerEvent, type LedgerMeta } from './ledger.ts';

/** PRUNE_FIELDS and REPLAY_FIELDS are the body fields of prune and replay; others are refused (api/body-rule.ts). */
export const PRUNE_FIELDS = ['older_than_hours', 'dry_run'];
export const REPLAY_FIELDS = ['include_tool_events', 'include_memory'];
/** MAX_PRUNE_HOURS bounds `older_than_hours` (about 114 years): beyond it the cutoff is before any ledger. */
const MAX_PRUNE_HOURS = 1_000_000;
/** At most this many corrupt session ids are named in a repair answer (the count is always whole). */
const MAX_NAMED = 100;

/** MaterializeOutcome is what writing one session's ledger did. */
export type MaterializeOutcome = PutLedgerOutcome | 'not_stopped' | 'no_session';

/** RepairReport is the repair answer with the counts that tell what repair found. */
export interface RepairReport {
  completed_at: string;
  /** Ledgers built from their session's events (missing: the runtime that stopped the session died first). */
  repaired_ledgers: number;
  /** Ledgers already there and intact (or pruned), left as they are. */
  skipped_ledgers: number;
  /** Ledgers whose bytes no longer match the checksum taken when they were written (left as they are: evidence). */
  corrupt_ledgers: number;
  corrupt_session_ids: string[];
  /** Ledgers put back in the prune index (a crash fell between the ledger write and its index entry). */
  reindexed_ledgers: number;
  /** Stopped sessions whose ledger could not be built (their stored ledger differs from what their events give now). */
  conflicting_ledgers: number;
}

/** LedgerServiceOptions wire the ledger service to its stores. */
export interface LedgerServiceOptions {
  ledgers: LedgerStore;
  sessions: SessionStore;
  workspaces: Pick<WorkspaceService, 'get'>;
  bus?: EventBus;
  logger: Logger;
}

/**
 * LedgerService keeps session ledgers: a stopped session's events as one immutable JSON-Lines
 * document with a SHA-256 checksum, written once into Redis and verified on every read.
 *
 * Who writes a ledger: the runtime process that stops the session (SessionHost's stop hook, which also covers the
 * reaper that marks the sessions of a dead runtime stopped), before it releases the session's lease, so a stop
 * answered by the API has its ledger. A stop whose process died before the write leaves a stopped session without a
 * ledger: `POST /api/memory/sessions/repair` builds those from the session's events. Both render the same bytes
 * (renderLedger depends only on the stored session and events), so the write-once rule never refuses a repair of a
 * ledger the stop hook wrote.
 * NOTE: a ledger holds the session up to its first stop: a resumed session's later events stay in its event log
 * (GET …/events) and its ledger is not rewritten (written once, never changed).
 */
export class LedgerService {
  constructor(private readonly o: LedgerServiceOptions) {}

  /** materialize writes a stopped session's ledger from its stored events (idempotent). */
  async materialize(sessionId: string): Promise<MaterializeOutcome> {
    const { sessions, ledgers, logger } = this.o;
    const s = await sessions.get(sessionId);
    if (!s) return 'no_session';
    if (s.state !== 'stopped') return 'not_stopped';
    const all = await sessions.events(sessionId);
    const stop = all.findIndex((e) => e.type === 'session_stopped');
    // NOTE: up to the first stop: a later resume and stop render the same bytes, so the ledger stays as written.
    const events = stop >= 0 ? all.slice(0, stop + 1) : all;
    const lineage = lineageOf(s);
    const ledger = renderLedger({
      session_id: s.id, workspace_id: String(s.workspace_id ?? ''), parent_session_id: lineage.parent_session_id,
      root_session_id: lineage.root_session_id, spawn_depth: lineage.spawn_depth, started_at: String(s.created_at ?? ''),
      ended_at: stop >= 0 ? all[stop].timestamp : String(s.updated_at ?? ''),
      events: events.map((e) => ({ sequence: e.sequence, type: e.type, content: e.content, timestamp: e.timestamp })),
    });
    const outcome = await ledgers.put({
      session_id: s.id, workspace_id: String(s.workspace_id ?? ''), jsonl: ledger.jsonl, checksum: ledger.checksum,
      stopped_at: stop >= 0 ? all[stop].timestamp : String(s.updated_at ?? ''), events: ledger.events,
    });
    if (outcome === 'conflict') logger.warn({ session_id: s.id }, 'session ledger already written with other bytes; left unchanged');
    return outcome;
  }

  /** get answers a session's ledger `{events, meta}`, verified against its checksum. */
  async get(workspaceRef: string, sessionId: string): Promise<{ events: LedgerEvent[]; meta: LedgerMeta }> {
    const l = await this.load(workspaceRef, sessionId);
    const parsed = parseLedger(l.jsonl);
    if (!parsed.ok) throw corrupt(l, checksumOf(l.jsonl), parsed.reason);
    return { events: parsed.events, meta: { ...parsed.meta, path: ledgerPath(l.workspace_id, l.session_id), checksum: l.checksum } };
  }

  /** replay answers a ledger's events without tool and memory events unless asked. */
  async replay(workspaceRef: string, sessionId: string, body: Record<string, unknown>): Promise<{ session_id: string; events: LedgerEvent[] }> {
    const problems: Record<string, string> = {};
    for (const f of REPLAY_FIELDS) if (body[f] !== undefined && typeof body[f] !== 'boolean') problems[f] = 'must be a boolean';
    if (Object.keys(problems).length) throw validation(problems);
    const { events, meta } = await this.get(workspaceRef, sessionId);
    return { session_id: meta.session_id, events: replayEvents(events, { include_tool_events: body.include_tool_events === true, include_memory: body.include_memory === true }) };
  }

  /**
   * prune removes the ledgers stopped more than `older_than_hours` ago: each leaves a tombstone so it is
   * not written again; `dry_run` counts what it would remove and changes nothing.
   */
  async prune(body: Record<string, unknown>): Promise<{ dry_run: boolean; pruned_sessions: number; pruned_events: number }> {
    const problems: Record<string, string> = {};
    const hours = body.older_than_hours;
    if (hours === undefined || hours === null) problems.older_than_hours = 'is required';
    else if (typeof hours !== 'number' || !Number.isInteger(hours)) problems.older_than_hours = 'must be an integer';
    else if (hours <= 0) problems.older_than_hours = 'must be greater than 0';
    else if (hours > MAX_PRUNE_HOURS) problems.older_than_hours = `must be at most ${MAX_PRUNE_HOURS}`;
    if (body.dry_run !== undefined && typeof body.dry_run !== 'boolean') problems.dry_run = 'must be a boolean';
    if (Object.keys(problems).length) throw validation(problems);
    const dryRun = body.dry_run === true;
    const cutoff = Date.now() - (hours as number) * 3_600_000;
    const out = { dry_run: dryRun, pruned_sessions: 0, pruned_events: 0 };
    for (const id of await this.o.ledgers.stoppedBefore(cutoff)) {
      if (dryRun) {
        const got = await this.o.ledgers.get(id);
        if (!got?.ledger) continue;
        out.pruned_sessions++;
        out.pruned_events += got.ledger.events;
        continue;
      }
      const n = await this.o.ledgers.prune(id);
      if (n === undefined) continue;
      out.pruned_sessions++;
      out.pruned_events += n;
    }
    return out;
  }

  /**
   * repair builds the ledgers of stopped sessions that have none, checks every ledger's bytes against its checksum
   * (a corrupt one is counted and named, never rewritten: it is evidence), puts unindexed ledgers back in the index
   * and forgets the tombstones of deleted sessions.
   */
  async repair(): Promise<RepairReport> {
    const { ledgers, sessions, bus } = this.o;
    const report: RepairReport = { completed_at: '', repaired_ledgers: 0, skipped_ledgers: 0, corrupt_ledgers: 0, corrupt_session_ids: [], reindexed_ledgers: 0, conflicting_ledgers: 0 };
    const seen = new Set<string>();
    const check = async (id: string) => {
      if (seen.has(id)) return;
      seen.add(id);
      const got = await ledgers.get(id);
      if (!got) return;
      if (got.tombstone) return void report.skipped_ledgers++;
      const l = got.ledger!;
      if (checksumOf(l.jsonl) !== l.checksum || !parseLedger(l.jsonl).ok) {
        report.corrupt_ledgers++;
        if (report.corrupt_session_ids.length < MAX_NAMED) report.corrupt_session_ids.push(id);
        return;
      }
      report.skipped_ledgers++;
    };
    const all = await sessions.list();
    for (const s of all) {
      if (s.state !== 'stopped') continue;
      if (!(await ledgers.exists(s.id))) {
        const outcome = await this.materialize(s.id);
        if (outcome === 'written') report.repaired_ledgers++;
        if (outcome === 'conflict') report.conflicting_ledgers++;
        seen.add(s.id);
        continue;
      }
      await check(s.id);
    }
    const indexed = new Set(await ledgers.all());
    for (const id of indexed) {
      if (!(await ledgers.exists(id))) await ledgers.unindex(id);
      else await check(id);
    }
    // NOTE: a ledger written but never indexed (a crash between the two steps) is found through its session.
    const unindexed = [...seen].filter((id) => !indexed.has(id));
    const flags = await ledgers.indexed(unindexed);
    for (let i = 0; i < unindexed.length; i++) {
      if (flags[i]) continue;
      const got = await ledgers.get(unindexed[i]);
      if (!got?.ledger) continue;
      await ledgers.reindex(unindexed[i], got.ledger.stopped_at);
      report.reindexed_ledgers++;
    }
    const live = new Set(all.map((s) => s.id));
    for (const id of await ledgers.tombstoneIds()) if (!live.has(id)) await ledgers.forget(id);
    report.completed_at = new Date().toISOString();
    if (report.corrupt_ledgers && bus) {
      await bus.publish({
        type: 'memory.ledger.corrupt', source: 'memory', outcome: 'failure',
        summary: `${report.corrupt_ledgers} session ledger(s) no longer match their checksum`, data: { corrupt_ledgers: report.corrupt_ledgers, session_ids: report.corrupt_session_ids },
      });
    }
    return report;
  }

  /** load reads a ledger of a workspace's session: 404 when there is none (or it was pruned), 409 when its bytes changed. */
  private async load(workspaceRef: string, sessionId: string): Promise<StoredLedger> {
    const problems: Record<string, string> = {};
    if (workspaceRef.length > MAX_ID_LENGTH) problems.workspace_id = `must be at most ${MAX_ID_LENGTH} characters`;
    if (sessionId.length > MAX_ID_LENGTH) problems.session_id = `must be at most ${MAX_ID_LENGTH} characters`;
    if (Object.keys(problems).length) throw validation(problems);
    // NOTE: a ledger outlives its workspace: a workspace that is gone is matched by the id the ledger recorded.
    const ws = await this.o.workspaces.get(workspaceRef).catch((err) => { if (err instanceof NotFoundError) return undefined; throw err; });
    const got = await this.o.ledgers.get(sessionId);
    const missing = () => new MemoryError(404, 'memory.not_found', `session "${sessionId}" of workspace "${workspaceRef}" has no ledger`, { session_id: sessionId, workspace_id: workspaceRef });
    if (!got) throw missing();
    const wsId = got.ledger?.workspace_id ?? got.tombstone!.workspace_id;
    if (wsId !== (ws?.id ?? workspaceRef)) throw missing();
    if (got.tombstone) {
      throw new MemoryError(404, 'memory.not_found', `the ledger of session "${sessionId}" was pruned at ${got.tombstone.pruned_at}`, { session_id: sessionId, pruned_at: got.tombstone.pruned_at });
    }
    const l = got.ledger!;
    const actual = checksumOf(l.jsonl);
    if (actual !== l.checksum) throw corrupt(l, actual, 'its bytes do not match the checksum taken when it was written');
    return l;
  }
}

/** validation is the memory family's 400 naming each field (`memory.validation`). */
const validation = memoryValidation;

/** corrupt is the 409 for a ledger that changed after it was written: reported, never served as valid. */
function corrupt(l: StoredLedger, actual: string, why: string): MemoryError {
  return new MemoryError(409, 'memory.ledger_corrupt', `the ledger of session "${l.session_id}" is corrupt: ${why}`, { session_id: l.session_id, checksum: l.checksum, actual_checksum: actual });
}
