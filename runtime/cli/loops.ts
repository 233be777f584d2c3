import type { Command } from 'commander';
import { ApiError, CliError, ExitCode, UsageError } from './errors.ts';
import { enc, type ApiClient } from './client.ts';
import { age, emit, table, type ClientOf, type Format } from './output.ts';
import { readSse } from './sse.ts';

/** TERMINAL are the run statuses a run never leaves; SUCCESS those that count as success (exit 0). */
const TERMINAL = new Set(['done', 'no-op', 'blocked', 'failed', 'exhausted', 'stalled']);
const SUCCESS = new Set(['done', 'no-op']);

/** LoopRunView is the part of a LoopRun svcctl prints. */
interface LoopRunView {
  id: string; loop_name: string; status: string; generation: number; active_gate_id: string; tokens_used: number; budget_tokens: number;
  created_at: string; status_cause?: string; status_reason?: string; workspace_id: string;
}

/** LoopRunEvent is one row of a run's event stream. */
interface LoopRunEvent { seq: number; kind: string; at: string; payload: Record<string, unknown> }

const runsPath = (ws: string) => `/api/workspaces/${enc(ws)}/loop-runs`;

/**
 * parseInputs reads `--input name=value` pairs over `--inputs <json>`. A pair's value is taken by the type the loop
 * declares for that input (`types`): number/integer, boolean, array/object as JSON, anything else as the string
 * given, so `-i version=2.0` stays the string "2.0" for a string input.
 */
export function parseInputs(pairs: string[], json?: string, types: Record<string, string | undefined> = {}): Record<string, unknown> {
  let out: Record<string, unknown> = {};
  if (json !== undefined) {
    try { out = JSON.parse(json); } catch (err) { throw new UsageError(`--inputs must be a JSON object: ${(err as Error).message}`); }
    if (!out || typeof out !== 'object' || Array.isArray(out)) throw new UsageError('--inputs must be a JSON object');
  }
  for (const p of pairs) {
    const eq = p.indexOf('=');
    if (eq <= 0) throw new UsageError(`--input takes name=value, got "${p}"`);
    const name = p.slice(0, eq);
    const raw = p.slice(eq + 1);
    const type = types[name];
    if (type === 'number' || type === 'integer') {
      if (raw.trim() === '' || !Number.isFinite(Number(raw))) throw new UsageError(`--input ${name} must be a number, got "${raw}"`);
      out[name] = Number(raw);
    } else if (type === 'boolean') {
      if (raw !== 'true' && raw !== 'false') throw new UsageError(`--input ${name} must be true or false, got "${raw}"`);
      out[name] = raw === 'true';
    } else if (type === 'array' || type === 'object') {
      try { out[name] = JSON.parse(raw); } catch { throw new UsageError(`--input ${name} must be JSON (${type}), got "${raw}"`); }
    } else out[name] = raw;
  }
  return out;
}

/** eventLine is one run event as a line of text: sequence, kind, and the payload's telling fields. */
export function eventLine(e: LoopRunEvent): string {
  const p = e.payload ?? {};
  const node = p.node_id !== undefined ? ` ${String(p.node_id)}${typeof p.item_index === 'number' && p.item_index >= 0 ? `[${p.item_index}]` : ''}` : '';
  const bits = ['status', 'from', 'cause', 'gate_id', 'outcome', 'action', 'attempt', 'reason', 'error']
    .filter((k) => p[k] !== undefined && p[k] !== '' && p[k] !== null)
    .map((k) => `${k}=${typeof p[k] === 'string' ? (p[k] as string).replace(/\n/g, '\\n') : JSON.stringify(p[k])}`);
  return `${e.seq} ${e.kind}${node}${bits.length ? ` ${bits.join(' ')}` : ''}`;
}

function showRun(run: LoopRunView, format: Format): void {
  if (format === 'json' || format === 'yaml') return emit({ run }, format);
  const gate = run.active_gate_id ? `, gate ${run.active_gate_id}` : '';
  const why = run.status_cause ? ` (${run.status_cause}${run.status_reason ? `: ${run.status_reason}` : ''})` : '';
  process.stdout.write(`${run.id} ${run.status}${why} loop ${run.loop_name}, generation ${run.generation}${gate}, tokens ${run.tokens_used}${run.budget_tokens ? `/${run.budget_tokens}` : ''}\n`);
}

/**
 * follow streams a run's events after `after` until its terminal status_changed (the stream then ends), `count`
 * events, or the signal; each event is printed unless `quiet`. Answers the last status seen.
 */
