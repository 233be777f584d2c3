import { Command, CommanderError, Option } from 'commander';
import { createTwoFilesPatch } from 'diff';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import type { ResourceRecord, ResourceStatus } from '../../store/types.ts';
import { FIELD_VALIDATION, type FieldValidation } from '../validation/field-validation.ts';
import { fireCommand } from './automation.ts';
import { apply, canonicalView, degradedOf, pool, pruneCandidates, readRecord, type Outcome } from './apply.ts';
import { ApiClient, enc } from './client.ts';
import { resolveEndpoint } from './config.ts';
import { ApiError, CliError, ExitCode, UsageError } from './errors.ts';
import { readManifests } from './manifests.ts';
import { age, defaultFormat, emit, reasonOf, statusWord, table, type Format } from './output.ts';
import { sessionCommands } from './sessions.ts';
import { parseSelector } from './source.ts';
import { taskCommands } from './tasks.ts';
import { loopCommands } from './loops.ts';
import { watchChanges } from './watch.ts';

const EXIT_HELP = `
Exit codes (for CI):
  0  success (diff: no differences)
  1  diff found differences; apply had a conflict, a refused write or a Degraded record (--wait); not found;
     the service refused a command (e.g. tasks start of a canceled task); fire: the run was skipped or failed
  2  usage: bad flags, unreadable or invalid manifests
  3  the service could not be reached

Configuration: flags (--server, --token, --context), else SVC_URL / SVC_TOKEN, else the context of
$SVCCTL_CONFIG or ~/.config/svcctl/config.yaml (current-context, contexts: [{name, server, token}]),
else ${'http://127.0.0.1:8080'}.`;

/** duration reads `500ms`, `30s`, `5m` or a bare number of seconds. */
export function duration(v: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(v.trim());
  if (!m) throw new UsageError(`"${v}" is not a duration (e.g. 500ms, 30s, 5m)`);
  return Math.round(Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 'ms']);
}

const collect = (v: string, prev: string[] = []) => [...prev, v];

/** Globals are the options every command shares. */
interface Globals { server?: string; token?: string; context?: string; output?: Format }

function clientOf(cmd: Command): { api: ApiClient; format: Format } {
  const g = cmd.optsWithGlobals() as Globals;
  return { api: new ApiClient(resolveEndpoint(g)), format: g.output ?? defaultFormat() };
}

function dryRunOf(v: string | boolean | undefined): boolean {
  if (v === undefined || v === false || v === 'none') return false;
  if (v === true || v === 'server') return true;
  throw new UsageError(`--dry-run=${v}: only "server" (the service runs every check and stores nothing) or "none"`);
}

const VALIDATE_HELP = 'unknown fields: strict refuses the record (the default), warn applies it without them with a warning each, ignore applies it';

/** validateOf reads `--validate`, as kubectl's: strict, warn or ignore. */
function validateOf(v: string): FieldValidation {
  if (!(FIELD_VALIDATION as readonly string[]).includes(v)) throw new UsageError(`--validate=${v}: must be one of ${FIELD_VALIDATION.join(', ')}`);
  return v as FieldValidation;
}

/** warn prints one warning as kubectl does: `Warning: …` on stderr. */
const warn = (message: string) => void process.stderr.write(`Warning: ${message}\n`);

function progress(): ((done: number, total: number) => void) | undefined {
  if (!process.stderr.isTTY) return undefined;
  return (done, total) => {
    if (done === total || done % 10 === 0) process.stderr.write(`\r${done}/${total} records${done === total ? '\n' : ''}`);
  };
}

function report(results: Outcome[], format: Format, dryRun: boolean): number {
  const summary: Record<string, number> = {};
  for (const r of results) summary[r.action] = (summary[r.action] ?? 0) + 1;
  if (format === 'json' || format === 'yaml') emit({ dry_run: dryRun, results, summary }, format);
  else {
    for (const r of results) {
      const why = r.reason || r.message ? ` (${[r.reason, r.message].filter(Boolean).join(': ')})` : '';
      process.stdout.write(`${r.kind}/${r.id} ${r.action}${dryRun ? ' (server dry run)' : ''}${why}\n`);
    }
  }
  const bad = results.filter((r) => r.action === 'conflict' || r.action === 'failed' || r.action === 'degraded');
  for (const r of bad) process.stderr.write(`error: ${r.kind}/${r.id} ${r.action}: ${[r.reason, r.message].filter(Boolean).join(': ')}\n`);
  return bad.length ? ExitCode.failed : ExitCode.ok;
}

