import type { Redis } from 'ioredis';
import MiniSearch from 'minisearch';
import type { Logger } from 'pino';
import { duplicateConnection } from '../../store/connections.ts';
import type { EventBus } from '../../store/event-bus.ts';
import { memoryId, partitionKey, type MemoryStore } from '../../store/memory-store.ts';
import { gather } from '../../store/stream-group.ts';
import { surfaceWords } from './controller.ts';
import type { StoredMemory } from './types.ts';

/** RecallWeights are the fusion weights. */
export interface RecallWeights {
  bm25_unicode: number;
  bm25_trigram: number;
  recency: number;
  recall_signal: number;
}

export const DEFAULT_WEIGHTS: RecallWeights = { bm25_unicode: 0.55, bm25_trigram: 0.2, recency: 0.15, recall_signal: 0.1 };
export const RECENCY_HALF_LIFE_DAYS = 14;
export const DEFAULT_TOP_K = 5;
export const MAX_TOP_K = 20;
export const DEFAULT_RAW_CANDIDATES = 50;
export const MAX_RAW_CANDIDATES = 200;

/** Visibility is which partitions a search may see (partition keys). */
export type Visibility = ReadonlySet<string>;

/**
 * visiblePartitions is what a caller at a workspace and agent may recall, as the original's visibility rule:
 * global memories, the workspace's, the agent's global tier and its tier in that workspace. `scope` narrows it to
 * one scope.
 */
export function visiblePartitions(q: { scope?: string; workspace_id?: string; agent_name?: string }): Set<string> {
  const out = new Set<string>();
  const ws = q.workspace_id ?? '';
  const agent = q.agent_name ?? '';
  const want = (s: string) => !q.scope || q.scope === s;
  if (want('global')) out.add(partitionKey({ scope: 'global', workspace_id: '', agent_name: '', agent_tier: '' }));
  if (want('workspace') && ws) out.add(partitionKey({ scope: 'workspace', workspace_id: ws, agent_name: '', agent_tier: '' }));
  if (want('agent') && agent) {
    out.add(partitionKey({ scope: 'agent', workspace_id: '', agent_name: agent, agent_tier: 'global' }));
    if (ws) out.add(partitionKey({ scope: 'agent', workspace_id: ws, agent_name: agent, agent_tier: 'workspace' }));
  }
  return out;
}

/** SearchQuery is a recall request after validation. */
export interface SearchQuery {
  text: string;
  visible: Visibility;
  topK: number;
  rawCandidates: number;
  /** Memory ids or filenames already given to the caller, left out unless includeSurfaced. */
  alreadySurfaced?: readonly string[];
  includeSurfaced?: boolean;
  /** Only memories of this type. */
  type?: string;
}

/** SearchHit is one ranked memory with its fused score and, on request, the parts. */
export interface SearchHit {
  id: string;
  partition: string;
  filename: string;
  score: number;
  explain: { bm25_unicode: number; bm25_trigram: number; recency: number; recall_signal: number; raw_unicode: number; raw_trigram: number; age_days: number };
}

/** IndexedDoc is what the index keeps of a memory beside its terms. */
interface IndexedDoc {
  id: string;
  partition: string;
  filename: string;
  type: string;
  content_hash: string;
  updated_ms: number;
  recall_score: number;
  /**
   * Its distinct words (lower case, joined by spaces): those of its body, then `|`, then those only in its name,
   * description or entity. They are counted in the vocabulary while it is indexed, and the body's answer the surface
   * rule. NOTE: one string, not an array of strings: 10,000 arrays of separate word strings took 8 MiB.
   */
  words: string;
}

const WORD = /[^\p{L}\p{N}]+/u;

/** unicodeWords is the first tokenization: unicode letters and digits, lower case (MiniSearch lower-cases terms). */
export function unicodeWords(text: string): string[] {
  return text.split(WORD).filter(Boolean);
}

/**
 * trigrams is the second tokenization: the character trigrams of each word (a word shorter than three characters is
 * itself one term), so a query matches across inflections and typos (`deploys` ~ `deployment`), as the original's
 * trigram FTS table does.
 */
export function trigrams(text: string): string[] {
  const out: string[] = [];
  for (const w of text.toLowerCase().split(WORD)) {
    if (!w) continue;
    const chars = [...w];
    if (chars.length < 3) { out.push(w); continue; }
    for (let i = 0; i + 3 <= chars.length; i++) out.push(chars.slice(i, i + 3).join(''));
  }
  return out;
}

