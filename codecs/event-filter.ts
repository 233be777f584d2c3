/**
 * The notification filter grammar: a small recursive-descent parser and an evaluator over
 * a delivered event's fields. No eval, no regular expressions built from input.
 *
 *   expr     := and ( OR and )*
 *   and      := primary ( AND primary )*          ; AND/OR are case-insensitive
 *   primary  := '(' expr ')' | field op value
 *   op       := '=' | '!=' | '>' | '>=' | '<' | '<='
 *   value    := bare word (ends at whitespace or ()=!<>) | '…' | "…"
 */

/** FilterField is a canonical filter field; aliases map onto these. */
export type FilterField = 'severity' | 'workspace' | 'agent' | 'provider' | 'event' | 'task' | 'run';

/** FilterOp is a comparison operator of the grammar. */
export type FilterOp = '=' | '!=' | '>' | '>=' | '<' | '<=';

/** FilterExpr is a parsed filter: a comparison or an AND/OR of two sub-expressions. */
export type FilterExpr =
  | { kind: 'cmp'; field: FilterField; op: FilterOp; value: string }
  | { kind: 'and' | 'or'; left: FilterExpr; right: FilterExpr };

/** FilterSubject is what a filter reads from one event; an absent field reads as "". */
export type FilterSubject = Partial<Record<FilterField, string>>;

/** FIELD_ALIASES maps each accepted field name (lower case) to its canonical field. */
export const FIELD_ALIASES: Readonly<Record<string, FilterField>> = {
  severity: 'severity', outcome: 'severity',
  workspace: 'workspace', workspace_id: 'workspace',
  agent: 'agent', agent_name: 'agent',
  provider: 'provider',
  event: 'event', type: 'event', event_type: 'event',
  task: 'task', task_id: 'task',
  run: 'run', run_id: 'run',
};

const SEVERITY_RANKS: Readonly<Record<string, number>> = {
  info: 0, success: 1, warning: 2, warn: 2, failure: 3, error: 3, failed: 3,
};

/** severityRank ranks a severity word or a bare integer; undefined for anything else (which never matches). */
export function severityRank(v: string): number | undefined {
  const s = v.trim().toLowerCase();
  if (/^-?\d+$/.test(s)) return Number(s);
  return Object.hasOwn(SEVERITY_RANKS, s) ? SEVERITY_RANKS[s] : undefined;
}

/** ParsedFilter is the outcome of parsing: an expression (undefined for an empty filter, which matches all) or why not. */
export type ParsedFilter = { ok: true; expr: FilterExpr | undefined } | { ok: false; error: string };

type Token =
  | { t: 'lparen'; at: number }
  | { t: 'rparen'; at: number }
  | { t: 'op'; v: FilterOp; at: number }
  | { t: 'word'; v: string; at: number }
  | { t: 'quoted'; v: string; at: number };

const BREAK = new Set([' ', '\t', '\n', '\r', '(', ')', '=', '!', '<', '>']);
const MAX_FILTER_LENGTH = 4096;
const MAX_DEPTH = 32;

class FilterSyntaxError extends Error {}

function tokenize(src: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') { i++; continue; }
    if (c === '(' || c === ')') { out.push(c === '(' ? { t: 'lparen', at: i } : { t: 'rparen', at: i }); i++; continue; }
    if (c === '=' ) { out.push({ t: 'op', v: '=', at: i }); i++; continue; }
    if (c === '!' || c === '<' || c === '>') {
      const two = src[i + 1] === '=';
      if (c === '!' && !two) throw new FilterSyntaxError(`"!" at ${i} must be followed by "="`);
      out.push({ t: 'op', v: (two ? `${c}=` : c) as FilterOp, at: i });
      i += two ? 2 : 1;
      continue;
    }
    if (c === '\'' || c === '"') {
      const end = src.indexOf(c, i + 1);
      if (end < 0) throw new FilterSyntaxError(`unterminated ${c === '"' ? 'double' : 'single'}-quoted value at ${i}`);
      out.push({ t: 'quoted', v: src.slice(i + 1, end), at: i });
      i = end + 1;
      continue;
    }
    let j = i;
    while (j < src.length && !BREAK.has(src[j])) j++;
    out.push({ t: 'word', v: src.slice(i, j), at: i });
    i = j;
  }
  return out;
}

const isKeyword = (tok: Token | undefined, kw: 'and' | 'or') => tok?.t === 'word' && tok.v.toLowerCase() === kw;

/** FilterParser parses one filter string; use parseFilter. */
class FilterParser {
  private pos = 0;
  constructor(private readonly toks: Token[]) {}

  parse(): FilterExpr {
    const e = this.expr(0);
    const rest = this.toks[this.pos];
    if (rest) throw new FilterSyntaxError(`unexpected ${describe(rest)} at ${rest.at}`);
    return e;
  }

