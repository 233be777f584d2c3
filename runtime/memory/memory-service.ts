import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { MAX_ID_LENGTH, MAX_NAME_LENGTH } from '../../codecs/limits.ts';
import { ID_PATTERN } from '../../codecs/shared.ts';
import { scanSecrets } from '../security/content-scan.ts';
import type { SecretMask } from '../security/secret-mask.ts';
import type { BusEventInput, EventBus } from '../../store/event-bus.ts';
import { memoryId, partitionKey, type MemoryStore } from '../../store/memory-store.ts';
import {
  bodyKey, candidateSlot, cleanFilename, decide, isDelete, lookupFields, lookupFrom, MIN_SURFACE_OVERLAP, nameKey, sha256, slotKey, targetFilename,
  type Candidate, type Lookup, type Verdict,
} from './controller.ts';
import { frontmatterOf, renderDocument } from './document.ts';
import { partitionOf, type DailyLogs } from './daily.ts';
import { MemoryError, memoryValidation, memoryWorkspaceMissing } from './errors.ts';
import {
  AGENT_TIERS, MEMORY_SCOPES, MEMORY_TYPES, ORIGINS, type AgentTier, type Memory, type MemoryDecision, type MemoryScope, type MemoryType,
  type MemoryWriteInput, type Origin, type Partition, type RecallStats, type StoredDecision, type StoredMemory, type WriteOptions,
} from './types.ts';

/** MemoryPolicy is the controller policy (defaults: 4096 characters, 60 writes a minute per origin). */
export interface MemoryPolicy {
  maxContentChars: number;
  maxWritesPerMin: number;
  /** Origins allowed to write (default: all eight). */
  allowOrigins: readonly Origin[];
}

export const DEFAULT_POLICY: MemoryPolicy = { maxContentChars: 4096, maxWritesPerMin: 60, allowOrigins: ORIGINS };

/** PROMPT_VERSION is recorded on each decision (the rule mode has no prompt; the original records `v1`). */
export const PROMPT_VERSION = 'v1';

/** WRITE_FIELDS are the fields of `POST /api/memory`; `dry_run` and `origin` are the route's. */
export const WRITE_FIELDS = [
  'scope', 'type', 'name', 'content', 'workspace_id', 'agent_name', 'agent_tier', 'description', 'entity', 'attribute', 'metadata',
  'idempotency_key', 'injection', 'origin', 'dry_run',
];

/** Limits of a write's fields (README "Memory"). */
export const LIMITS = { description: 1024, entity: MAX_NAME_LENGTH, metadataEntries: 32, metadataKey: 64, metadataValue: 1024, idempotencyKey: MAX_ID_LENGTH, sourceSessions: 64 };

/** MemoryServiceOptions configures a MemoryService. */
export interface MemoryServiceOptions {
  store: MemoryStore;
  bus?: EventBus;
  logger?: Logger;
  policy?: Partial<MemoryPolicy>;
  /** Tells whether a workspace id names a workspace (undefined: not checked). */
  workspaceExists?: (id: string) => Promise<boolean>;
  now?: () => Date;
  /** Each stored decision appends a line to its scope's daily log. */
  daily?: DailyLogs;
  /**
   * The recall index, which answers the surface rule (memories sharing words with a candidate) without reading the
   * partition; while it is not running (a process that serves no search), a write reads its whole partition.
   */
  surface?: SurfaceIndex;
  /**
   * secrets gives the process's masking set as it stands (runtime/security/known-secrets.ts): a write holding one of
   * its values is rejected by the safety scan, and every field of a write is masked before anything is stored.
   */
  secrets?: () => Promise<SecretMask>;
}

/** SurfaceIndex is what the write path needs of the recall index (runtime/memory/search.ts MemoryIndex). */
export interface SurfaceIndex {
  readonly ready: boolean;
  settled(): Promise<void>;
  surface(partition: string, content: string, min: number): string[];
}

/** WriteResult is what a write answers: the decision and whether it changed a memory. */
export interface WriteResult {
  decision: MemoryDecision;
  applied: boolean;
}