async function follow(api: ApiClient, ws: string, runId: string, o: { after: number; count: number; signal: AbortSignal; format: Format; quiet?: boolean }): Promise<string> {
  let left = o.count;
  let status = '';
  const res = await api.raw('GET', `${runsPath(ws)}/${enc(runId)}/events?after_sequence=${o.after}`, { headers: { accept: 'text/event-stream' }, signal: o.signal });
  if (res.status >= 400) throw new ApiError(res.status, await res.json().catch(() => undefined), `events of ${runId}`);
  await readSse(res, (ev) => {
    const e = JSON.parse(ev.data) as LoopRunEvent;
    if (e.kind === 'status_changed') status = String(e.payload.status ?? '');
    if (!o.quiet) process.stdout.write(o.format === 'json' || o.format === 'yaml' ? `${JSON.stringify(e)}\n` : `${eventLine(e)}\n`);
    return !(e.kind === 'status_changed' && TERMINAL.has(status)) && --left > 0;
  });
  return status;
}

/** withTimeout runs `fn` with a signal that fires after `ms` (no timeout when undefined); answers whether it fired. */
async function withTimeout<T>(ms: number | undefined, fn: (signal: AbortSignal) => Promise<T>): Promise<{ value?: T; timedOut: boolean }> {
  const ac = new AbortController();
  const timer = ms !== undefined ? setTimeout(() => ac.abort(), ms) : undefined;
  try {
    return { value: await fn(ac.signal), timedOut: false };
  } catch (err) {
    if (ac.signal.aborted) return { timedOut: true };
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * loopCommands adds `loops run|list|get|approve|events`, the operator's side of loop runs (README "Loops"). Exit
 * codes follow the CLI's contract: 0 ok (with --wait: the run ended done or no-op); 1 the service refused (409 on a
 * gate that is not parked, 404 on a run that does not exist) or, with --wait, the run ended otherwise or is still
 * live at --timeout; 2 usage; 3 unreachable.
 */
export function loopCommands(p: Command, clientOf: ClientOf, duration: (v: string) => number): void {
  const l = p.command('loops').description('loop runs: start one, list, read a run with its nodes, approve a parked gate, follow its events');

  l.command('run')
    .description('start a run of a loop definition (--wait: follow it to its end; exit 1 unless it ends done or no-op)')
    .argument('<loop>', 'the loop definition\'s name')
    .requiredOption('-w, --workspace <id>', 'the workspace of the loop')
    .option('-i, --input <name=value>', 'a run input (repeatable; typed as the loop declares it)', (v: string, acc: string[]) => [...acc, v], [] as string[])
    .option('--inputs <json>', 'the run inputs as one JSON object (--input pairs override)')
    .option('--dry-run', 'resolve the plan without starting a run')
    .option('--wait', 'follow the run until it ends, printing its events')
    .option('--timeout <duration>', 'with --wait: give up after this long (exit 1)')
    .action(async (name: string, o, cmd) => {
      const { api, format } = clientOf(cmd);
      // NOTE: the pairs take the types the loop declares for its inputs (one read of the definition).
      const types: Record<string, string | undefined> = {};
      for (const pair of o.input as string[]) if (pair.indexOf('=') <= 0) throw new UsageError(`--input takes name=value, got "${pair}"`);
      if (o.input.length) {
        const { loop } = await api.get<{ loop: { definition?: { inputs?: Record<string, { type?: string }> } } }>(`/api/workspaces/${enc(o.workspace)}/loops/${enc(name)}`);
        for (const [k, v] of Object.entries(loop.definition?.inputs ?? {})) types[k] = v?.type;
      }
      const inputs = parseInputs(o.input, o.inputs, types);
      const path = `/api/workspaces/${enc(o.workspace)}/loops/${enc(name)}/run${o.dryRun ? '?dry=true' : ''}`;
      const res = await api.ok<{ run?: LoopRunView; dry_run?: unknown }>('POST', path, { inputs });
      if (o.dryRun) return emit(res, format === 'yaml' ? 'yaml' : 'json');
      const run = res.run!;
      if (!o.wait) return showRun(run, format);
      if (format === 'text' || format === 'wide') process.stdout.write(`${run.id} started\n`);
      const ms = o.timeout ? duration(o.timeout) : undefined;
      const r = await withTimeout(ms, (signal) => follow(api, o.workspace, run.id, { after: 0, count: Infinity, signal, format }));
      const final = (await api.get<{ run: LoopRunView }>(`${runsPath(o.workspace)}/${enc(run.id)}`)).run;
      if (r.timedOut && !TERMINAL.has(final.status)) throw new CliError(`loop run ${run.id} is still ${final.status} after ${o.timeout}`, ExitCode.failed);
      if (!SUCCESS.has(final.status)) throw new CliError(`loop run ${run.id} ended ${final.status}${final.status_cause ? ` (${final.status_cause}${final.status_reason ? `: ${final.status_reason}` : ''})` : ''}`, ExitCode.failed);
    });

  l.command('list')
    .description('list the runs of a workspace (newest first) with their aggregates')
    .requiredOption('-w, --workspace <id>', 'the workspace')
    .option('--loop <name>', 'only runs of this loop')
    .option('--status <status>', 'only runs in this status')
    .option('--live [bool]', 'only live runs (--live, --live true); --live false: only ended ones')
    .option('--limit <n>', 'at most n runs')
    .action(async (o, cmd) => {
      const { api, format } = clientOf(cmd);
      // NOTE: a bare --live is a flag (as the README writes it); with a value it must be true or false.
      if (o.live === true) o.live = 'true';
      if (o.live !== undefined && o.live !== 'true' && o.live !== 'false') throw new UsageError(`--live takes true or false, not "${o.live}"`);
      const q = new URLSearchParams();
      for (const k of ['loop', 'status', 'live', 'limit'] as const) if (o[k] !== undefined) q.set(k, String(o[k]));
      const res = await api.get<{ aggregates: Record<string, number>; runs: LoopRunView[] }>(`${runsPath(o.workspace)}${q.size ? `?${q}` : ''}`);
      if (format === 'json' || format === 'yaml') return emit(res, format);
      table(['RUN', 'LOOP', 'STATUS', 'GEN', 'GATE', 'TOKENS', 'AGE'], res.runs.map((r) => [r.id, r.loop_name, r.status, String(r.generation), r.active_gate_id, String(r.tokens_used), age(r.created_at)]));
      const a = res.aggregates;
      process.stdout.write(`${a.total} runs: ${a.live} live, ${a.succeeded} succeeded, ${a.failed} failed\n`);
    });

  l.command('get')
    .description('a run with each node execution: generation, node, item, status, attempt')
    .argument('<run>')
    .requiredOption('-w, --workspace <id>', 'the workspace of the run')
    .action(async (id: string, o, cmd) => {
      const { api, format } = clientOf(cmd);
      const d = await api.get<{ run: LoopRunView; generations: { generation: number; outputs: { node_id: string; item_index: number; status: string; attempt?: number; error?: string }[] }[] }>(`${runsPath(o.workspace)}/${enc(id)}`);
      if (format === 'json' || format === 'yaml') return emit(d, format);
      showRun(d.run, format);
      const rows = d.generations.flatMap((g) => g.outputs.map((x) => [String(g.generation), x.node_id, x.item_index >= 0 ? String(x.item_index) : '', x.status, String(x.attempt ?? ''), x.error ?? '']));
      if (rows.length) table(['GEN', 'NODE', 'ITEM', 'STATUS', 'ATTEMPT', 'ERROR'], rows);
    });

  l.command('approve')
    .description('decide the gate a run is parked on (exit 1 when the run is not waiting on that gate)')
    .argument('<run>')
    .argument('<gate>', 'the gate id (the run\'s active_gate_id)')
    .requiredOption('-w, --workspace <id>', 'the workspace of the run')
    .option('--decision <decision>', 'approve | request_changes | reject', 'approve')
    .action(async (id: string, gate: string, o, cmd) => {
      if (!['approve', 'request_changes', 'reject'].includes(o.decision)) throw new UsageError(`--decision must be approve, request_changes or reject, got "${o.decision}"`);
      const { api, format } = clientOf(cmd);
      await api.ok('POST', `${runsPath(o.workspace)}/${enc(id)}/approve`, { gate_id: gate, decision: o.decision });
      const { run } = await api.get<{ run: LoopRunView }>(`${runsPath(o.workspace)}/${enc(id)}`);
      if (format === 'json' || format === 'yaml') return emit({ ok: true, run }, format);
      process.stdout.write(`${id}: gate ${gate} ${o.decision}; `);
      showRun(run, format);
    });

  l.command('events')
    .description("print a run's events (after --after), then follow it live until it ends")
    .argument('<run>')
    .requiredOption('-w, --workspace <id>', 'the workspace of the run')
    .option('--after <sequence>', 'only events after this sequence', '0')
    .option('--count <n>', 'stop after n events')
    .option('--timeout <duration>', 'stop following after this long')
    .action(async (id: string, o, cmd) => {
      if (!/^\d+$/.test(o.after)) throw new UsageError(`--after must be a sequence number, got "${o.after}"`);
      if (o.count !== undefined && !/^[1-9]\d*$/.test(o.count)) throw new UsageError(`--count must be a positive integer, got "${o.count}"`);
      const { api, format } = clientOf(cmd);
      await withTimeout(o.timeout ? duration(o.timeout) : undefined, (signal) => follow(api, o.workspace, id, { after: Number(o.after), count: o.count ? Number(o.count) : Infinity, signal, format }));
    });
}
