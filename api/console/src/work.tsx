// Work the service does on its own: tasks with their runs and who holds each lease, automation jobs with their
// next fire time, a run-now button and their runs, and notification deliveries. Each page reads its lists when
// it opens, after each action it takes, on "Reload", and whenever the event bus stream (/api/events/stream)
// reports an event of its family, so a change made elsewhere (svcctl, curl, another tab) shows up by itself;
// the automation page also re-reads on the automation.job change watch (a job written elsewhere shows up).
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, stream } from './api.ts';
import { A } from './router.tsx';

interface Identity { kind: string; ref: string }
interface Task { id: string; title: string; status: string; priority: string; workspace_id: string; paused: boolean; max_attempts: number; created_at: string; updated_at: string }
interface TaskRun { id: string; task_id: string; status: string; attempt: number; queued_at: string; session_id: string; claimed_by: Identity | null; lease_until: string; error: string }
interface Job { id: string; scope: { kind: string; id?: string }; enabled: boolean; state: string; next_fire_at: string | null; last_run: AutoRun | null }
interface AutoRun { id: string; kind: string; job_id: string; trigger_id: string; workspace_id: string; status: string; reason: string; error: string; session_id: string; attempt: number; created_at: string; finished_at: string }
interface Delivery { id: string; event_type: string; preset: string; bridge_id: string; status: string; attempts: number; last_status: number; last_error: string; created_at: string; updated_at: string }

/** LEASED are the run statuses that hold a lease. */
const LEASED = ['claimed', 'starting', 'running'];
/** OPEN are the task statuses whose runs may still hold a lease (the tasks page reads their runs). */
const OPEN = ['draft', 'pending', 'blocked', 'ready', 'in_progress'];

/** holder names who holds a run's lease: the claiming identity and its session once one is bound. */
const holder = (r: TaskRun) => (LEASED.includes(r.status) ? [r.claimed_by ? `${r.claimed_by.kind}/${r.claimed_by.ref}` : '', r.session_id ? `session ${r.session_id}` : ''].filter(Boolean).join(', ') : '');

/**
 * useLoad runs `load` when the page opens and whenever `deps` change, keeping its last value and error;
 * `reload` runs it again (after an action, or from the Reload button).
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): { value: T | undefined; error: string; loaded: boolean; reload: () => void } {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [error, setError] = useState('');
  const [loaded, setLoaded] = useState(false);
  const [epoch, setEpoch] = useState(0);
  useEffect(() => {
    let gone = false;
    load().then((v) => { if (!gone) { setValue(v); setError(''); setLoaded(true); } }, (e) => { if (!gone) setError((e as Error).message); });
    return () => { gone = true; };
  }, [...deps, epoch]);
  return { value, error, loaded, reload: () => setEpoch((x) => x + 1) };
}

/** REFETCH_MS is how long a page lets a burst of bus events gather before it reads its lists again. */
const REFETCH_MS = 200;

/** LiveState is where a page's bus stream stands: `open` once the service has fixed where it reads from. */
export type LiveState = 'connecting' | 'open' | 'retrying' | 'closed';

/**
 * useLive reads the page's lists again (`reload`) after events of `types` (exact or `prefix.*`) on the event bus
 * that `wanted` accepts: once per burst, REFETCH_MS after its first event. NOTE: the first event schedules the
 * read and later ones join it (no trailing debounce), so a busy bus cannot postpone the page's refresh for ever.
 * The stream resumes after its last event when the connection drops, and closes when the page does.
 */
export function useLive(types: string[], reload: () => void, wanted: (data: any) => boolean = () => true): LiveState {
  const [state, setState] = useState<LiveState>('connecting');
  // NOTE: the stream outlives renders; it calls the latest callbacks (a task page reused for another id).
  const latest = useRef({ reload, wanted });
  latest.current = { reload, wanted };
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const query = types.map((t) => `type=${encodeURIComponent(t)}`).join('&');
    const s = stream(`/api/events/stream?${query}`, (m) => {
      if (timer !== undefined || (m.event !== 'expired' && !latest.current.wanted(JSON.parse(m.data)))) return;
      timer = setTimeout(() => { timer = undefined; latest.current.reload(); }, REFETCH_MS);
    }, { onState: setState });
    return () => { clearTimeout(timer); s.close(); };
  }, []);
  return state;
}