/**
 * ChangeListener hears each applied change in this process with the memory as it now is (null: deleted), so the
 * local search index applies it at once without reading it back.
 */
export type ChangeListener = (changes: { id: string; memory: StoredMemory | null }[], revision: number) => void;

const MAX_ATTEMPTS = 8;
const str = (v: unknown) => (typeof v === 'string' ? v.trim() : '');

/** newDecisionId is time-ordered (base-36 milliseconds) and random: `dec_<ms36><12 hex>`. */
function newDecisionId(nowMs: number): string {
  return `dec_${nowMs.toString(36).padStart(9, '0')}${randomBytes(6).toString('hex')}`;
}

/** viewOf is the API view of a stored decision. */
export function decisionView(d: StoredDecision, revertedBy = ''): MemoryDecision {
  const { prior, post: _post, ...rest } = d;
  return { ...rest, prior_content: prior?.content ?? '', reverted_by: revertedBy };
}

/** memoryView is the API view of a stored memory with its recall statistics. */
export function memoryView(m: StoredMemory, stats: RecallStats): Memory {
  return {
    agent_name: m.agent_name, agent_tier: m.agent_tier, content_hash: m.content_hash, created_at: m.created_at, description: m.description,
    filename: m.filename, injection: m.injection, mod_time: m.updated_at, name: m.name, scope: m.scope,
    staleness_banner: '', superseded_by: m.provenance.superseded_by, system_managed: false, type: m.type, updated_at: m.updated_at,
    workspace_id: m.workspace_id, entity: m.entity, attribute: m.attribute, content: m.content, ...stats,
  };
}

/**
 * checkNames refuses, with 422 naming each field (under `prefix`), a workspace_id or agent_name that is not a name:
 * the record id grammar every family's names follow (codecs/shared.ts ID_PATTERN: a letter or digit, then letters,
 * digits, ".", "_" or "-"). NOTE: both become parts of a memory's id and of its export path
 * (`workspaces/<id>/agents/<name>/…`), so `..`, `a/b` or `a\b` would name another scope's place.
 */
export function checkNames(input: { workspace_id?: unknown; agent_name?: unknown }, prefix = ''): void {
  const problems: Record<string, string> = {};
  for (const f of ['workspace_id', 'agent_name'] as const) {
    const v = str(input[f]);
    if (v && !ID_PATTERN.test(v)) problems[`${prefix}${f}`] = `must be a name of at most ${MAX_ID_LENGTH} characters: a letter or digit, then letters, digits, ".", "_" or "-"`;
  }
  if (Object.keys(problems).length) throw memoryValidation(problems, 422);
}

/**
 * partitionLabel names a partition as its user knows it (in messages): `global`, `workspace <id>`, `agent <name>
 * (global tier)` or `agent <name> of workspace <id>`.
 */
export function partitionLabel(p: Partition): string {
  if (p.scope === 'global') return 'global';
  if (p.scope === 'workspace') return `workspace ${p.workspace_id}`;
  return p.agent_tier === 'global' ? `agent ${p.agent_name} (global tier)` : `agent ${p.agent_name} of workspace ${p.workspace_id}`;
}

/** partitionFields are a partition's fields for an error's details (the scope, and what of workspace, agent and tier it has). */
export function partitionFields(p: Partition): Record<string, string> {
  return Object.fromEntries(Object.entries({ scope: p.scope, workspace_id: p.workspace_id, agent_name: p.agent_name, agent_tier: p.agent_tier }).filter(([, v]) => v));
}

/**
 * resolvePartition checks a scope with its workspace, agent and tier (400 naming each bad field; 422 for a
 * workspace_id or agent_name that is not a name, checkNames): `global` takes none; `workspace` needs workspace_id;
 * `agent` needs agent_name and a tier (default `workspace` when a workspace_id is given, else `global`); a
 * `workspace` tier needs workspace_id and a `global` tier takes none.
 */