  private expr(depth: number): FilterExpr {
    if (depth > MAX_DEPTH) throw new FilterSyntaxError(`parentheses nest deeper than ${MAX_DEPTH}`);
    let left = this.and(depth);
    while (isKeyword(this.toks[this.pos], 'or')) {
      this.pos++;
      left = { kind: 'or', left, right: this.and(depth) };
    }
    return left;
  }

  private and(depth: number): FilterExpr {
    let left = this.primary(depth);
    while (isKeyword(this.toks[this.pos], 'and')) {
      this.pos++;
      left = { kind: 'and', left, right: this.primary(depth) };
    }
    return left;
  }

  private primary(depth: number): FilterExpr {
    const tok = this.toks[this.pos];
    if (!tok) throw new FilterSyntaxError('expected a comparison or "(" but the filter ended');
    if (tok.t === 'lparen') {
      this.pos++;
      const inner = this.expr(depth + 1);
      const close = this.toks[this.pos];
      if (close?.t !== 'rparen') throw new FilterSyntaxError(close ? `expected ")" at ${close.at}, got ${describe(close)}` : `missing ")" for "(" at ${tok.at}`);
      this.pos++;
      return inner;
    }
    if (tok.t !== 'word' || isKeyword(tok, 'and') || isKeyword(tok, 'or')) throw new FilterSyntaxError(`expected a field name at ${tok.at}, got ${describe(tok)}`);
    const key = tok.v.toLowerCase();
    const field = Object.hasOwn(FIELD_ALIASES, key) ? FIELD_ALIASES[key] : undefined;
    if (!field) throw new FilterSyntaxError(`unknown field "${tok.v}" at ${tok.at}; fields are ${Object.keys(FIELD_ALIASES).join(', ')}`);
    const op = this.toks[this.pos + 1];
    if (op?.t !== 'op') throw new FilterSyntaxError(op ? `expected an operator after "${tok.v}" at ${op.at}, got ${describe(op)}` : `expected an operator after "${tok.v}"`);
    const value = this.toks[this.pos + 2];
    if (!value || (value.t !== 'word' && value.t !== 'quoted')) {
      throw new FilterSyntaxError(value ? `expected a value after "${tok.v}${op.v}" at ${value.at}, got ${describe(value)}` : `expected a value after "${tok.v}${op.v}"`);
    }
    this.pos += 3;
    return { kind: 'cmp', field, op: op.v, value: value.v };
  }
}

function describe(tok: Token): string {
  if (tok.t === 'lparen' || tok.t === 'rparen') return tok.t === 'lparen' ? '"("' : '")"';
  return tok.t === 'op' ? `operator "${tok.v}"` : `"${tok.v}"`;
}

/** parseFilter parses a filter string; an empty or blank filter parses to undefined (matches everything). */
export function parseFilter(src: string): ParsedFilter {
  if (src.length > MAX_FILTER_LENGTH) return { ok: false, error: `filter is longer than ${MAX_FILTER_LENGTH} characters` };
  try {
    const toks = tokenize(src);
    return { ok: true, expr: toks.length ? new FilterParser(toks).parse() : undefined };
  } catch (err) {
    if (err instanceof FilterSyntaxError) return { ok: false, error: err.message };
    throw err;
  }
}

/** evaluateFilter reports whether an event's fields satisfy a parsed filter (undefined matches everything). */
export function evaluateFilter(expr: FilterExpr | undefined, subject: FilterSubject): boolean {
  if (!expr) return true;
  if (expr.kind !== 'cmp') {
    return expr.kind === 'and'
      ? evaluateFilter(expr.left, subject) && evaluateFilter(expr.right, subject)
      : evaluateFilter(expr.left, subject) || evaluateFilter(expr.right, subject);
  }
  const actual = subject[expr.field] ?? '';
  if (expr.field === 'severity') {
    // NOTE: both sides compare by rank; an unknown word on either side never matches, not even with "!=".
    const a = severityRank(actual);
    const b = severityRank(expr.value);
    if (a === undefined || b === undefined) return false;
    return compare(a, b, expr.op);
  }
  if (expr.op === '=' || expr.op === '!=') {
    const same = actual.toLowerCase() === expr.value.toLowerCase();
    return expr.op === '=' ? same : !same;
  }
  return compare(actual, expr.value, expr.op);
}

function compare<T extends number | string>(a: T, b: T, op: FilterOp): boolean {
  switch (op) {
    case '=': return a === b;
    case '!=': return a !== b;
    case '>': return a > b;
    case '>=': return a >= b;
    case '<': return a < b;
    case '<=': return a <= b;
  }
}
