import type { Command } from 'commander';
import type { Identity, Task, TaskRun } from '../tasks/types.ts';
import { enc, type ApiClient } from './client.ts';
import { UsageError } from './errors.ts';
import { age, emit, table, type ClientOf, type Format } from './output.ts';

/** RunView is a task run as the API shows it (runtime/tasks/records.ts runView): its lease deadline as a time. */
export type RunView = Omit<TaskRun, 'queued_ms' | 'lease_until_ms' | 'lease_ms'> & { lease_until: string };

/** LEASED are the run statuses that hold a lease (the run's holder and deadline mean something). */
const LEASED = new Set(['claimed', 'starting', 'running']);

/** PAGE is how many tasks one list request asks for (the route's maximum). */
const PAGE = 500;

/** holderOf names who holds a run's lease: the claiming identity and, once bound, its session. */
export function holderOf(r: Pick<RunView, 'status' | 'claimed_by' | 'session_id'>): string {
  if (!LEASED.has(r.status)) return '';
  const who = r.claimed_by ? identity(r.claimed_by) : '';
  return [who, r.session_id && !who.includes(r.session_id) ? `session/${r.session_id}` : ''].filter(Boolean).join(' ');
}

const identity = (i: Identity) => (i.ref ? `${i.kind}/${i.ref}` : i.kind);

/** leaseLeft is how long a leased run's lease has left (`4m`, `12s`, `expired`), or '' when it holds none. */
export function leaseLeft(r: Pick<RunView, 'status' | 'lease_until'>, now = Date.now()): string {
  if (!LEASED.has(r.status) || !r.lease_until) return '';
  const s = Math.round((Date.parse(r.lease_until) - now) / 1000);
  if (s <= 0) return 'expired';
  return s < 120 ? `${s}s` : `${Math.floor(s / 60)}m`;
}

/** listTasks reads the tasks a query selects, page by page, up to `max`. */
async function listTasks(api: ApiClient, q: URLSearchParams, max: number): Promise<Task[]> {
  const out: Task[] = [];
  let cursor = '';
  do {
    const page = new URLSearchParams(q);
    page.set('limit', String(Math.min(PAGE, max - out.length)));
    if (cursor) page.set('cursor', cursor);
    const res: { tasks: Task[]; next_cursor?: string } = await api.get(`/api/tasks?${page}`);
    out.push(...res.tasks);
    cursor = res.next_cursor ?? '';
  } while (cursor && out.length < max);
  return out;
}

function showRuns(runs: RunView[]): void {
  table(['RUN', 'STATUS', 'ATTEMPT', 'HOLDER', 'LEASE', 'AGE', 'ERROR'], runs.map((r) => [
    r.id, r.status, String(r.attempt), holderOf(r), leaseLeft(r), r.queued_at ? age(r.queued_at) : '', r.error,
  ]));
}

function showTask(t: Task, format: Format, run?: Record<string, unknown> | null): void {
  if (format === 'json' || format === 'yaml') return emit(run === undefined ? { task: t } : { task: t, run }, format);
  const where = t.workspace_id ? `workspace ${t.workspace_id}` : 'global';
  const started = run ? `: run ${run.id} ${run.status} (attempt ${run.attempt})` : '';
  process.stdout.write(`${t.id} ${t.status} (${where})${started}\n`);
}

function positive(v: string | undefined, flag: string): number {
  if (v === undefined) return Infinity;
  if (!/^[1-9]\d*$/.test(v)) throw new UsageError(`${flag} must be a positive integer, got "${v}"`);
  return Number(v);
}

/** taskCommands adds `tasks list|get|start|cancel`: the operator's side of the task routes (README "Tasks"). */
export function taskCommands(p: Command, clientOf: ClientOf): void {
  const t = p.command('tasks').description('tasks and their runs: list, get (with each run and who holds its lease), start, cancel');

  t.command('list')
    .description('list tasks (every page, or --limit of them)')
    .option('--status <status>', 'only tasks in this status (ready, in_progress, completed, ...)')
    .option('-w, --workspace <id>', 'only tasks of this workspace')
    .option('--owner <owner>', 'only tasks of this owner')
    .option('--limit <n>', 'at most n tasks')
    .action(async (o, cmd) => {
      const max = positive(o.limit, '--limit');
      const { api, format } = clientOf(cmd);
      const q = new URLSearchParams();
      for (const k of ['status', 'workspace', 'owner'] as const) if (o[k]) q.set(k, o[k]);
      const tasks = await listTasks(api, q, max);
      if (format === 'json' || format === 'yaml') return emit({ tasks }, format);
      table(['ID', 'STATUS', 'PRIORITY', 'WORKSPACE', 'TITLE', 'AGE'], tasks.map((x) => [x.id, x.status, x.priority, x.workspace_id || 'global', x.title, age(x.created_at)]));
    });

  t.command('get')
    .description('a task with its runs: status, attempt, who holds the lease and for how long')
    .argument('<task>')
    .action(async (id: string, _o, cmd) => {
      const { api, format } = clientOf(cmd);
      const { task } = await api.get<{ task: Task }>(`/api/tasks/${enc(id)}`);
      const { runs } = await api.get<{ runs: RunView[] }>(`/api/tasks/${enc(id)}/runs`);
      if (format === 'json' || format === 'yaml') return emit({ task, runs }, format);
      showTask(task, format);
      process.stdout.write(`${task.title}${task.paused ? ` (paused${task.paused_reason ? `: ${task.paused_reason}` : ''})` : ''}\n`);
      if (runs.length) showRuns(runs);
    });

  t.command('start')
    .description('enqueue a run of a task (exit 1 when the service refuses, e.g. a run is already live)')
    .argument('<task>')
    .option('--idempotency-key <key>', 'a repeated key returns the first start instead of another run')
    .action(async (id: string, o, cmd) => {
      const { api, format } = clientOf(cmd);
      const res = await api.ok<{ task: Task; run: Record<string, unknown> | null }>('POST', `/api/tasks/${enc(id)}/start`, o.idempotencyKey ? { idempotency_key: o.idempotencyKey } : {});
      showTask(res.task, format, res.run);
    });

  t.command('cancel')
    .description('cancel a task and its unfinished runs')
    .argument('<task>')
    .option('--reason <text>', 'why (recorded on the task)')
    .action(async (id: string, o, cmd) => {
      const { api, format } = clientOf(cmd);
      showTask((await api.ok<{ task: Task }>('POST', `/api/tasks/${enc(id)}/cancel`, o.reason ? { reason: o.reason } : {})).task, format);
    });
}
