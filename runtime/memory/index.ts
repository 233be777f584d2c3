import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { MAX_ID_LENGTH } from '../../codecs/limits.ts';
import type { EventBus } from '../../store/event-bus.ts';
import type { Keys } from '../../store/keys.ts';
import { MemoryStore, partitionKey } from '../../store/memory-store.ts';
import { DailyLogs, DEFAULT_DAILY, partitionOf, type DailyLimits } from './daily.ts';
import { MemoryError, memoryValidation } from './errors.ts';
import { checkNames, decisionView, MemoryService, partitionFields, partitionLabel, resolvePartition, type MemoryPolicy, type MemoryServiceOptions, type WriteResult } from './memory-service.ts';
import { DEFAULT_RAW_CANDIDATES, DEFAULT_TOP_K, DEFAULT_WEIGHTS, MAX_RAW_CANDIDATES, MAX_TOP_K, MemoryIndex, visiblePartitions } from './search.ts';
import { AGENT_TIERS, DECISION_OPS, MEMORY_SCOPES, MEMORY_TYPES, type DailyLog, type Memory as MemoryView, type MemoryDecision, type Origin, type Partition } from './types.ts';
import { memoryConfig, type MemoryConfigView } from './config.ts';
import type { DreamConfig } from './dream-policy.ts';
import { cleanFilename } from './controller.ts';
import { DEFAULT_INJECTION_BYTES, MemoryInjection } from './injection.ts';

export { MemoryService } from './memory-service.ts';

/** ListQuery is the list routes' query: scope, workspace, agent, tier, limit. */
export interface ListQuery {
  scope?: string;
  workspace_id?: string;
  agent_name?: string;
  agent_tier?: string;
  limit: number;
}

/** SearchHitView is one recall answer: the memory, its score and, on request, the parts. */
export interface SearchHitView {
  memory: MemoryView;
  score: number;
  explain?: Record<string, number>;
}

export const SEARCH_FIELDS = [
  'query_text', 'context_hint', 'scope', 'workspace_id', 'agent_name', 'agent_tier', 'type', 'top_k', 'raw_candidates',
  'include_already_surfaced', 'include_system', 'already_surfaced', 'explain',
];
export const PATCH_FIELDS = ['content', 'scope', 'workspace_id', 'agent_name', 'agent_tier', 'type', 'name', 'description', 'metadata', 'idempotency_key', 'injection', 'dry_run'];
export const ADHOC_FIELDS = ['scope', 'content', 'workspace_id', 'agent_name', 'agent_tier', 'slug'];
export const REVERT_FIELDS = ['reason', 'dry_run'];
export const PROMOTE_FIELDS = ['filename', 'from', 'to', 'idempotency_key', 'dry_run'];

const str = (v: unknown) => (typeof v === 'string' ? v.trim() : '');
/** MAX_REASON_FILTER bounds the decisions list's `reason` filter (a decision's reason is at most 240 characters). */
const MAX_REASON_FILTER = 1024;

/**
 * accepts builds a filter of partitions for a list query: every partition when no filter is given, else those
 * that match each given field (scope, workspace, agent, tier). Bad values are 400; a workspace or agent that is not
 * a name is 422 (checkNames).
 */
export function accepts(q: Omit<ListQuery, 'limit'>): (p: Partition) => boolean {
  checkNames(q);
  const problems: Record<string, string> = {};
  if (q.scope && !MEMORY_SCOPES.includes(q.scope as never)) problems.scope = `must be one of ${MEMORY_SCOPES.join(', ')}`;
  if (q.agent_tier && !AGENT_TIERS.includes(q.agent_tier as never)) problems.agent_tier = `must be one of ${AGENT_TIERS.join(', ')}`;
  for (const f of ['workspace_id', 'agent_name'] as const) if ((q[f] ?? '').length > MAX_ID_LENGTH) problems[f] = `must be at most ${MAX_ID_LENGTH} characters`;
  if (Object.keys(problems).length) throw memoryValidation(problems);
  return (p) => (!q.scope || p.scope === q.scope) && (!q.workspace_id || p.workspace_id === q.workspace_id)
    && (!q.agent_name || p.agent_name === q.agent_name) && (!q.agent_tier || p.agent_tier === q.agent_tier);
}

