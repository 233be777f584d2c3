import { createHash } from 'node:crypto';
import { scanContent, type ScanFinding } from '../security/content-scan.ts';
import { AUTONOMOUS_ORIGINS, type DecisionOp, type MemoryType, type Origin, type RuleHit } from './types.ts';

/**
 * Candidate is a write the controller decides on: the normalized input of MemoryService.write (trimmed, its
 * partition resolved) and who asked.
 */
export interface Candidate {
  origin: Origin;
  type: MemoryType;
  name: string;
  content: string;
  entity: string;
  attribute: string;
  metadata: Record<string, string>;
  /** A note (WriteOptions.note): added under its own filename unless its content is there already. */
  note?: boolean;
}

/** Target is an existing memory of the candidate's partition the rules compare against. */
export interface Target {
  filename: string;
  name: string;
  entity: string;
  attribute: string;
  content: string;
}

/**
 * Lookup is what the rules read of the candidate's partition: the memories with the same canonical body, the one at
 * the candidate's filename, those in its entity slot, the filenames sharing surface words with it, and which of
 * the slot and surface matches carry the candidate's name. A write builds it from the partition's lookup index in
 * Redis and the recall index (MemoryService); `lookupFrom` builds the same from a list of every memory.
 */
export interface Lookup {
  sameBody: Target[];
  atFilename?: Target;
  slot: Target[];
  /** Filenames of memories whose body shares at least two words (of three or more characters) with the candidate. */
  surface: string[];
  /** Filenames whose normalized name equals the candidate's. */
  sameName: ReadonlySet<string>;
}

/** Verdict is the controller's decision before it is stored: what to do and why. */
export interface Verdict {
  op: DecisionOp;
  /** The file the decision acts on (the new one for add, the existing one otherwise). */
  filename: string;
  /** The target updated, deleted or found identical (undefined for add, reject and ambiguous). */
  target?: Target;
  /** Filenames the decision considered (sorted). */
  targets: string[];
  confidence: number;
  reason: string;
  rule_trace: RuleHit[];
  findings: ScanFinding[];
}

/** MIN_SURFACE_OVERLAP is how many words a memory must share with a candidate to be a surface match. */
export const MIN_SURFACE_OVERLAP = 2;
const DELETE_WORDS = new Set(['delete', 'forget', 'remove']);

/** confidenceFor is the original's confidence per outcome: a reject is certain, a noop nearly so. */
export function confidenceFor(op: DecisionOp): number {
  return op === 'reject' ? 1 : op === 'noop' ? 0.95 : 0.9;
}

/** canonicalBody compares bodies the way the rules do: lower case, whitespace collapsed. */
export function canonicalBody(s: string): string {
  return s.trim().toLowerCase().split(/\s+/).filter(Boolean).join(' ');
}

/** normalizeSlot is an entity or attribute as compared: lower case, whitespace collapsed. */
export const normalizeSlot = canonicalBody;