async function statusOf(api: ApiClient, r: ResourceRecord): Promise<ResourceStatus | undefined> {
  const res = await api.call('GET', `/api/resources/${enc(r.kind)}/${enc(r.id)}/status`);
  return res.status === 200 ? res.body.status : undefined;
}

/** program builds the svcctl command tree; each action sets `process.exitCode`. */
export function program(): Command {
  const p = new Command('svcctl')
    .description('GitOps client of the Agent Runtime Control Service: apply, diff, get, delete, watch resources; sessions, tasks, loop runs, fire automation jobs')
    .option('--server <url>', 'service URL (env SVC_URL)')
    .option('--token <token>', 'bearer token (env SVC_TOKEN)')
    .option('--context <name>', 'context of the config file')
    .addOption(new Option('-o, --output <format>', 'output format (default: text on a terminal, json otherwise)').choices(['text', 'json', 'yaml', 'wide']))
    .addHelpText('after', EXIT_HELP)
    .showHelpAfterError()
    .exitOverride();

  p.command('apply')
    .description('create or update the records of manifest files (YAML, multi-document, or JSON)')
    .requiredOption('-f, --filename <path>', 'a file or directory (repeatable)', collect)
    .option('-R, --recursive', 'read directories recursively')
    .option('--prune', 'delete records of this source that the manifests no longer name (needs --selector)')
    .option('-l, --selector <source=name>', 'the source the records belong to (default source=default)')
    .option('--dry-run [strategy]', '"server": the service checks every record and stores nothing')
    .option('--wait', 'wait until each record is reconciled; fail on Degraded')
    .option('--timeout <duration>', 'how long --wait waits in all', '60s')
    .option('--concurrency <n>', 'records written at once', '16')
    .option('--validate <mode>', VALIDATE_HELP, 'strict')
    .action(async (o, cmd) => {
      const source = parseSelector(o.selector);
      if (source === '') throw new UsageError(`--selector must be source=<name> (letters, digits, _ and -), got "${o.selector}"`);
      if (o.prune && source === undefined) throw new UsageError('--prune needs --selector source=<name>: it never deletes records of other sources');
      const dryRun = dryRunOf(o.dryRun);
      const validate = validateOf(o.validate);
      const manifests = readManifests(o.filename, !!o.recursive);
      const { api, format } = clientOf(cmd);
      const results = await apply(api, manifests, {
        source: source ?? 'default', prune: !!o.prune, dryRun, wait: !!o.wait, timeoutMs: duration(o.timeout),
        concurrency: Math.max(1, Number(o.concurrency) || 16), onProgress: progress(), validate, onWarning: warn,
      });
      process.exitCode = report(results, format, dryRun);
    });

  p.command('diff')
    .description('unified diff of the live records against the manifests (canonical specs); exit 1 when they differ')
    .requiredOption('-f, --filename <path>', 'a file or directory (repeatable)', collect)
    .option('-R, --recursive', 'read directories recursively')
    .option('-l, --selector <source=name>', 'also show the records of this source that apply --prune would delete')
    .option('--validate <mode>', VALIDATE_HELP, 'strict')
    .action(async (o, cmd) => {
      const source = parseSelector(o.selector);
      if (source === '') throw new UsageError(`--selector must be source=<name>, got "${o.selector}"`);
      const validate = validateOf(o.validate);
      const manifests = readManifests(o.filename, !!o.recursive);
      // NOTE: a manifest with a typo differs from what it means to say, whatever the live record holds.
      const unknown = manifests.flatMap((m) => m.unknown.map((p) => `${m.kind}/${m.id}: unknown field "${p}"`));
      if (validate === 'strict' && unknown.length) {
        for (const u of unknown) process.stderr.write(`error: ${u}\n`);
        process.exitCode = ExitCode.failed;
        return;
      }
      if (validate === 'warn') unknown.forEach(warn);
      const { api } = clientOf(cmd);
      const y = (v: unknown) => (v === undefined ? '' : YAML.stringify(v, { sortMapEntries: true }));
      const patches = await pool(manifests, 16, async (m) => {
        const live = await readRecord(api, m.kind, m.id);
        const a = live ? y(canonicalView(live.scope, live.spec)) : '';
        const b = y(canonicalView(m.scope, m.canonical));
        return a === b ? '' : createTwoFilesPatch(`live/${m.kind}/${m.id}`, `manifest/${m.kind}/${m.id}`, a, b);
      });
      if (source !== undefined) {
        for (const r of await pruneCandidates(api, manifests, source)) {
          patches.push(createTwoFilesPatch(`live/${r.kind}/${r.id}`, `manifest/${r.kind}/${r.id} (pruned)`, y(canonicalView(r.scope, r.spec)), ''));
        }
      }
      const out = patches.filter(Boolean).join('');
      process.stdout.write(out);
      process.exitCode = out ? ExitCode.failed : ExitCode.ok;
    });

  p.command('get')
    .description('list records (of a kind), or get one, with their reconcile status')
    .argument('[kind]', 'resource kind (all kinds when left out)')
    .argument('[id]', 'record id')
    .option('-l, --selector <source=name>', 'only records of this svcctl source')
    .action(async (kind: string | undefined, id: string | undefined, o, cmd) => {
      const { api, format } = clientOf(cmd);
      let records: ResourceRecord[];
      if (id) {
        if (!kind) throw new UsageError('get <kind> <id>');
        records = [(await api.get(`/api/resources/${enc(kind)}/${enc(id)}`)).record];
      } else {
        records = (await api.get(kind ? `/api/resources/${enc(kind)}?include=status` : '/api/resources?include=status')).records;
        const source = parseSelector(o.selector);
        if (source) records = records.filter((r) => r.source.kind === 'svcctl' && r.source.id.startsWith(`${source}.`));
      }
      // NOTE: a list carries each status (?include=status); one record reads its own.
      const statuses = id ? [await statusOf(api, records[0])] : records.map((r) => (r as ResourceRecord & { status?: ResourceStatus | null }).status ?? undefined);
      records = records.map(({ status: _s, ...r }: ResourceRecord & { status?: unknown }) => r);
      if (format === 'json' || format === 'yaml') {
        const items = records.map((r, i) => ({ ...r, status: statuses[i] ?? null }));
        emit(id ? items[0] : { records: items }, format);
        return;
      }
      const wide = format === 'wide';
      table(
        ['KIND', 'ID', 'VERSION', 'STATUS', 'AGE', ...(wide ? ['SCOPE', 'SOURCE', 'REASON'] : [])],
        records.map((r, i) => [
          r.kind, r.id, String(r.version), statusWord(r, statuses[i]), age(r.updated_at),
          ...(wide ? [r.scope.kind === 'workspace' ? `workspace/${r.scope.id}` : 'global', `${r.source.kind}/${r.source.id}`, reasonOf(statuses[i])] : []),
        ]),
      );
    });

  p.command('delete')
    .description('delete records by kind and id, or those of manifest files')
    .argument('[kind]')
    .argument('[ids...]')
    .option('-f, --filename <path>', 'a file or directory (repeatable)', collect)
    .option('-R, --recursive', 'read directories recursively')
    .option('--ignore-not-found', 'a missing record is not an error')
    .option('--dry-run [strategy]', '"server": check, delete nothing')
    .action(async (kind: string | undefined, ids: string[], o, cmd) => {
      const dryRun = dryRunOf(o.dryRun);
      const targets = o.filename ? readManifests(o.filename, !!o.recursive).map((m) => ({ kind: m.kind, id: m.id })) : ids.map((id) => ({ kind: kind!, id }));
      if (!targets.length) throw new UsageError('delete <kind> <id...> or delete -f <file>');
      const { api, format } = clientOf(cmd);
      const results: Outcome[] = [];
      for (const t of targets) {
        const live = await readRecord(api, t.kind, t.id);
        if (!live) {
          if (!o.ignoreNotFound) results.push({ ...t, action: 'failed', reason: 'NotFound', message: `${t.kind} "${t.id}" does not exist` });
          continue;
        }
        const r = await api.call('DELETE', `/api/resources/${enc(t.kind)}/${enc(t.id)}${dryRun ? '?dry_run=true' : ''}`, { expected_version: live.version });
        results.push(r.status === 204 ? { ...t, action: 'deleted', version: live.version } : { ...t, action: r.status === 409 ? 'conflict' : 'failed', reason: r.body?.diagnostic?.code, message: r.body?.error });
      }
      process.exitCode = report(results, format, dryRun);
    });

  p.command('status')
    .description("a record's reconcile status (exit 1 when Degraded), or a count of records by status")
    .argument('[kind]')
    .argument('[id]')
    .action(async (kind: string | undefined, id: string | undefined, _o, cmd) => {
      const { api, format } = clientOf(cmd);
      if (kind && id) {
        const rec: ResourceRecord = (await api.get(`/api/resources/${enc(kind)}/${enc(id)}`)).record;
        const st: ResourceStatus = (await api.get(`/api/resources/${enc(kind)}/${enc(id)}/status`)).status;
        if (format === 'json' || format === 'yaml') emit({ kind, id, version: rec.version, state: statusWord(rec, st), status: st }, format);
        else {
          process.stdout.write(`${kind}/${id} version ${rec.version}, observed ${st.observed_version}: ${statusWord(rec, st)}\n`);
          table(['CONDITION', 'STATUS', 'REASON', 'MESSAGE'], st.conditions.map((c) => [c.type, c.status, c.reason, c.message]));
        }
        process.exitCode = degradedOf(st) ? ExitCode.failed : ExitCode.ok;
        return;
      }
      const records: (ResourceRecord & { status: ResourceStatus | null })[] = (await api.get(kind ? `/api/resources/${enc(kind)}?include=status` : '/api/resources?include=status')).records;
      const statuses = records.map((r) => r.status ?? undefined);
      const counts: Record<string, Record<string, number>> = {};
      records.forEach((r, i) => {
        const w = statusWord(r, statuses[i]);
        (counts[r.kind] ??= {})[w] = (counts[r.kind][w] ?? 0) + 1;
      });
      if (format === 'json' || format === 'yaml') emit({ kinds: counts }, format);
      else table(['KIND', 'READY', 'PENDING', 'NOTREADY', 'DEGRADED'], Object.entries(counts).map(([k, c]) => [k, ...['Ready', 'Pending', 'NotReady', 'Degraded'].map((w) => String(c[w] ?? 0))]));
      process.exitCode = Object.values(counts).some((c) => c.Degraded) ? ExitCode.failed : ExitCode.ok;
    });

  p.command('watch')
    .description('stream record changes (put/delete) as they happen; reconnects from the last revision after a drop, lists again after `expired`')
    .argument('[kind]')
    .option('--since <revision>', 'start after this revision (else now)')
    .option('--count <n>', 'stop after n changes')
    .option('--timeout <duration>', 'stop after this long')
    .action(async (kind: string | undefined, o, cmd) => {
      const { api, format } = clientOf(cmd);
      if (o.since !== undefined && !/^\d+$/.test(String(o.since))) throw new UsageError(`--since must be a revision number, got "${o.since}"`);
      const ac = new AbortController();
      const timer = o.timeout ? setTimeout(() => ac.abort(), duration(o.timeout)) : undefined;
      try {
        await watchChanges(api, { kind, since: o.since !== undefined ? Number(o.since) : undefined, count: o.count ? Number(o.count) : Infinity, signal: ac.signal, format });
      } finally {
        clearTimeout(timer);
      }
    });

  sessionCommands(p, clientOf, duration);
  taskCommands(p, clientOf);
  loopCommands(p, clientOf, duration);
  fireCommand(p, clientOf, duration);
  return p;
}

/** main runs svcctl and returns its exit code (errors go to stderr). */
export async function main(argv: string[]): Promise<number> {
  try {
    await program().parseAsync(argv, { from: 'user' });
    return Number(process.exitCode ?? 0);
  } catch (err) {
    if (err instanceof CommanderError) {
      return err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.exitCode === 0 ? ExitCode.ok : ExitCode.usage;
    }
    if (err instanceof CliError) {
      process.stderr.write(`error: ${err.message}\n`);
      return err.code;
    }
    process.stderr.write(`error: ${(err as Error).stack ?? err}\n`);
    return ExitCode.failed;
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = await main(process.argv.slice(2));
}