/** MemoryFamilyOptions configures the memory family of a process. */
export interface MemoryFamilyOptions {
  redis: Redis;
  keys: Keys;
  bus?: EventBus;
  logger?: Logger;
  policy?: Partial<MemoryPolicy>;
  daily?: Partial<DailyLimits>;
  workspaceExists?: (id: string) => Promise<boolean>;
  /** Whether a model provider is configured (the LLM mode needs one; none is, so it is off). */
  modelProvider?: string;
  /** The dream settings in effect (MEMORY_DREAM_*), shown by `GET /api/memory/config`. */
  dream?: DreamConfig;
  /** The byte budget of a new session's memory preamble (MEMORY_INJECTION_MAX_BYTES; 0: none). */
  injectionMaxBytes?: number;
  /** The process's masking set as it stands (MemoryServiceOptions.secrets). */
  secrets?: MemoryServiceOptions['secrets'];
}

/**
 * Memory is the memory family of one process: the store, the one write path (MemoryService), the daily logs and
 * the recall index, with the reads the routes and agent tools need. `start` builds the index and follows the bus.
 */
export class Memory {
  readonly store: MemoryStore;
  readonly service: MemoryService;
  readonly index: MemoryIndex;
  readonly daily: DailyLogs;
  /** Gives new sessions their scope's `injection` memories (runtime/memory/injection.ts). */
  readonly injection: MemoryInjection;

  constructor(private readonly o: MemoryFamilyOptions) {
    this.store = new MemoryStore(o.redis, o.keys);
    this.daily = new DailyLogs({ store: this.store, limits: o.daily });
    this.index = new MemoryIndex({ store: this.store, bus: o.bus, logger: o.logger });
    this.service = new MemoryService({ store: this.store, bus: o.bus, logger: o.logger, policy: o.policy, workspaceExists: o.workspaceExists, daily: this.daily, surface: this.index, secrets: o.secrets });
    this.injection = new MemoryInjection({
      store: this.store, maxBytes: o.injectionMaxBytes ?? DEFAULT_INJECTION_BYTES, buildLookups: (p) => this.service.buildLookups(p), logger: o.logger,
    });
    // NOTE: this process's own writes are searchable at once; other replicas' arrive over the bus.
    this.service.onChange((changes, rev) => void this.index.apply(changes, rev));
  }

  async start(): Promise<void> { await this.index.start(); }
  async stop(): Promise<void> { await this.index.stop(); }

  /** write is MemoryService.write (the one write path). */
  write(input: Record<string, unknown>, opts: { origin: Origin; dryRun?: boolean }): Promise<WriteResult> {
    return this.service.write(input, opts);
  }

  /** list returns the memories of the partitions the query accepts, newest first, at most `limit`. */
  async list(q: ListQuery): Promise<MemoryView[]> {
    const accept = accepts(q);
    await this.service.requireWorkspace(q.workspace_id);
    const out = [];
    for (const part of await this.store.partitions()) {
      if (!accept(partitionOf(part))) continue;
      out.push(...(await this.store.partitionMemories(part)));
    }
    out.sort((a, b) => (a.updated_at === b.updated_at ? (a.filename < b.filename ? -1 : 1) : a.updated_at < b.updated_at ? 1 : -1));
    return this.masked(await this.service.views(out.slice(0, q.limit)));
  }