export function resolvePartition(input: { scope?: unknown; workspace_id?: unknown; agent_name?: unknown; agent_tier?: unknown }, problems: Record<string, string>, prefix = ''): Partition {
  checkNames(input, prefix);
  const scope = str(input.scope) as MemoryScope;
  const ws = str(input.workspace_id);
  const agent = str(input.agent_name);
  let tier = str(input.agent_tier) as AgentTier | '';
  if (!MEMORY_SCOPES.includes(scope)) problems.scope = `is required: one of ${MEMORY_SCOPES.join(', ')}`;
  for (const [f, v] of [['workspace_id', input.workspace_id], ['agent_name', input.agent_name], ['agent_tier', input.agent_tier]] as const) {
    if (v !== undefined && v !== null && typeof v !== 'string') problems[f] = 'must be a string';
  }
  if (ws.length > MAX_ID_LENGTH) problems.workspace_id = `must be at most ${MAX_ID_LENGTH} characters`;
  if (agent.length > MAX_NAME_LENGTH) problems.agent_name = `must be at most ${MAX_NAME_LENGTH} characters`;
  if (scope === 'global') {
    if (ws) problems.workspace_id = 'is not taken by scope global';
    if (agent) problems.agent_name = 'is not taken by scope global';
    if (tier) problems.agent_tier = 'is not taken by scope global';
  } else if (scope === 'workspace') {
    if (!ws) problems.workspace_id = 'is required by scope workspace';
    if (agent) problems.agent_name = 'is not taken by scope workspace (use scope agent)';
    if (tier) problems.agent_tier = 'is not taken by scope workspace';
  } else if (scope === 'agent') {
    if (!agent) problems.agent_name = 'is required by scope agent';
    if (!tier) tier = ws ? 'workspace' : 'global';
    if (!AGENT_TIERS.includes(tier as AgentTier)) problems.agent_tier = `must be one of ${AGENT_TIERS.join(', ')}`;
    else if (tier === 'workspace' && !ws) problems.workspace_id = 'is required by agent tier workspace';
    else if (tier === 'global' && ws) problems.workspace_id = 'is not taken by agent tier global';
  }
  return { scope, workspace_id: ws, agent_name: scope === 'agent' ? agent : '', agent_tier: scope === 'agent' ? tier : '' };
}

/** Normalized is a validated write: its partition and the controller's candidate. */
interface Normalized {
  partition: Partition;
  candidate: Candidate;
  description: string;
  injection: boolean | undefined;
  idempotencyKey: string;
  sourceSessions: string[];
}

/**
 * MemoryService is the memory family's one write path and its reads: every writer (HTTP, agent tool,
 * dream, ad-hoc) calls `write`, which validates, applies the policy (size, writes per minute per origin across
 * replicas), runs the decision controller (runtime/memory/controller.ts) on the partition's memories, and stores
 * the decision with its change in one script whose compare-and-set on the content hash makes a concurrent write
 * on another replica decide again instead of being lost.
 */
export class MemoryService {
  readonly policy: MemoryPolicy;
  private readonly listeners = new Set<ChangeListener>();

  constructor(private readonly o: MemoryServiceOptions) {
    this.policy = { ...DEFAULT_POLICY, ...o.policy };
  }

  get store(): MemoryStore { return this.o.store; }

  private now(): Date { return this.o.now?.() ?? new Date(); }