const FIELDS = ['name', 'description', 'content', 'entity'];
// NOTE: a memory's name and entity say what it is about; a hit there counts more than one in the body.
const BOOST = { name: 2, entity: 1.5, description: 1.2, content: 1 };
/** How many vocabulary words one query word expands to through trigrams, at most (the most similar). */
export const TRIGRAM_EXPANSION = 8;
/** How many recent searches' BM25 candidates are kept (a repeated query is not scored again until the index changes). */
const QUERY_CACHE = 256;
/** How many query words' trigram expansions are kept (until a word enters or leaves the vocabulary). */
const EXPANSION_CACHE = 4096;

const byWord = (s: string) => s.split(' ');
const distinct = (words: Iterable<string>) => [...new Set([...words].map((w) => w.toLowerCase()))];

const clamp01 = (x: number) => (x < 0 ? 0 : x > 1 ? 1 : x);

/** Candidates are a query's BM25 candidates of both tokenizations, best first. */
interface Candidates { u: { id: string; score: number }[]; t: { id: string; score: number }[] }

/**
 * MemoryIndex is this process's recall index: BM25+ (MiniSearch) of every memory by unicode
 * words, and character trigrams for the second tokenization, fused with recency and the recall signal. Redis is the
 * truth: the index is rebuilt from it at start, follows the `memory.write.*` events of the bus (so a write on another
 * replica is searchable here within a second), applies this process's own writes at once, and every RESYNC_MS
 * compares the store's revision and re-reads what differs (a lost event heals itself).
 *
 * NOTE: the layout is chosen for memory and for a query's cost (README "Memory", Performance):
 * - one index of every memory, not one per partition (per-partition indexes repeat every term's tree and postings
 *   and took 143 MiB at 10,000 memories); a search sees only its caller's partitions through MiniSearch's
 *   `boostDocument`, which returns 0 for any other partition, so a document of another partition is skipped while
 *   its postings are read, before any result is built for it.
 * - the trigrams are those of the vocabulary (each distinct word once), not of every document: trigram postings per
 *   document (about a hundred per memory, kept in JS Maps) were two thirds of the index. A query word's trigrams
 *   find the vocabulary words that share them; the most similar (Dice coefficient of their trigram sets, at most
 *   TRIGRAM_EXPANSION) are searched in the word index with that similarity as their weight, which gives the BM25+
 *   score of each memory over trigram-similar words (an exact word has similarity 1).
 */
export class MemoryIndex {
  private words = newWordIndex();
  private vocab = newVocabulary();
  /** How many indexed memories hold each vocabulary word. */
  private wordCounts = new Map<string, number>();
  /** The ids of each partition's memories (the surface rule reads one partition). */
  private byPartition = new Map<string, Set<string>>();
  private readonly docs = new Map<string, IndexedDoc>();
  private conn?: Redis;
  private running = false;
  private loop?: Promise<void>;
  private timer?: NodeJS.Timeout;
  private revision = 0;
  private queue: Promise<void> = Promise.resolve();
  private readonly cache = new Map<string, Candidates>();
  /** Each recent query word's similar vocabulary words; cleared when the vocabulary changes. */
  private readonly expansions = new Map<string, [string, number][]>();

  static readonly RESYNC_MS = 30_000;

  constructor(private readonly o: { store: MemoryStore; bus?: EventBus; logger?: Logger; now?: () => number; weights?: RecallWeights }) {}

  get size(): number { return this.docs.size; }

  /** Whether the index was built and follows the store (start ran, stop did not). */
  get ready(): boolean { return this.running; }

  /** start builds the index from Redis, then follows the bus from where it stood before the build. */
  async start(): Promise<void> {
    const from = this.o.bus ? (await this.o.bus.position()).last : '';
    await this.rebuild();
    if (!this.o.bus) return;
    this.conn = duplicateConnection(this.o.bus.redis, 'svc-memory-index');
    this.running = true;
    this.loop = this.follow(from);
    this.timer = setInterval(() => void this.enqueue(() => this.resync()), MemoryIndex.RESYNC_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.timer);
    this.conn?.disconnect();
    await this.loop;
    await this.queue;
  }

  /** settled resolves once every update queued so far (this process's own writes among them) is in the index. */
  settled(): Promise<void> { return this.queue; }

  /** enqueue runs index updates one at a time, in order. */
  private enqueue(fn: () => Promise<void>): Promise<void> {
    this.queue = this.queue.then(fn).catch((err) => this.o.logger?.warn({ err: (err as Error).message }, 'memory index update failed'));
    return this.queue;
  }