  /**
   * decisions lists decisions, newest first, filtered by partition, op, `reason` (the words it contains, ignoring
   * case) and `since` (an ISO-8601 time).
   */
  async decisions(q: ListQuery & { op?: string; reason?: string; since?: string }): Promise<MemoryDecision[]> {
    const accept = accepts(q);
    if (q.op && !DECISION_OPS.includes(q.op as never)) throw memoryValidation({ op: `must be one of ${DECISION_OPS.join(', ')}` });
    if (q.reason && q.reason.length > MAX_REASON_FILTER) throw memoryValidation({ reason: `must be at most ${MAX_REASON_FILTER} characters` });
    const reason = q.reason?.trim().toLowerCase();
    const sinceMs = q.since ? Date.parse(q.since) : 0;
    if (q.since && (!Number.isFinite(sinceMs) || !/^\d{4}-\d{2}-\d{2}T/.test(q.since))) throw memoryValidation({ since: 'must be an RFC 3339 date-time' });
    await this.service.requireWorkspace(q.workspace_id);
    const out: MemoryDecision[] = [];
    let before = Number.MAX_SAFE_INTEGER;
    // NOTE: pages of the time index, filtered here; bounded so a filter that matches little cannot scan forever.
    for (let page = 0; page < 20 && out.length < q.limit; page++) {
      const rows = await this.store.decisionsPage(sinceMs, before, 500);
      if (!rows.length) break;
      for (const { decision, revertedBy } of rows) {
        if (accept(decision) && (!q.op || decision.op === q.op) && (!reason || decision.reason.toLowerCase().includes(reason))) out.push(decisionView(decision, revertedBy));
        if (out.length >= q.limit) break;
      }
      before = Date.parse(rows[rows.length - 1].decision.decided_at);
      if (rows.length < 500) break;
    }
    return this.masked(out);
  }

  /** decision reads one decision: 404 `memory.not_found`. */
  async decision(id: string): Promise<MemoryDecision> {
    const found = id.length <= MAX_ID_LENGTH ? await this.store.decision(id) : undefined;
    if (!found) throw new MemoryError(404, 'memory.not_found', `decision "${id}" does not exist`, { decision_id: id });
    return this.masked(decisionView(found.decision, found.revertedBy));
  }

  /**
   * patch changes the body (and optionally name, type, description, metadata) of an existing memory through the
   * controller: 404 when the memory does not exist in the named scope.
   */
  async patch(filename: string, body: Record<string, unknown>, origin: Origin): Promise<WriteResult> {
    const problems: Record<string, string> = {};
    const scope = str(body.scope) || 'global';
    const partition = resolvePartition({ ...body, scope }, problems);
    if (Object.keys(problems).length) throw memoryValidation(problems);
    await this.service.requireWorkspace(partition.workspace_id);
    const current = await this.store.get(partitionKey(partition), filename);
    if (!current) throw new MemoryError(404, 'memory.not_found', `memory "${filename}" does not exist in ${partitionLabel(partition)}`, { filename, ...partitionFields(partition) });
    const metadata = { ...(body.metadata && typeof body.metadata === 'object' ? (body.metadata as Record<string, unknown>) : {}), target_filename: filename };
    return this.service.write({
      ...partition, type: body.type ?? current.type, name: body.name ?? current.name, description: body.description ?? current.description,
      content: body.content, metadata, idempotency_key: body.idempotency_key, injection: body.injection ?? current.injection,
      entity: current.entity, attribute: current.attribute,
    }, { origin, dryRun: body.dry_run === true });
  }

  /**
   * promote copies a memory into another scope through the controller (the original's promote): `from` names
   * where it is (404 when absent), `to` the scope it joins; the same filename, the source unchanged.
   */
  async promote(body: Record<string, unknown>, origin: Origin, dryRun: boolean): Promise<WriteResult> {
    const problems: Record<string, string> = {};
    const filename = str(body.filename);
    if (!filename || !cleanFilename(filename) || cleanFilename(filename) !== filename) problems.filename = 'is required: a memory filename ending in .md';
    const scopeOf = (f: string) => {
      const v = body[f];
      if (!v || typeof v !== 'object' || Array.isArray(v)) { problems[f] = 'is required: {scope, workspace_id?, agent_name?, agent_tier?}'; return undefined; }
      const sub: Record<string, string> = {};
      const p = resolvePartition(v as Record<string, unknown>, sub, `${f}.`);
      for (const [k, m] of Object.entries(sub)) problems[`${f}.${k}`] = m;
      return p;
    };
    const from = scopeOf('from');
    const to = scopeOf('to');
    if (Object.keys(problems).length || !from || !to) throw memoryValidation(problems);
    if (partitionKey(from) === partitionKey(to)) throw memoryValidation({ to: 'must be another scope than from' });
    await this.service.requireWorkspace(from.workspace_id, 'from.workspace_id');
    await this.service.requireWorkspace(to.workspace_id, 'to.workspace_id');
    const m = await this.store.get(partitionKey(from), filename);
    if (!m) throw new MemoryError(404, 'memory.not_found', `memory "${filename}" does not exist in ${partitionLabel(from)}`, { filename, from: partitionFields(from) });
    return this.service.write({
      ...to, type: m.type, name: m.name, description: m.description, content: m.content, entity: m.entity, attribute: m.attribute,
      injection: m.injection, metadata: { target_filename: filename }, idempotency_key: body.idempotency_key, source_session_ids: m.provenance.source_session_ids,
    }, { origin, dryRun });
  }