  /** onChange registers a listener for changes applied by this process. */
  onChange(fn: ChangeListener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** normalize validates a write input: 400 naming each bad field, 413 over max_content_chars. */
  private normalize(raw: unknown, origin: Origin, note: boolean): Normalized {
    if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw memoryValidation({ body: 'must be a JSON object' });
    const input = raw as Record<string, unknown>;
    const problems: Record<string, string> = {};
    const partition = resolvePartition(input, problems);
    const type = str(input.type) as MemoryType;
    if (!MEMORY_TYPES.includes(type)) problems.type = `is required: one of ${MEMORY_TYPES.join(', ')}`;
    const name = str(input.name);
    if (!name) problems.name = 'is required';
    else if (name.length > MAX_NAME_LENGTH) problems.name = `must be at most ${MAX_NAME_LENGTH} characters`;
    if (typeof input.content !== 'string') problems.content = 'is required and must be a string';
    const content = str(input.content);
    const metadata: Record<string, string> = {};
    if (input.metadata !== undefined && input.metadata !== null) {
      if (typeof input.metadata !== 'object' || Array.isArray(input.metadata)) problems.metadata = 'must be an object of strings';
      else {
        const entries = Object.entries(input.metadata as Record<string, unknown>);
        if (entries.length > LIMITS.metadataEntries) problems.metadata = `must have at most ${LIMITS.metadataEntries} entries`;
        for (const [k, v] of entries) {
          if (typeof v !== 'string') problems[`metadata.${k.slice(0, LIMITS.metadataKey)}`] = 'must be a string';
          else if (k.length > LIMITS.metadataKey || !k.trim()) problems.metadata = `keys must be 1-${LIMITS.metadataKey} characters`;
          else if (v.length > LIMITS.metadataValue) problems[`metadata.${k}`] = `must be at most ${LIMITS.metadataValue} characters`;
          else if (k === 'raw_content') problems['metadata.raw_content'] = 'is not allowed';
          else metadata[k] = v.trim();
        }
        for (const f of ['filename', 'target_filename']) {
          if (metadata[f] && !cleanFilename(metadata[f])) problems[`metadata.${f}`] = 'must be one path segment of letters, digits, ".", "_" or "-" (".md" is added)';
        }
      }
    }
    const deleting = ['delete', 'forget', 'remove'].includes((metadata.operation || metadata.op || '').toLowerCase());
    if (!content && !deleting && !problems.content) problems.content = 'must not be empty';
    const description = str(input.description);
    if (input.description !== undefined && typeof input.description !== 'string') problems.description = 'must be a string';
    else if (description.length > LIMITS.description) problems.description = `must be at most ${LIMITS.description} characters`;
    const slot: Record<string, string> = {};
    for (const f of ['entity', 'attribute'] as const) {
      if (input[f] !== undefined && input[f] !== null && typeof input[f] !== 'string') problems[f] = 'must be a string';
      slot[f] = str(input[f]);
      if (slot[f].length > LIMITS.entity) problems[f] = `must be at most ${LIMITS.entity} characters`;
    }
    if (input.injection !== undefined && typeof input.injection !== 'boolean') problems.injection = 'must be a boolean';
    const idempotencyKey = str(input.idempotency_key);
    if (input.idempotency_key !== undefined && typeof input.idempotency_key !== 'string') problems.idempotency_key = 'must be a string';
    else if (idempotencyKey.length > LIMITS.idempotencyKey) problems.idempotency_key = `must be at most ${LIMITS.idempotencyKey} characters`;
    const sessions = input.source_session_ids;
    if (sessions !== undefined && (!Array.isArray(sessions) || sessions.length > LIMITS.sourceSessions || sessions.some((s) => typeof s !== 'string' || !s || s.length > MAX_ID_LENGTH))) {
      problems.source_session_ids = `must be at most ${LIMITS.sourceSessions} session ids`;
    }
    if (Object.keys(problems).length) throw memoryValidation(problems);
    if (content.length > this.policy.maxContentChars) {
      throw new MemoryError(413, 'memory.too_large', `content is ${content.length} characters; the policy allows at most ${this.policy.maxContentChars} (max_content_chars)`, {
        field: 'content', length: content.length, max_content_chars: this.policy.maxContentChars,
      });
    }
    return {
      partition, description, injection: input.injection as boolean | undefined, idempotencyKey,
      sourceSessions: [...new Set((sessions as string[] | undefined) ?? [])].sort(),
      candidate: { origin, type, name, content, entity: slot.entity, attribute: slot.attribute, metadata, ...(note ? { note } : {}) },
    };
  }

  /**
   * write decides and applies one memory write. It answers the decision and whether a memory changed;
   * a `reject` is answered, not thrown (the route makes it 422). `dryRun` runs the controller and stores nothing
   * anywhere (not even the rate counter). An idempotency key used before answers the stored decision.
   */
  async write(input: MemoryWriteInput | Record<string, unknown>, opts: WriteOptions): Promise<WriteResult> {
    const origin = opts.origin;
    if (!ORIGINS.includes(origin)) throw memoryValidation({ origin: `must be one of ${ORIGINS.join(', ')}` });
    if (!this.policy.allowOrigins.includes(origin)) {
      throw new MemoryError(403, 'memory.forbidden', `origin ${origin} may not write memories (controller.policy.allow_origins)`, { origin });
    }
    // NOTE: masked before anything reads the input (a validation message names metadata keys, a rejected decision
    // is stored with the candidate's name), and judged on what it held before.
    const secrets = await this.o.secrets?.();
    const held = scanSecrets(input, secrets);
    const n = this.normalize(secrets ? secrets.value(input) : input, origin, opts.note === true);
    await this.requireWorkspace(n.partition.workspace_id);
    if (!opts.dryRun) await this.takeWrite(origin);
    const part = partitionKey(n.partition);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const verdict = decide(n.candidate, await this.lookup(n.candidate, part), held);
      const prior = verdict.op === 'update' || verdict.op === 'delete' ? (verdict.target as StoredMemory | undefined) ?? null : null;
      const now = this.now();
      const post = verdict.op === 'add' || verdict.op === 'update' ? this.postRecord(n, verdict, prior, now) : null;
      const decision = this.decisionRecord(n, verdict, prior, post, now, origin, '');
      // NOTE: a dry run answers what the write would: with a key used before, the decision that key answers.
      if (opts.dryRun && n.idempotencyKey) {
        const stored = await this.o.store.idempotent(part, n.idempotencyKey);
        if (stored !== undefined) return this.replay(stored, decision, n.idempotencyKey);
      }
      if (opts.dryRun) return { decision: decisionView(decision), applied: false };
      const change = post ? 'put' : verdict.op === 'delete' ? 'del' : 'none';
      const expected = change === 'none' ? '*' : prior?.content_hash ?? '';
      const res = await this.o.store.apply({
        partition: part, filename: verdict.filename || '-', expected, change, memory: post ?? undefined, decision, idempotencyKey: n.idempotencyKey, reverts: '',
        lookupsBefore: prior ? lookupFields(prior) : [], lookupsAfter: post ? lookupFields(post) : [],
      });
      if (res.ok) {
        await this.announce(decision, part, res.revision);
        return { decision: decisionView(decision), applied: change !== 'none' };
      }
      if (res.reason === 'idempotent') return this.replay(res.decision, decision, n.idempotencyKey);
      if (res.reason === 'unindexed') await this.buildLookups(part);
      // NOTE: another writer changed the target between our read and the script: decide again on what is there now.
    }
    throw new MemoryError(409, 'memory.conflict', `the memory kept changing under ${MAX_ATTEMPTS} attempts to write it in ${partitionLabel(n.partition)}; retry`, partitionFields(n.partition));
  }