/** sha256 is the hex SHA-256 of a string (content and candidate hashes). */
export function sha256(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

function slugify(s: string): string {
  const slug = s.trim().toLowerCase().replace(/[^a-z0-9]+/g, '_').replace(/^_+|_+$/g, '');
  return slug || `memory_${sha256(s.trim()).slice(0, 12)}`;
}

/**
 * FILENAME is what a memory file may be named: one path segment of safe characters ending in `.md`, so a name
 * from a request can never leave its scope's directory when memories are exported as files.
 */
export const FILENAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.md$/;

/** cleanFilename is a requested filename with `.md` added, or '' when it is not a safe single segment. */
export function cleanFilename(raw: string | undefined): string {
  const t = (raw ?? '').trim();
  if (!t) return '';
  const f = /\.[A-Za-z0-9]+$/.test(t) ? t : `${t}.md`;
  return FILENAME.test(f) ? f : '';
}

/** explicitFilename is the filename a candidate names itself (metadata `target_filename` or `filename`), or ''. */
export function explicitFilename(c: Pick<Candidate, 'metadata'>): string {
  return cleanFilename(c.metadata.target_filename) || cleanFilename(c.metadata.filename);
}

/** targetFilename is the file a candidate writes: the one it names, else `<type>_<slug of entity, name or first words>.md`. */
export function targetFilename(c: Pick<Candidate, 'metadata' | 'entity' | 'name' | 'content' | 'type'>): string {
  const explicit = explicitFilename(c);
  if (explicit) return explicit;
  const base = c.entity || c.name || c.content.trim().split(/\s+/).slice(0, 5).join(' ') || 'memory';
  return `${c.type}_${slugify(base)}`.slice(0, 190) + '.md';
}

/** isDelete tells whether a candidate asks to delete (metadata `operation` or `op`: delete, forget or remove). */
export function isDelete(c: Pick<Candidate, 'metadata'>): boolean {
  return DELETE_WORDS.has((c.metadata.operation || c.metadata.op || '').trim().toLowerCase());
}

/** surfaceWords are the words the surface rule compares: unicode words, lower case, three characters or more, each once. */
export function surfaceWords(s: string): Set<string> {
  return new Set(s.split(/[^\p{L}\p{N}]+/u).filter((t) => t.length >= 3).map((t) => t.toLowerCase()));
}

const key = (kind: string, value: string) => `${kind}:${sha256(value).slice(0, 32)}`;
/** bodyKey, slotKey and nameKey are a partition's lookup fields (the apply script keeps them, see lookupFields). */
export const bodyKey = (content: string) => key('b', canonicalBody(content));
export function slotKey(entity: string, attribute: string): string {
  const e = normalizeSlot(entity);
  const a = normalizeSlot(attribute);
  return e && a ? key('s', `${e}\x00${a}`) : '';
}
export const nameKey = (name: string) => (normalizeSlot(name) ? key('n', normalizeSlot(name)) : '');

/** lookupFields are the lookup index fields a memory is found under: its canonical body, its entity slot, its name. */
export function lookupFields(m: Pick<Target, 'content' | 'entity' | 'attribute' | 'name'>): string[] {
  return [bodyKey(m.content), slotKey(m.entity, m.attribute), nameKey(m.name)].filter(Boolean);
}

/** candidateSlot is the entity slot a candidate names (its entity and attribute, or metadata target_entity/_attribute). */
export function candidateSlot(c: Candidate): { entity: string; attribute: string } {
  return { entity: c.entity || c.metadata.target_entity || '', attribute: c.attribute || c.metadata.target_attribute || '' };
}

/** lookupFrom builds a candidate's Lookup from every memory of its partition (tests, and partitions read whole). */
export function lookupFrom(c: Candidate, all: readonly Target[]): Lookup {
  const filename = targetFilename(c);
  const body = canonicalBody(c.content);
  const { entity, attribute } = candidateSlot(c);
  const e = normalizeSlot(entity);
  const a = normalizeSlot(attribute);
  const words = surfaceWords(c.content);
  const name = normalizeSlot(c.name);
  return {
    sameBody: all.filter((t) => canonicalBody(t.content) === body),
    atFilename: all.find((t) => t.filename === filename),
    slot: e && a ? all.filter((t) => normalizeSlot(t.entity) === e && normalizeSlot(t.attribute) === a) : [],
    surface: all.filter((t) => {
      let overlap = 0;
      for (const w of surfaceWords(t.content)) if (words.has(w) && ++overlap >= MIN_SURFACE_OVERLAP) return true;
      return false;
    }).map((t) => t.filename),
    sameName: new Set(name ? all.filter((t) => normalizeSlot(t.name) === name).map((t) => t.filename) : []),
  };
}

const passed = (name: string, reason: string, target = ''): RuleHit => ({ name: `controller.${name}`, passed: true, reason, ...(target ? { target } : {}) });
/**
 * MAX_LISTED_TARGETS is how many of the memories a decision considered it lists (the first, by filename); a failed
 * rule's details add how many more there were. NOTE: in a large scope nearly every memory shares two words with a
 * candidate, and a decision listing thousands of filenames made each write store tens of kilobytes.
 */
export const MAX_LISTED_TARGETS = 32;
const listed = (files: string[]) => [...files].sort().slice(0, MAX_LISTED_TARGETS);
const failed = (name: string, reason: string, targets: string[]): RuleHit => ({
  name: `controller.${name}`, passed: false, reason,
  details: listed(targets).join(',') + (targets.length > MAX_LISTED_TARGETS ? ` (+${targets.length - MAX_LISTED_TARGETS} more)` : ''),
});

const byFilename = (a: { filename: string }, b: { filename: string }) => (a.filename < b.filename ? -1 : a.filename > b.filename ? 1 : 0);

/**
 * decide applies the controller rules in order to a candidate and what it finds in its partition (a Lookup, or
 * every memory of the partition): 1. the safety scan (runtime/security/content-scan.ts; a hit rejects; `held` are
 * the findings of the caller's scan of what the candidate held before it was masked, scanSecrets),
 * 2. delete, 3. identical content, 4. the same filename, 5. the entity slot, or ambiguity among surface matches
 * (a note is added instead). It is pure: the same input gives the same verdict.
 */
export function decide(c: Candidate, found: Lookup | readonly Target[], held: readonly ScanFinding[] = []): Verdict {
  const look = Array.isArray(found) ? lookupFrom(c, found) : (found as Lookup);
  const filename = targetFilename(c);
  const verdict = (op: DecisionOp, file: string, trace: RuleHit[], reason: string, considered: { filename: string }[] = [], target?: Target, findings: ScanFinding[] = []): Verdict => ({
    op, filename: file, target, targets: listed(considered.map((t) => t.filename)), confidence: confidenceFor(op),
    reason: (c.metadata.reason?.trim() || reason).slice(0, 240),
    rule_trace: trace.length ? trace : [passed('default', 'rule path completed')], findings,
  });

  // 1. safety scan: every hit is one failed rule, so the trace names them all.
  const findings = [...scanContent(`${c.name}\n${c.content}`), ...held];
  if (findings.length) {
    const bytes = Buffer.byteLength(c.content);
    const trace = findings.map((f): RuleHit => ({ name: `memory_scan.${f.rule}`, passed: false, reason: f.message, details: `category=${f.category} sample_bytes=${bytes}` }));
    return verdict('reject', '', trace, `safety scan: ${findings.map((f) => f.rule).join(', ')} sample_bytes=${bytes}`, [], undefined, findings);
  }

  // 2. delete
  if (isDelete(c)) {
    const hit = look.atFilename;
    if (!hit) return verdict('noop', filename, [passed('delete_missing', 'delete target is already absent', filename)], 'delete target is already absent');
    return verdict('delete', hit.filename, [passed('delete_target', 'single delete target found', hit.filename)], 'delete target found', [hit], hit);
  }

  // 3. identical content
  const body = canonicalBody(c.content);
  const same = [...look.sameBody].sort(byFilename)[0];
  if (same) return verdict('noop', same.filename, [passed('exact_hash', 'candidate content already exists', same.filename)], 'exact duplicate memory content', [same], same);

  // 4. the same target filename
  const collision = look.atFilename;
  if (collision) {
    return verdict('update', collision.filename, [passed('exact_slug_collision', 'target filename already exists', collision.filename)], 'single target updated', [collision], collision);
  }

  // NOTE: a note names a new file of its own; memories sharing its words are not what it changes.
  if (c.note) return verdict('add', filename, [passed('explicit_target_filename', 'a note is its own memory under its new filename', filename)], 'new note');

  // 5. entity slot, else ambiguity among surface matches
  const autonomous = AUTONOMOUS_ORIGINS.includes(c.origin);
  const slot = [...look.slot].sort(byFilename);
  const explicitNew = (matches: { filename: string }[]) => {
    const name = normalizeSlot(c.name);
    if (!explicitFilename(c) && !name) return false;
    return !name || matches.every((t) => !look.sameName.has(t.filename));
  };
  const fresh = () => verdict('add', filename, [passed('fresh_slot', 'no matching target found')], 'fresh memory slot');
  const ambiguous = (matches: { filename: string }[]) => {
    if (!autonomous && explicitNew(matches)) {
      return verdict('add', filename, [passed('explicit_target_filename', 'direct write supplied a distinct target filename', filename)], 'fresh memory slot', matches);
    }
    return verdict('noop', filename, [failed('ambiguous_targets', 'multiple plausible targets require tiebreaker', matches.map((t) => t.filename))], 'ambiguous targets; rules-only fallback selected noop', matches);
  };
  if (slot.length === 1) {
    const t = slot[0];
    if (canonicalBody(t.content) === body) return verdict('noop', t.filename, [passed('entity_slot_no_change', 'slot target content is unchanged', t.filename)], 'entity slot already has this content', [t], t);
    return verdict('update', t.filename, [passed('entity_slot_update', 'single entity slot target differs', t.filename)], 'single target updated', [t], t);
  }
  if (slot.length > 1) return ambiguous(slot);
  if (c.origin !== 'dreaming') {
    const surface = [...new Set(look.surface)].sort().map((f) => ({ filename: f }));
    if (surface.length > 1) return ambiguous(surface);
  }
  return fresh();
}