  /**
   * adHoc writes an ad-hoc note through the controller: a new file `ad_hoc_<time>_<random>_<slug>.md`,
   * type `project` at workspace scope and `user` elsewhere, named "Ad Hoc Memory Note". A note is its own memory
   * (WriteOptions.note): it is kept unless the scope holds its content already, and then `path` names that memory.
   * `reason` says why a note was not kept; `path` is empty when no file holds it.
   */
  async adHoc(body: Record<string, unknown>, origin: Origin): Promise<{ path: string; accepted: boolean; created_at: string; reason: string; decision: MemoryDecision }> {
    if (body.slug !== undefined && (typeof body.slug !== 'string' || body.slug.length > 64)) throw memoryValidation({ slug: 'must be a string of at most 64 characters' });
    const content = str(body.content);
    const now = new Date();
    const stamp = now.toISOString().replace(/[-:.]/g, '');
    const slug = (str(body.slug) || content || 'note').toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 48) || 'note';
    // NOTE: two notes in the same millisecond with the same words must not share a file (the second would update the first).
    const filename = `ad_hoc_${stamp}_${randomBytes(3).toString('hex')}_${slug}.md`;
    const first = content.split('\n')[0].trim().slice(0, 96);
    const res = await this.service.write({
      scope: body.scope, workspace_id: body.workspace_id, agent_name: body.agent_name, agent_tier: body.agent_tier,
      type: str(body.scope) === 'workspace' ? 'project' : 'user', name: 'Ad Hoc Memory Note', description: first || 'Ad-hoc memory note',
      content: body.content, metadata: { target_filename: filename },
    }, { origin, note: true });
    const d = res.decision;
    const held = res.applied || (d.op === 'noop' && d.targets.includes(d.target_filename));
    return { path: held ? d.target_filename : '', accepted: res.applied, created_at: now.toISOString(), reason: res.applied ? '' : d.reason, decision: d };
  }

  /**
   * search recalls memories: validates the request, ranks with the index, reads the hits from
   * Redis, and counts each hit's recall (recall_count, last_recalled_at, score) for dreams.
   */
  async search(request: Record<string, unknown>): Promise<{ results: SearchHitView[]; query_text: string; top_k: number }> {
    // NOTE: the answer and the recall event quote the query: a secret in it is masked like one in a write.
    const secrets = await this.o.secrets?.();
    const body = secrets ? secrets.value(request) : request;
    const problems: Record<string, string> = {};
    const text = str(body.query_text);
    if (!text) problems.query_text = 'is required';
    else if (text.length > 4096) problems.query_text = 'must be at most 4096 characters';
    const int = (f: string, dflt: number, max: number) => {
      const v = body[f];
      if (v === undefined || v === null) return dflt;
      if (!Number.isInteger(v) || (v as number) < 1 || (v as number) > max) { problems[f] = `must be an integer from 1 to ${max}`; return dflt; }
      return v as number;
    };
    const topK = int('top_k', DEFAULT_TOP_K, MAX_TOP_K);
    const raw = int('raw_candidates', DEFAULT_RAW_CANDIDATES, MAX_RAW_CANDIDATES);
    for (const f of ['include_already_surfaced', 'include_system', 'explain']) if (body[f] !== undefined && typeof body[f] !== 'boolean') problems[f] = 'must be a boolean';
    const surfaced = body.already_surfaced;
    if (surfaced !== undefined && (!Array.isArray(surfaced) || surfaced.length > 200 || surfaced.some((s) => typeof s !== 'string'))) problems.already_surfaced = 'must be at most 200 memory ids or filenames';
    if (body.scope !== undefined && !MEMORY_SCOPES.includes(str(body.scope) as never)) problems.scope = `must be one of ${MEMORY_SCOPES.join(', ')}`;
    if (body.type !== undefined && !MEMORY_TYPES.includes(str(body.type) as never)) problems.type = `must be one of ${MEMORY_TYPES.join(', ')}`;
    for (const f of ['workspace_id', 'agent_name', 'agent_tier', 'context_hint']) if (body[f] !== undefined && typeof body[f] !== 'string') problems[f] = 'must be a string';
    if (Object.keys(problems).length) throw memoryValidation(problems);
    checkNames(body);
    await this.service.requireWorkspace(str(body.workspace_id));
    const visible = visiblePartitions({ scope: str(body.scope) || undefined, workspace_id: str(body.workspace_id), agent_name: str(body.agent_name) });
    const tier = str(body.agent_tier);
    if (tier) for (const p of [...visible]) if (p.startsWith('a:') && !p.startsWith(tier === 'global' ? 'a:g:' : 'a:w:')) visible.delete(p);
    const query = [text, str(body.context_hint)].filter(Boolean).join(' ');
    const hits = this.index.search({
      text: query, visible, topK, rawCandidates: raw, alreadySurfaced: surfaced as string[] | undefined,
      includeSurfaced: body.include_already_surfaced === true, type: str(body.type) || undefined,
    });
    const records = await this.store.getMany(hits.map((h) => h.id));
    const live = hits.flatMap((h, i) => (records[i] ? [{ h, m: records[i]! }] : []));
    const at = new Date().toISOString();
    await this.store.recordRecall(live.map(({ h }) => ({ id: h.id, score: h.score })), at);
    this.index.noteRecall(live.map(({ h }) => ({ id: h.id, score: h.score })));
    const views = await this.service.views(live.map(({ m }) => m));
    const round = (x: number) => Math.round(x * 1e6) / 1e6;
    const results = live.map(({ h }, i) => ({
      memory: views[i], score: round(h.score),
      ...(body.explain === true ? { explain: Object.fromEntries(Object.entries(h.explain).map(([k, v]) => [k, round(v)])) } : {}),
    }));
    if (this.o.bus && results.length) {
      void this.o.bus.publish({ type: 'memory.recall.executed', source: 'memory', workspace_id: str(body.workspace_id), agent_name: str(body.agent_name), summary: `memory recall: ${results.length} hits`, data: { hits: results.length, top_k: topK } })
        .catch(() => undefined);
    }
    return secrets ? secrets.value({ results, query_text: text, top_k: topK }) : { results, query_text: text, top_k: topK };
  }

  /** dailyLogs lists daily logs (the list parameters and `date`). */
  async dailyLogs(q: ListQuery & { date?: string }): Promise<DailyLog[]> {
    if (q.date && (!/^\d{4}-\d{2}-\d{2}$/.test(q.date) || Number.isNaN(Date.parse(q.date)))) throw memoryValidation({ date: 'must be a date YYYY-MM-DD' });
    const accept = accepts(q);
    await this.service.requireWorkspace(q.workspace_id);
    return this.masked(await this.daily.list({ accept, date: q.date, limit: q.limit }));
  }

  /**
   * masked is a read's answer with the masking set applied. NOTE: writes are masked and refused before anything is
   * stored; this covers what was stored before that rule, or under a value added to the vault since.
   */
  private async masked<T>(answer: T): Promise<T> {
    const secrets = await this.o.secrets?.();
    return secrets ? secrets.value(answer) : answer;
  }

  /** config is the memory configuration in effect, with the providers' real status. */
  config(): MemoryConfigView {
    return memoryConfig({ policy: this.service.policy, daily: { ...DEFAULT_DAILY, ...this.o.daily }, weights: DEFAULT_WEIGHTS, modelProvider: this.o.modelProvider, dream: this.o.dream });
  }
}