/** Live says whether the page follows its family's events (`live`) or is reconnecting. */
export function Live(p: { state: LiveState }) {
  return <small class="live muted" data-live={p.state}>{p.state === 'open' ? 'live' : p.state}</small>;
}

export function Reload(p: { onClick: () => void }) {
  return <button class="reload" onClick={p.onClick}>Reload</button>;
}

function RunsTable(p: { runs: TaskRun[] }) {
  return (
    <table class="runs">
      <thead><tr><th>run</th><th>task</th><th>status</th><th>attempt</th><th>held by</th><th>lease until</th><th>queued</th><th>error</th></tr></thead>
      <tbody>
        {p.runs.map((r) => (
          <tr data-id={r.id} data-status={r.status}>
            <td><code>{r.id}</code></td><td><A href={`/tasks/${encodeURIComponent(r.task_id)}`}>{r.task_id}</A></td><td>{r.status}</td><td>{r.attempt}</td>
            <td class="holder">{holder(r)}</td><td>{LEASED.includes(r.status) ? r.lease_until : ''}</td><td>{r.queued_at}</td><td class="error">{r.error}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function TasksPage() {
  const [status, setStatus] = useState(new URLSearchParams(location.search).get('status') ?? '');
  const { value, error, loaded, reload } = useLoad(async () => {
    const [tasks, sched] = await Promise.all([
      api<{ tasks: Task[] }>(`/api/tasks?limit=500${status ? `&status=${encodeURIComponent(status)}` : ''}`),
      api<{ scheduler: { paused: boolean; draining: boolean; queued: number; leased: number } }>('/api/scheduler'),
    ]);
    // NOTE: the leases live on the runs; only tasks that can still have a live run are asked for theirs.
    const open = tasks.body.tasks.filter((t) => OPEN.includes(t.status)).slice(0, 100);
    const runs = (await Promise.all(open.map((t) => api<{ runs: TaskRun[] }>(`/api/tasks/${encodeURIComponent(t.id)}/runs`)))).flatMap((r) => r.body.runs);
    return { tasks: tasks.body.tasks, scheduler: sched.body.scheduler, leased: runs.filter((r) => LEASED.includes(r.status)) };
  }, [status]);
  const live = useLive(['task.*', 'scheduler.*'], reload);
  const tasks = [...(value?.tasks ?? [])].sort((a, b) => b.created_at.localeCompare(a.created_at) || b.id.localeCompare(a.id));
  const s = value?.scheduler;
  return (
    <section>
      <h1>Tasks <small class="muted">{tasks.length}</small> <Reload onClick={reload} /> <Live state={live} /></h1>
      {error && <p class="error">{error}</p>}
      {s && <p class="scheduler">scheduler {s.paused ? 'paused' : s.draining ? 'draining' : 'running'}: {s.queued} queued, {s.leased} leased</p>}
      <h2>Leases <small class="muted">who holds what</small></h2>
      {value && !value.leased.length && <p class="muted no-leases">no run holds a lease</p>}
      {value && value.leased.length > 0 && <RunsTable runs={value.leased} />}
      <h2>All tasks</h2>
      <p>
        <label>status <select name="status" value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
          {['', 'draft', 'pending', 'blocked', 'ready', 'in_progress', 'completed', 'failed', 'canceled'].map((x) => <option value={x}>{x || 'any'}</option>)}
        </select></label>
      </p>
      <table class="tasks" data-loaded={String(loaded)}>
        <thead><tr><th>id</th><th>status</th><th>priority</th><th>workspace</th><th>title</th><th>created</th></tr></thead>
        <tbody>{tasks.map((t) => <tr data-id={t.id} data-status={t.status}><td><A href={`/tasks/${encodeURIComponent(t.id)}`}>{t.id}</A></td><td>{t.status}{t.paused ? ' (paused)' : ''}</td><td>{t.priority}</td><td>{t.workspace_id || 'global'}</td><td>{t.title}</td><td>{t.created_at}</td></tr>)}</tbody>
      </table>
    </section>
  );
}

export function TaskPage(p: { id: string }) {
  const base = `/api/tasks/${encodeURIComponent(p.id)}`;
  const [msg, setMsg] = useState('');
  const { value, error, loaded, reload } = useLoad(async () => {
    const [t, r] = await Promise.all([api<{ task: Task & Record<string, unknown> }>(base), api<{ runs: TaskRun[] }>(`${base}/runs`)]);
    return { task: t.body.task, runs: r.body.runs };
  }, [p.id]);
  const live = useLive(['task.*'], reload, (ev) => ev.data?.task_id === p.id);
  const act = async (what: 'start' | 'cancel') => {
    if (what === 'cancel' && !confirm(`Cancel task ${p.id} and its unfinished runs?`)) return;
    try {
      const r = await api(`${base}/${what}`, { method: 'POST', body: {} });
      setMsg(what === 'start' ? `started: run ${r.body.run?.id ?? '(none)'}` : `canceled`);
    } catch (e) {
      setMsg((e as Error).message);
    }
    reload();
  };
  const t = value?.task;
  return (
    <section>
      <p><A href="/tasks">← tasks</A></p>
      <h1>Task {p.id} {t && <span class="badge task-status">{t.status}</span>} <Reload onClick={reload} /> <Live state={live} /></h1>
      {error && <p class="error">{error}</p>}
      {t && (
        <>
          <p><b>{t.title}</b> <span class="muted">{t.workspace_id ? `workspace ${t.workspace_id}` : 'global'}, priority {t.priority}, at most {t.max_attempts} attempts{t.paused ? ', paused' : ''}</span></p>
          <p>
            <button class="start" onClick={() => act('start')}>Start (enqueue a run)</button>{' '}
            <button class="cancel" onClick={() => act('cancel')}>Cancel</button> <span class="action-result">{msg}</span>
          </p>
        </>
      )}
      <h2>Runs</h2>
      <div data-loaded={String(loaded)}><RunsTable runs={value?.runs ?? []} /></div>
    </section>
  );
}

export function AutomationPage() {
  const [msg, setMsg] = useState('');
  const [workspaces, setWorkspaces] = useState<{ id: string; name?: string; root_exists?: boolean }[]>([]);
  const [ws, setWs] = useState('');
  const { value, error, loaded, reload } = useLoad(async () => {
    const [jobs, runs] = await Promise.all([api<{ jobs: Job[] }>('/api/automation/jobs'), api<{ runs: AutoRun[] }>('/api/automation/runs?limit=100')]);
    return { jobs: jobs.body.jobs, runs: runs.body.runs };
  }, []);
  const live = useLive(['automation.*'], reload);
  useEffect(() => {
    api('/api/workspaces').then((r) => {
      const usable = (r.body.workspaces ?? []).filter((w: { root_exists?: boolean }) => w.root_exists !== false);
      setWorkspaces(usable);
      setWs(usable[0]?.id ?? '');
    }, () => undefined);
    // NOTE: a job written elsewhere (svcctl, GitOps) changes the list; the change watch says when.
    const w = stream('/api/resources?watch=true&kind=automation.job', () => reload());
    return () => w.close();
  }, []);
  const fire = async (j: Job) => {
    try {
      // NOTE: a global job runs in the workspace picked here; a workspace job in its own.
      const r = await api(`/api/automation/jobs/${encodeURIComponent(j.id)}/trigger`, { method: 'POST', body: j.scope.kind === 'global' ? { workspace_id: ws } : {} });
      setMsg(`fired ${j.id}: run ${r.body.run.id} ${r.body.run.status}`);
    } catch (e) {
      setMsg((e as Error).message);
    }
    reload();
  };
  const jobs = [...(value?.jobs ?? [])].sort((a, b) => a.id.localeCompare(b.id));
  return (
    <section>
      <h1>Automation <small class="muted">{jobs.length} jobs</small> <Reload onClick={reload} /> <Live state={live} /></h1>
      {error && <p class="error">{error}</p>}
      <p>
        <label>global jobs run in <select name="workspace" value={ws} onChange={(e) => setWs(e.currentTarget.value)}>{workspaces.map((w) => <option value={w.id}>{w.name ?? w.id}</option>)}</select></label>{' '}
        <span class="action-result">{msg}</span>
      </p>
      <table class="jobs" data-loaded={String(loaded)}>
        <thead><tr><th>job</th><th>scope</th><th>state</th><th>next fire</th><th>last run</th><th></th></tr></thead>
        <tbody>
          {jobs.map((j) => (
            <tr data-id={j.id}>
              <td><A href={`/resources/automation.job/${encodeURIComponent(j.id)}`}>{j.id}</A></td>
              <td>{j.scope.kind}{j.scope.id ? `:${j.scope.id}` : ''}</td>
              <td><span class={`badge badge-${j.state}`}>{j.state}</span>{j.enabled ? '' : ' (disabled)'}</td>
              <td class="next-fire">{j.next_fire_at ?? '–'}</td>
              <td>{j.last_run ? `${j.last_run.status} ${j.last_run.created_at}` : '–'}</td>
              <td><button class="run-now" onClick={() => fire(j)}>Run now</button></td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>Runs <small class="muted">newest first</small></h2>
      <table class="auto-runs">
        <thead><tr><th>run</th><th>of</th><th>status</th><th>reason / error</th><th>session</th><th>attempt</th><th>created</th><th>finished</th></tr></thead>
        <tbody>
          {(value?.runs ?? []).map((r) => (
            <tr data-id={r.id} data-status={r.status}>
              <td><code>{r.id}</code></td><td>{r.job_id ? `job ${r.job_id}` : `trigger ${r.trigger_id}`}</td><td>{r.status}</td>
              <td>{[r.reason, r.error].filter(Boolean).join(': ')}</td>
              <td>{r.session_id && <A href={`/sessions/${encodeURIComponent(r.workspace_id)}/${encodeURIComponent(r.session_id)}`}>{r.session_id}</A>}</td>
              <td>{r.attempt}</td><td>{r.created_at}</td><td>{r.finished_at}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

export function DeliveriesPage() {
  const [status, setStatus] = useState('');
  const { value, error, loaded, reload } = useLoad(async () => (await api<{ deliveries: Delivery[] }>(`/api/notifications/deliveries?limit=200${status ? `&status=${status}` : ''}`)).body.deliveries, [status]);
  const live = useLive(['notification.delivery_updated'], reload);
  return (
    <section>
      <h1>Notification deliveries <small class="muted">{value?.length ?? 0}, newest first</small> <Reload onClick={reload} /> <Live state={live} /></h1>
      {error && <p class="error">{error}</p>}
      <p>
        <label>status <select name="status" value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
          {['', 'pending', 'delivered', 'failed', 'skipped'].map((x) => <option value={x}>{x || 'any'}</option>)}
        </select></label>{' '}
        <A href="/resources/bridge.instance">bridges</A>
      </p>
      <table class="deliveries" data-loaded={String(loaded)}>
        <thead><tr><th>event</th><th>preset</th><th>bridge</th><th>status</th><th>attempts</th><th>last answer</th><th>created</th><th>updated</th></tr></thead>
        <tbody>
          {(value ?? []).map((d) => (
            <tr data-id={d.id} data-status={d.status}>
              <td>{d.event_type}</td><td>{d.preset}</td><td><A href={`/resources/bridge.instance/${encodeURIComponent(d.bridge_id)}`}>{d.bridge_id}</A></td>
              <td>{d.status}</td><td>{d.attempts}</td><td class="error">{d.last_status ? `HTTP ${d.last_status}` : ''}{d.last_error ? ` ${d.last_error}` : ''}</td>
              <td>{d.created_at}</td><td>{d.updated_at}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