  /**
   * replay answers a write whose idempotency key was used before: the decision the key answers when the write is the
   * same (its candidate hash), else 409 naming the key. NOTE: the key answers the write it was first given; other
   * content under it would otherwise be dropped unseen.
   */
  private replay(stored: StoredDecision | null, decision: StoredDecision, key: string): WriteResult {
    if (!stored) throw new MemoryError(409, 'memory.conflict', `idempotency key "${key}" names a decision that is no longer stored`, { field: 'idempotency_key', idempotency_key: key });
    if (stored.candidate_hash !== decision.candidate_hash) {
      throw new MemoryError(409, 'memory.conflict', `idempotency key "${key}" was used for another write (decision ${stored.id}); use a new key for new content`, {
        field: 'idempotency_key', idempotency_key: key, decision_id: stored.id,
      });
    }
    return { decision: decisionView(stored), applied: false };
  }

  /**
   * lookup reads what the controller's rules need of a partition: from its lookup index in Redis (one round trip,
   * then the few memories it names) and the recall index's surface matches. NOTE: so a write's cost does not grow
   * with its partition; only a process without a running recall index reads the whole partition.
   */
  private async lookup(c: Candidate, part: string): Promise<Lookup> {
    const surfaceNeeded = !isDelete(c) && c.origin !== 'dreaming';
    if (!this.o.surface?.ready && surfaceNeeded) return lookupFrom(c, await this.o.store.partitionMemories(part));
    const slot = candidateSlot(c);
    const fields = [bodyKey(c.content), slotKey(slot.entity, slot.attribute), nameKey(c.name)];
    let found = await this.o.store.lookups(part, fields.filter(Boolean), targetFilename(c));
    if (!found.built) {
      await this.buildLookups(part);
      found = await this.o.store.lookups(part, fields.filter(Boolean), targetFilename(c));
    }
    const named = new Map(fields.filter(Boolean).map((f, i) => [f, found.filenames[i]]));
    const [sameBody, inSlot] = [named.get(fields[0]) ?? [], fields[1] ? named.get(fields[1]) ?? [] : []];
    const want = [...new Set([...sameBody, ...inSlot])];
    const records = new Map((await this.o.store.getMany(want.map((f) => memoryId(part, f)))).flatMap((m) => (m ? [[m.filename, m] as const] : [])));
    const pick = (files: string[]) => files.flatMap((f) => (records.has(f) ? [records.get(f)!] : []));
    let surface: string[] = [];
    if (surfaceNeeded && this.o.surface) {
      await this.o.surface.settled();
      surface = this.o.surface.surface(part, c.content, MIN_SURFACE_OVERLAP);
    }
    return { sameBody: pick(sameBody), atFilename: found.atFilename, slot: pick(inSlot), surface, sameName: new Set(fields[2] ? named.get(fields[2]) ?? [] : []) };
  }