  private async follow(after: string): Promise<void> {
    let cursor = after;
    while (this.running) {
      try {
        const { events, last } = await this.o.bus!.readAfter(this.conn!, cursor, 1000, 500, (t) => t.startsWith('memory.write.'));
        const moved = last !== cursor;
        cursor = last;
        const ids = new Set<string>();
        let rev = 0;
        for (const e of events) {
          if (!e.type.startsWith('memory.write.') || typeof e.data.memory_id !== 'string' || !e.data.memory_id) continue;
          rev = Math.max(rev, Number(e.data.revision ?? 0));
          // NOTE: a change this index holds already (this process's own writes, applied at once) is not read again.
          const hash = typeof e.data.content_hash === 'string' ? e.data.content_hash : undefined;
          if (hash !== undefined && (hash ? this.docs.get(e.data.memory_id)?.content_hash === hash : !this.docs.has(e.data.memory_id))) continue;
          ids.add(e.data.memory_id);
        }
        if (ids.size) await this.refresh([...ids], rev);
        if (moved) await gather();
      } catch (err) {
        if (!this.running) break;
        this.o.logger?.warn({ err: (err as Error).message }, 'memory index: reading the bus failed; retrying');
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** apply takes this process's own changes as the write path stored them (null: deleted), in order with the other updates. */
  apply(changes: { id: string; memory: StoredMemory | null }[], revision = 0): Promise<void> {
    return this.enqueue(async () => {
      for (const c of changes) {
        if (c.memory) this.upsert(c.memory);
        else this.remove(c.id);
      }
      this.revision = Math.max(this.revision, revision);
    });
  }

  /** refresh re-reads memories by id from Redis and updates the index (removing those that are gone). */
  refresh(ids: string[], revision = 0): Promise<void> {
    return this.enqueue(async () => {
      const records = await this.o.store.getMany(ids);
      const stats = await this.o.store.recallStats(ids);
      ids.forEach((id, i) => {
        const m = records[i];
        if (m) this.upsert(m, stats[i].recall_score);
        else this.remove(id);
      });
      this.revision = Math.max(this.revision, revision);
    });
  }

  /** rebuild reads every memory from Redis into a fresh index, one partition at a time. */
  async rebuild(): Promise<void> {
    const revision = await this.o.store.revision();
    const fresh = { words: newWordIndex(), vocab: newVocabulary(), wordCounts: new Map<string, number>(), docs: new Map<string, IndexedDoc>() };
    for (const part of await this.o.store.partitions()) {
      const memories = await this.o.store.partitionMemories(part);
      const stats = await this.o.store.recallStats(memories.map((m) => memoryId(part, m.filename)));
      memories.forEach((m, i) => {
        const doc = this.docOf(m, stats[i].recall_score);
        fresh.docs.set(doc.id, doc);
        fresh.words.add(this.fieldsOf(m, doc));
        for (const w of doc.words.split(' ')) if (w !== '|') countWord(fresh.wordCounts, fresh.vocab, w, 1);
      });
    }
    this.words = fresh.words;
    this.vocab = fresh.vocab;
    this.wordCounts = fresh.wordCounts;
    this.docs.clear();
    this.byPartition.clear();
    this.expansions.clear();
    for (const [k, v] of fresh.docs) {
      this.docs.set(k, v);
      this.member(v, true);
    }
    this.cache.clear();
    this.revision = revision;
  }

  /** resync compares every content hash with Redis when the store's revision moved past what the index applied. */
  private async resync(): Promise<void> {
    const revision = await this.o.store.revision();
    if (revision <= this.revision) return;
    const hashes = await this.o.store.contentHashes();
    const stale = [...hashes].filter(([id, h]) => this.docs.get(id)?.content_hash !== h).map(([id]) => id);
    const gone = [...this.docs.keys()].filter((id) => !hashes.has(id));
    for (const id of gone) this.remove(id);
    if (stale.length) {
      const records = await this.o.store.getMany(stale);
      records.forEach((m) => m && this.upsert(m, 0));
    }
    this.revision = revision;
  }

  private docOf(m: StoredMemory, recallScore: number): IndexedDoc {
    const partition = partitionKey(m);
    const body = distinct(unicodeWords(m.content));
    const seen = new Set(body);
    const others = distinct(unicodeWords([m.name, m.description, m.entity, m.attribute].join(' '))).filter((w) => !seen.has(w));
    const words = [...body, '|', ...others].join(' ');
    return { id: memoryId(partition, m.filename), partition, filename: m.filename, type: m.type, content_hash: m.content_hash, updated_ms: Date.parse(m.updated_at), recall_score: recallScore, words };
  }

  private fieldsOf(m: StoredMemory, d: IndexedDoc) {
    return { id: d.id, part: d.partition, type: d.type, name: m.name, description: m.description, content: m.content, entity: [m.entity, m.attribute].filter(Boolean).join(' ') };
  }

  /** upsert adds or replaces a memory (MiniSearch's discard keeps removal incremental). */
  upsert(m: StoredMemory, recallScore?: number): void {
    const doc = this.docOf(m, recallScore ?? this.docs.get(memoryId(partitionKey(m), m.filename))?.recall_score ?? 0);
    if (this.docs.get(doc.id)?.content_hash === doc.content_hash) {
      this.docs.set(doc.id, doc);
      return;
    }
    this.remove(doc.id);
    this.words.add(this.fieldsOf(m, doc));
    for (const w of doc.words.split(' ')) if (w !== '|' && countWord(this.wordCounts, this.vocab, w, 1)) this.expansions.clear();
    this.docs.set(doc.id, doc);
    this.member(doc, true);
    this.cache.clear();
  }

  private member(d: IndexedDoc, present: boolean): void {
    let ids = this.byPartition.get(d.partition);
    if (present) {
      if (!ids) this.byPartition.set(d.partition, (ids = new Set()));
      ids.add(d.id);
    } else if (ids) {
      ids.delete(d.id);
      if (!ids.size) this.byPartition.delete(d.partition);
    }
  }

  remove(id: string): void {
    const d = this.docs.get(id);
    if (!d) return;
    this.words.discard(id);
    for (const w of d.words.split(' ')) if (w !== '|' && countWord(this.wordCounts, this.vocab, w, -1)) this.expansions.clear();
    this.docs.delete(id);
    this.member(d, false);
    this.cache.clear();
  }

  /** noteRecall keeps the recall signal of hits current in this process (Redis holds the shared value). */
  noteRecall(hits: { id: string; score: number }[]): void {
    for (const h of hits) {
      const d = this.docs.get(h.id);
      if (d) d.recall_score = h.score;
    }
  }

  /**
   * surface lists the memories of a partition whose body shares at least `min` words (of three characters or more)
   * with `content`: the controller's surface rule, answered from the body words this index keeps instead of reading
   * the partition from Redis. NOTE: a count over the partition's memories, not a search: a search reads the postings
   * of every partition and builds a result for each match, several times the cost in a large partition.
   */
  surface(partition: string, content: string, min: number): string[] {
    const words = surfaceWords(content);
    if (words.size < min) return [];
    const out: string[] = [];
    for (const id of this.byPartition.get(partition) ?? []) {
      const d = this.docs.get(id)!;
      let shared = 0;
      for (const w of d.words.split(' ')) {
        if (w === '|') break;
        if (words.has(w) && ++shared >= min) {
          out.push(d.filename);
          break;
        }
      }
    }
    return out;
  }

  /**
   * expand is the trigram side of a query: each query word's most similar vocabulary words (Dice coefficient of
   * their trigram sets, at most TRIGRAM_EXPANSION each), with the best similarity any query word gave them.
   */
  private expand(text: string): Map<string, number> {
    const out = new Map<string, number>();
    for (const w of distinct(unicodeWords(text))) {
      let similar = this.expansions.get(w);
      if (!similar) {
        const mine = new Set(trigrams(w)).size;
        similar = this.vocab.search(w)
          .map((r): [string, number] => [String(r.id), (2 * r.queryTerms.length) / (mine + Number(r.n))])
          .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
          .slice(0, TRIGRAM_EXPANSION);
        this.expansions.set(w, similar);
        if (this.expansions.size > EXPANSION_CACHE) this.expansions.delete(this.expansions.keys().next().value!);
      }
      for (const [word, dice] of similar) out.set(word, Math.max(out.get(word) ?? 0, dice));
    }
    return out;
  }

  /** candidates are a query's best `rawCandidates` by each tokenization among what the caller may see (cached). */
  private candidates(q: SearchQuery): Candidates {
    const surfaced = new Set(q.includeSurfaced ? [] : q.alreadySurfaced ?? []);
    const key = JSON.stringify([q.text, [...q.visible].sort(), q.rawCandidates, q.type ?? '', [...surfaced].sort()]);
    const hit = this.cache.get(key);
    if (hit) {
      this.cache.delete(key);
      this.cache.set(key, hit);
      return hit;
    }
    const boostDocument = (id: unknown, _term: string, stored?: Record<string, unknown>) => {
      if (!stored || !q.visible.has(stored.part as string) || (q.type && stored.type !== q.type)) return 0;
      if (surfaced.size && (surfaced.has(id as string) || surfaced.has(this.docs.get(id as string)?.filename ?? ''))) return 0;
      return 1;
    };
    const top = (rs: { id: unknown; score: number }[]) => rs.slice(0, q.rawCandidates).map((r) => ({ id: String(r.id), score: r.score }));
    const u = top(this.words.search(q.text, { boostDocument }));
    const similar = this.expand(q.text);
    const t = similar.size ? top(this.words.search([...similar.keys()].join(' '), { boostDocument, tokenize: byWord, boostTerm: (term) => similar.get(term) ?? 0 })) : [];
    const out = { u, t };
    this.cache.set(key, out);
    if (this.cache.size > QUERY_CACHE) this.cache.delete(this.cache.keys().next().value!);
    return out;
  }

  /**
   * search ranks the visible memories for a query: the top `rawCandidates` of each tokenization by BM25+, each
   * normalized by its best score, fused as 0.55·unicode + 0.20·trigram + 0.15·recency (14-day half-life) +
   * 0.10·recall signal; ties go to the newer memory, then the id.
   */
  search(q: SearchQuery): SearchHit[] {
    const w = this.o.weights ?? DEFAULT_WEIGHTS;
    const { u, t } = this.candidates(q);
    const maxU = u[0]?.score ?? 0;
    const maxT = t[0]?.score ?? 0;
    const parts = new Map<string, { u: number; t: number }>();
    for (const r of u) parts.set(r.id, { u: r.score, t: 0 });
    for (const r of t) {
      const p = parts.get(r.id);
      if (p) p.t = r.score;
      else parts.set(r.id, { u: 0, t: r.score });
    }
    const now = this.o.now?.() ?? Date.now();
    const hits: SearchHit[] = [];
    for (const [id, p] of parts) {
      const d = this.docs.get(id);
      if (!d) continue;
      const ageDays = Math.max(0, (now - d.updated_ms) / 86_400_000);
      const e = {
        bm25_unicode: maxU ? p.u / maxU : 0, bm25_trigram: maxT ? p.t / maxT : 0,
        recency: 0.5 ** (ageDays / RECENCY_HALF_LIFE_DAYS), recall_signal: clamp01(d.recall_score),
        raw_unicode: p.u, raw_trigram: p.t, age_days: Math.round(ageDays * 1000) / 1000,
      };
      const score = w.bm25_unicode * e.bm25_unicode + w.bm25_trigram * e.bm25_trigram + w.recency * e.recency + w.recall_signal * e.recall_signal;
      hits.push({ id, partition: d.partition, filename: d.filename, score, explain: e });
    }
    hits.sort((a, b) => b.score - a.score || this.docs.get(b.id)!.updated_ms - this.docs.get(a.id)!.updated_ms || (a.id < b.id ? -1 : 1));
    return hits.slice(0, q.topK);
  }
}

/** newWordIndex is the index of memories by unicode words; it stores each memory's partition and type (for filters). */
function newWordIndex(): MiniSearch {
  return new MiniSearch({ idField: 'id', fields: FIELDS, storeFields: ['part', 'type'], tokenize: unicodeWords, searchOptions: { boost: BOOST, combineWith: 'OR', tokenize: unicodeWords } });
}

/** newVocabulary is the index of distinct words by their trigrams; it stores each word's trigram count (`n`). */
function newVocabulary(): MiniSearch {
  return new MiniSearch({
    idField: 'w', fields: ['w'], storeFields: ['n'], tokenize: (w) => [...new Set(trigrams(w))],
    searchOptions: { combineWith: 'OR', tokenize: (w) => [...new Set(trigrams(w))] },
  });
}

/**
 * countWord adds (or takes) one memory holding a word; a word enters the vocabulary with its first and leaves with
 * its last. It tells whether the vocabulary changed.
 */
function countWord(counts: Map<string, number>, vocab: MiniSearch, word: string, delta: 1 | -1): boolean {
  const n = (counts.get(word) ?? 0) + delta;
  if (n > 0) {
    counts.set(word, n);
    if (n === 1 && delta === 1) {
      vocab.add({ w: word, n: new Set(trigrams(word)).size });
      return true;
    }
    return false;
  }
  counts.delete(word);
  if (!vocab.has(word)) return false;
  vocab.discard(word);
  return true;
}
