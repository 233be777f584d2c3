// Resources by kind with their status conditions (Degraded first), a create form, and one record's page with
// its YAML, conditions, history from the change log and a spec diff between two versions.
import { createTwoFilesPatch } from 'diff';
import { useEffect, useRef, useState } from 'preact/hooks';
import YAML from 'yaml';
import { api, stream } from './api.ts';
import { A, navigate } from './router.tsx';

export const KINDS = ['agent', 'tool', 'mcp_server', 'skill', 'agent.soul', 'agent.heartbeat', 'hook.binding', 'automation.job', 'automation.trigger', 'bridge.instance', 'bundle', 'bundle.activation', 'loop', 'model.curation'];

interface Condition { type: string; status: string; reason: string; message: string; last_transition_time: string }
export interface Status { observed_version: number; conditions: Condition[]; last_error: string; last_reconciled_at: string; [k: string]: unknown }
export interface Rec { kind: string; id: string; scope: { kind: string; id?: string }; owner: { kind: string; id: string }; source: { kind: string; id: string }; spec: unknown; version: number; updated_at: string }

const cond = (s: Status | undefined, type: string) => s?.conditions?.find((c) => c.type === type);
const isDegraded = (s: Status | undefined) => cond(s, 'Degraded')?.status === 'True';

/** health is one word for a record's state: Degraded, Ready, Pending (not yet observed at this version) or Unknown. */
export function health(r: Rec, s: Status | undefined): 'Degraded' | 'Ready' | 'Pending' | 'Unknown' {
  if (!s) return 'Pending';
  if (isDegraded(s)) return 'Degraded';
  if (s.observed_version < r.version) return 'Pending';
  return cond(s, 'Ready')?.status === 'True' ? 'Ready' : 'Unknown';
}

/**
 * useKind lists one kind's records with their statuses (`?include=status`, one request) and keeps both live: the
 * change watch (started at the list's revision; an `expired` frame lists again) for the records, and the status
 * watch for the statuses, whatever changed them (an edit, a controller's retry, a backend that came up). The
 * status watch starts with a snapshot of every status, again after each reconnect, so none is lost in between.
 */
function useKind(kind: string, only?: string) {
  const [records, setRecords] = useState<Map<string, Rec>>(new Map());
  const [statuses, setStatuses] = useState<Map<string, Status | undefined>>(new Map());
  const [error, setError] = useState('');
  const [loaded, setLoaded] = useState(false);
  useEffect(() => {
    let w: { close(): void } | undefined;
    let gone = false;
    setRecords(new Map());
    setStatuses(new Map());
    setLoaded(false);
    const q = only ? `&id=${encodeURIComponent(only)}` : '';
    const sw = stream(`/api/resources/status/watch?kind=${encodeURIComponent(kind)}${q}`, (m) => {
      const d = JSON.parse(m.data) as { statuses?: { id: string; status: Status | null }[]; id?: string; status?: Status | null };
      if (m.event === 'snapshot') setStatuses(new Map(d.statuses!.map((x) => [x.id, x.status ?? undefined])));
      else if (m.event === 'status') setStatuses((x) => new Map(x).set(d.id!, d.status ?? undefined));
    });
    const load = async () => {
      w?.close();
      try {
        const res = await api<{ records: (Rec & { status: Status | null })[] }>(`/api/resources/${encodeURIComponent(kind)}?include=status`);
        if (gone) return;
        const recs = res.body.records.filter((r) => !only || r.id === only);
        setRecords(new Map(recs.map(({ status: _s, ...r }) => [r.id, r])));
        // NOTE: a status the status watch already sent for a record is as new as the list's, or newer.
        setStatuses((x) => new Map([...recs.map((r) => [r.id, r.status ?? undefined] as const), ...x]));
        setLoaded(true);
        setError('');
        w = stream(`/api/resources?watch=true&kind=${encodeURIComponent(kind)}`, (m) => {
          if (m.event === 'expired') return void load();
          const change = JSON.parse(m.data) as { type: 'put' | 'delete'; record: Rec };
          if (only && change.record.id !== only) return;
          if (change.type === 'delete') {
            setRecords((x) => { const n = new Map(x); n.delete(change.record.id); return n; });
          } else setRecords((x) => new Map(x).set(change.record.id, change.record));
        }, { lastEventId: res.headers.get('x-svc-revision') ?? undefined });
      } catch (e) {
        setError((e as Error).message);
      }
    };
    void load();
    return () => { gone = true; w?.close(); sw.close(); };
  }, [kind, only]);
  return { records, statuses, error, loaded };
}