  /**
   * buildLookups builds a partition's lookup index from its memories once (memories written before the index was
   * kept); a write applied meanwhile makes it read again.
   */
  async buildLookups(part: string): Promise<void> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const revision = await this.o.store.revision();
      const all = await this.o.store.partitionMemories(part);
      const fields = new Map<string, string[]>();
      for (const m of all) for (const f of lookupFields(m)) fields.set(f, [...(fields.get(f) ?? []), m.filename]);
      if (await this.o.store.buildLookups(part, revision, fields, all.filter((m) => m.injection).map((m) => m.filename))) return;
    }
    throw new MemoryError(409, 'memory.conflict', `the memories of ${partitionLabel(partitionOf(part))} kept changing while their lookup index was built; retry`, partitionFields(partitionOf(part)));
  }

  /**
   * requireWorkspace is the 404 `memory.not_found` naming a workspace id that names no workspace (`field`: where the
   * request gave it), for reads as for writes: an empty answer would read as "no memories there".
   */
  async requireWorkspace(id: string | undefined, field = 'workspace_id'): Promise<void> {
    if (!id || !this.o.workspaceExists) return;
    if (!(await this.o.workspaceExists(id))) throw memoryWorkspaceMissing(id, field);
  }

  private async takeWrite(origin: Origin): Promise<void> {
    const limit = this.policy.maxWritesPerMin;
    const r = await this.o.store.takeWrite(origin, limit, this.now().getTime());
    if (!r.allowed) {
      throw new MemoryError(429, 'memory.rate_limited', `origin ${origin} made more than ${limit} memory writes this minute (max_writes_per_min); retry in ${Math.ceil(r.resetMs / 1000)} s`, {
        origin, max_writes_per_min: limit, retry_after_ms: r.resetMs,
      });
    }
  }

  private postRecord(n: Normalized, v: Verdict, prior: StoredMemory | null, now: Date): StoredMemory {
    const at = now.toISOString();
    const c = n.candidate;
    const base = {
      ...n.partition, filename: v.filename, name: c.name, description: n.description || (prior?.description ?? ''), type: c.type,
      entity: c.entity || (prior?.entity ?? ''), attribute: c.attribute || (prior?.attribute ?? ''), injection: n.injection ?? prior?.injection ?? false,
      content: c.content, created_at: prior?.created_at ?? at, updated_at: at,
      provenance: {
        confidence: String(v.confidence), created_at: prior?.provenance.created_at ?? at, source_actor: c.origin,
        source_session_ids: [...new Set([...(prior?.provenance.source_session_ids ?? []), ...n.sourceSessions])].sort(), superseded_by: '', updated_at: at,
      },
    };
    const document = renderDocument(base);
    return { ...base, document, content_hash: sha256(document) };
  }

  private decisionRecord(n: Normalized, v: Verdict, prior: StoredMemory | null, post: StoredMemory | null, now: Date, origin: Origin, reverts: string): StoredDecision {
    const at = now.toISOString();
    const c = n.candidate;
    const fmSource = post ?? prior ?? {
      ...n.partition, filename: v.filename, name: c.name, description: n.description, type: c.type, entity: c.entity, attribute: c.attribute, injection: false,
      content: c.content, created_at: at, updated_at: at,
      provenance: { confidence: String(v.confidence), created_at: at, source_actor: origin, source_session_ids: n.sourceSessions, superseded_by: '', updated_at: at },
    };
    return {
      id: newDecisionId(now.getTime()), op: v.op, source: 'rule', confidence: v.confidence, reason: v.reason, rule_trace: v.rule_trace,
      targets: v.targets, target_filename: v.filename, ...n.partition,
      candidate_hash: sha256(JSON.stringify({ partition: n.partition, origin, candidate: c, description: n.description, injection: n.injection ?? null, sessions: n.sourceSessions })),
      post_content_hash: post?.content_hash ?? '', prior_content_hash: prior?.content_hash ?? '', prior_content: prior?.content ?? '',
      frontmatter: frontmatterOf(fmSource), idempotency_key: n.idempotencyKey, prompt_version: PROMPT_VERSION, decided_at: at,
      applied_at: post || v.op === 'delete' ? at : '', origin, reverts,
      llm_trace: { error: '', latency_ms: 0, model: '', prompt_version: '' }, prior, post,
    };
  }

  /** announce tells this process's listeners and the bus (a `memory.write.*` event per decision that stored). */
  private async announce(d: StoredDecision, part: string, revision: number): Promise<void> {
    const id = memoryId(part, d.target_filename);
    const changed = d.op === 'add' || d.op === 'update' || d.op === 'delete';
    if (changed) for (const fn of this.listeners) fn([{ id, memory: d.post }], revision);
    if (this.o.daily && d.op !== 'noop') {
      await this.o.daily.record(part, d).catch((err) => this.o.logger?.warn({ err: (err as Error).message }, 'memory daily log line not written'));
    }
    if (!this.o.bus) return;
    const type = d.reverts ? 'memory.write.reverted' : d.op === 'reject' ? 'memory.write.rejected' : changed ? 'memory.write.committed' : '';
    if (!type) return;
    const ev: BusEventInput = {
      type, source: 'memory', scope: d.scope === 'global' || (d.scope === 'agent' && d.agent_tier === 'global') ? 'global' : 'workspace',
      workspace_id: d.workspace_id, agent_name: d.agent_name, outcome: d.op === 'reject' ? 'warning' : 'success',
      summary: `${type}: ${d.op} ${d.target_filename || '(rejected)'} in ${partitionLabel(d)}`,
      data: { decision_id: d.id, op: d.op, memory_id: changed ? id : '', content_hash: d.post_content_hash, filename: d.target_filename, partition: part, revision, origin: d.origin, reverts: d.reverts, rule_trace: d.rule_trace.map((r) => r.name) },
    };
    await this.o.bus.publish(ev).catch((err) => this.o.logger?.warn({ err: (err as Error).message }, 'memory event not published'));
  }

  /**
   * revert undoes an applied decision (add, update or delete, or a revert) by restoring the memory exactly as it
   * was before it: 409 `memory.conflict` when the memory changed since (its content hash is no longer the one the
   * decision left) or the decision was reverted already. A revert of a revert re-applies.
   */
  async revert(decisionId: string, opts: { dryRun?: boolean; reason?: string; origin?: Origin }): Promise<{ decision: MemoryDecision; reverted: boolean }> {
    const found = await this.o.store.decision(decisionId);
    if (!found) throw new MemoryError(404, 'memory.not_found', `decision "${decisionId}" does not exist`, { decision_id: decisionId });
    const d = found.decision;
    if (!['add', 'update', 'delete'].includes(d.op)) {
      throw new MemoryError(409, 'memory.conflict', `decision "${decisionId}" is ${d.op}: it changed no memory, so there is nothing to revert`, { decision_id: decisionId, op: d.op });
    }
    if (found.revertedBy) throw new MemoryError(409, 'memory.conflict', `decision "${decisionId}" was reverted already by "${found.revertedBy}"`, { decision_id: decisionId, reverted_by: found.revertedBy });
    const part = partitionKey(d);
    const current = (await this.o.store.get(part, d.target_filename)) ?? null;
    const conflict = (cur: string) => new MemoryError(409, 'memory.conflict', `memory "${d.target_filename}" changed since decision "${decisionId}"; revert refused`, {
      decision_id: decisionId, filename: d.target_filename, expected_content_hash: d.post_content_hash, current_content_hash: cur,
    });
    if ((current?.content_hash ?? '') !== d.post_content_hash) throw conflict(current?.content_hash ?? '');
    const restore = d.prior;
    const op = restore ? (current ? 'update' : 'add') : 'delete';
    const now = this.now();
    const at = now.toISOString();
    const origin = opts.origin ?? 'http';
    const reason = (opts.reason?.trim() || `revert of ${decisionId}`).slice(0, 240);
    const decision: StoredDecision = {
      ...d, id: newDecisionId(now.getTime()), op, confidence: 1, reason, origin, reverts: decisionId, decided_at: at, applied_at: at,
      rule_trace: [{ name: 'controller.revert', passed: true, reason: 'restores the memory as it was before the decision', target: decisionId }],
      targets: [d.target_filename], prior_content_hash: current?.content_hash ?? '', prior_content: current?.content ?? '',
      post_content_hash: restore?.content_hash ?? '', idempotency_key: '', candidate_hash: sha256(`revert\x00${decisionId}`),
      frontmatter: restore ? frontmatterOf(restore) : d.frontmatter, prior: current, post: restore,
    };
    if (opts.dryRun) return { decision: decisionView(decision), reverted: false };
    const res = await this.o.store.apply({
      partition: part, filename: d.target_filename, expected: d.post_content_hash, change: restore ? 'put' : 'del', memory: restore ?? undefined,
      decision, idempotencyKey: '', reverts: decisionId, lookupsBefore: current ? lookupFields(current) : [], lookupsAfter: restore ? lookupFields(restore) : [],
    });
    if (!res.ok && res.reason === 'unindexed') {
      await this.buildLookups(part);
      return this.revert(decisionId, opts);
    }
    if (!res.ok) {
      if (res.reason === 'reverted') throw new MemoryError(409, 'memory.conflict', `decision "${decisionId}" was reverted already by "${res.by}"`, { decision_id: decisionId, reverted_by: res.by });
      throw conflict(res.reason === 'changed' ? res.current : '');
    }
    await this.announce(decision, part, res.revision);
    return { decision: decisionView(decision), reverted: true };
  }

  /** memory reads one memory by partition and filename with its recall statistics, or undefined. */
  async memory(p: Partition, filename: string): Promise<Memory | undefined> {
    const part = partitionKey(p);
    const m = await this.o.store.get(part, filename);
    if (!m) return undefined;
    const [stats] = await this.o.store.recallStats([memoryId(part, filename)]);
    return memoryView(m, stats);
  }

  /** views adds recall statistics to stored memories. */
  async views(memories: StoredMemory[]): Promise<Memory[]> {
    const stats = await this.o.store.recallStats(memories.map((m) => memoryId(partitionKey(m), m.filename)));
    return memories.map((m, i) => memoryView(m, stats[i]));
  }
}