function Conditions(p: { status: Status | undefined }) {
  const cs = [...(p.status?.conditions ?? [])].sort((a, b) => (b.type === 'Degraded' && b.status === 'True' ? 1 : 0) - (a.type === 'Degraded' && a.status === 'True' ? 1 : 0));
  if (!cs.length) return <span class="muted">no status yet</span>;
  return (
    <ul class="conditions">
      {cs.map((c) => (
        <li class={`cond cond-${c.type} cond-${c.status}`} data-type={c.type} data-status={c.status}>
          <b>{c.type}</b>={c.status} <code class="reason">{c.reason}</code> <span class="message">{c.message}</span>
        </li>
      ))}
    </ul>
  );
}

export function ResourcesPage(p: { kind: string }) {
  const { kind } = p;
  const { records, statuses, error, loaded } = useKind(kind);
  const rows = [...records.values()].sort((a, b) => {
    const d = Number(isDegraded(statuses.get(b.id))) - Number(isDegraded(statuses.get(a.id)));
    return d || a.id.localeCompare(b.id);
  });
  return (
    <section>
      <nav class="kinds">{KINDS.map((k) => <A href={`/resources/${k}`} class={k === kind ? 'active' : ''}>{k}</A>)}</nav>
      <h1>{kind} <small class="muted">{rows.length} records, live</small></h1>
      {error && <p class="error">{error}</p>}
      <table class="records" data-loaded={String(loaded)}>
        <thead><tr><th>id</th><th>scope</th><th>version</th><th>state</th><th>conditions</th></tr></thead>
        <tbody>
          {rows.map((r) => {
            const s = statuses.get(r.id);
            const h = health(r, s);
            return (
              <tr data-id={r.id} data-health={h} class={`health-${h}`}>
                <td><A href={`/resources/${kind}/${encodeURIComponent(r.id)}`}>{r.id}</A></td>
                <td>{r.scope.kind}{r.scope.id ? `:${r.scope.id}` : ''}</td>
                <td>{r.version}</td>
                <td><span class={`badge badge-${h}`}>{h}</span></td>
                <td><Conditions status={s} /></td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <CreateForm kind={kind} />
    </section>
  );
}

const EXAMPLES: Record<string, string> = {
  agent: 'name: reviewer\nprompt: Review diffs.\n',
  mcp_server: 'name: everything\ncommand: npx\nargs: ["-y", "@modelcontextprotocol/server-everything", "stdio"]\n',
};

function CreateForm(p: { kind: string }) {
  const [id, setId] = useState('');
  const [scope, setScope] = useState('global');
  const [spec, setSpec] = useState(EXAMPLES[p.kind] ?? '');
  const [msg, setMsg] = useState('');
  useEffect(() => setSpec(EXAMPLES[p.kind] ?? ''), [p.kind]);
  const submit = async (e: Event) => {
    e.preventDefault();
    setMsg('creating…');
    try {
      const sc = scope === 'global' ? { kind: 'global' } : { kind: 'workspace', id: scope.replace(/^workspace:/, '') };
      const res = await api(`/api/resources/${encodeURIComponent(p.kind)}/${encodeURIComponent(id)}?wait=true`, { method: 'PUT', body: { scope: sc, spec: YAML.parse(spec), expected_version: 0 } });
      setMsg(`created ${p.kind}/${id} (version ${res.body.record.version}, reconcile ${res.headers.get('x-svc-reconcile') ?? '?'})`);
    } catch (err) {
      setMsg((err as Error).message);
    }
  };
  return (
    <form class="create" onSubmit={submit}>
      <h2>Create a {p.kind}</h2>
      <label>id <input name="id" value={id} onInput={(e) => setId(e.currentTarget.value)} required /></label>
      <label>scope <input name="scope" value={scope} onInput={(e) => setScope(e.currentTarget.value)} title="global, or a workspace id" /></label>
      <label class="block">spec (YAML) <textarea name="spec" rows={6} value={spec} onInput={(e) => setSpec(e.currentTarget.value)} /></label>
      <button type="submit">Create</button> <span class="create-result">{msg}</span>
    </form>
  );
}

interface Version { version: number; revision: number; type: 'put' | 'delete'; record: Rec }

export function RecordPage(p: { kind: string; id: string }) {
  const { kind, id } = p;
  const { records, statuses, error } = useKind(kind, id);
  const r = records.get(id);
  const s = statuses.get(id);
  const [versions, setVersions] = useState<Version[]>([]);
  const [histError, setHistError] = useState('');
  const [from, setFrom] = useState(0);
  const [to, setTo] = useState(0);
  useEffect(() => {
    api<{ history: Version[] }>(`/api/resources/${encodeURIComponent(kind)}/${encodeURIComponent(id)}/history`).then((res) => {
      setVersions(res.body.history);
      const puts = res.body.history.filter((v) => v.type === 'put');
      setTo(puts.at(-1)?.version ?? 0);
      setFrom(puts.at(-2)?.version ?? puts.at(-1)?.version ?? 0);
    }, (e) => setHistError((e as Error).message));
  }, [kind, id, r?.version]);
  const specOf = (v: number) => YAML.stringify(versions.find((x) => x.version === v && x.type === 'put')?.record.spec ?? {});
  const patch = from && to && from !== to ? createTwoFilesPatch(`version ${from}`, `version ${to}`, specOf(from), specOf(to), '', '', { context: 3 }) : '';
  return (
    <section>
      <p><A href={`/resources/${kind}`}>← {kind}</A></p>
      <h1>{kind}/{id} {r && <span class={`badge badge-${health(r, s)}`}>{health(r, s)}</span>}</h1>
      {error && <p class="error">{error}</p>}
      {!r && !error && <p class="muted">not found (or deleted)</p>}
      {r && (
        <>
          <h2>Status</h2>
          <Conditions status={s} />
          {s?.last_error && <p class="error">last error: {s.last_error}</p>}
          <h2>YAML</h2>
          <pre class="yaml">{YAML.stringify(r)}</pre>
          <EditForm rec={r} />
        </>
      )}
      <h2>History <small class="muted">(from the change log)</small></h2>
      {histError && <p class="error">{histError}</p>}
      <table class="history">
        <thead><tr><th>revision</th><th>version</th><th>change</th><th>at</th><th>from</th><th>to</th></tr></thead>
        <tbody>
          {versions.map((v) => (
            <tr data-version={v.version}>
              <td>{v.revision}</td><td>{v.version}</td><td>{v.type}</td><td>{v.record.updated_at}</td>
              <td>{v.type === 'put' && <input type="radio" name="from" checked={from === v.version} onChange={() => setFrom(v.version)} />}</td>
              <td>{v.type === 'put' && <input type="radio" name="to" checked={to === v.version} onChange={() => setTo(v.version)} />}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>Spec diff</h2>
      {from === to && <p class="muted">pick two different versions</p>}
      <pre class="diff">{hunks(patch).map((l) => <div class={l.startsWith('+') ? 'add' : l.startsWith('-') ? 'del' : l.startsWith('@@') ? 'hunk' : ''}>{l || ' '}</div>)}</pre>
    </section>
  );
}

/** hunks are a unified patch's lines from its first hunk on (no file headers; none when nothing differs). */
function hunks(patch: string): string[] {
  const lines = patch.split('\n');
  const at = lines.findIndex((l) => l.startsWith('@@'));
  return at < 0 ? [] : lines.slice(at);
}

function EditForm(p: { rec: Rec }) {
  const [spec, setSpec] = useState(YAML.stringify(p.rec.spec));
  const [msg, setMsg] = useState('');
  useEffect(() => setSpec(YAML.stringify(p.rec.spec)), [p.rec.version]);
  const save = async (e: Event) => {
    e.preventDefault();
    try {
      const r = p.rec;
      const res = await api(`/api/resources/${encodeURIComponent(r.kind)}/${encodeURIComponent(r.id)}?wait=true`, { method: 'PUT', body: { scope: r.scope, spec: YAML.parse(spec), expected_version: r.version } });
      setMsg(`saved: version ${res.body.record.version}`);
    } catch (err) {
      setMsg((err as Error).message);
    }
  };
  const del = async () => {
    if (!confirm(`Delete ${p.rec.kind}/${p.rec.id}?`)) return;
    try {
      await api(`/api/resources/${encodeURIComponent(p.rec.kind)}/${encodeURIComponent(p.rec.id)}`, { method: 'DELETE', body: { expected_version: p.rec.version } });
      navigate(`/resources/${p.rec.kind}`);
    } catch (err) {
      setMsg((err as Error).message);
    }
  };
  return (
    <form class="edit" onSubmit={save}>
      <label class="block">spec (YAML) <textarea name="spec" rows={8} value={spec} onInput={(e) => setSpec(e.currentTarget.value)} /></label>
      <button type="submit">Save (version {p.rec.version})</button> <button type="button" onClick={del}>Delete</button> <span class="edit-result">{msg}</span>
    </form>
  );
}
