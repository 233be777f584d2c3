// Workspaces, sessions, and one session's live event stream with a prompt box and its pending approvals.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, headers, stream } from './api.ts';
import { A, navigate } from './router.tsx';

interface Workspace { id: string; name?: string; root_dir?: string; root_exists?: boolean; created_at?: string }
interface Session { id: string; workspace_id: string; agent_name?: string; state: string; badge?: string; created_at?: string; updated_at?: string }
interface SEvent { sequence: number; type: string; turn_id: string; content: Record<string, any>; timestamp?: string; stop_reason?: string }

export function WorkspacesPage() {
  const [list, setList] = useState<Workspace[]>([]);
  const [error, setError] = useState('');
  useEffect(() => { api('/api/workspaces').then((r) => setList(r.body.workspaces ?? []), (e) => setError(e.message)); }, []);
  return (
    <section>
      <h1>Workspaces</h1>
      {error && <p class="error">{error}</p>}
      <table class="workspaces">
        <thead><tr><th>id</th><th>name</th><th>root</th><th></th></tr></thead>
        <tbody>{list.map((w) => <tr data-id={w.id}><td>{w.id}</td><td>{w.name}</td><td><code>{w.root_dir}</code>{w.root_exists === false && <> <span class="badge badge-Degraded root-gone">root gone</span></>}</td><td><A href={`/sessions?workspace=${encodeURIComponent(w.id)}`}>sessions</A></td></tr>)}</tbody>
      </table>
    </section>
  );
}

export function SessionsPage() {
  const wsFilter = new URLSearchParams(location.search).get('workspace') ?? '';
  const [list, setList] = useState<Session[]>([]);
  const [workspaces, setWorkspaces] = useState<Workspace[]>([]);
  const [ws, setWs] = useState(wsFilter);
  const [error, setError] = useState('');
  const load = () => api(`/api/sessions${wsFilter ? `?workspace=${encodeURIComponent(wsFilter)}` : ''}`).then((r) => setList(newestFirst(r.body.sessions ?? [])), (e) => setError(e.message));
  useEffect(() => {
    void load();
    // NOTE: a workspace whose root directory is gone cannot run a session: it is not offered.
    api('/api/workspaces').then((r) => {
      const usable = (r.body.workspaces as Workspace[] ?? []).filter((w) => w.root_exists !== false);
      setWorkspaces(usable);
      if (!usable.some((w) => w.id === ws)) setWs(usable[0]?.id ?? '');
    }, () => undefined);
  }, []);
  const create = async () => {
    try {
      const r = await api('/api/sessions', { method: 'POST', body: { workspace: ws } });
      navigate(`/sessions/${encodeURIComponent(r.body.session.workspace_id)}/${encodeURIComponent(r.body.session.id)}`);
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return (
    <section>
      <h1>Sessions</h1>
      {error && <p class="error">{error}</p>}
      <p>
        <select name="workspace" value={ws} onChange={(e) => setWs(e.currentTarget.value)}>{workspaces.map((w) => <option value={w.id}>{w.name ?? w.id}</option>)}</select>{' '}
        <button class="new-session" onClick={create} disabled={!ws}>New session (default agent)</button>
      </p>
      <table class="sessions">
        <thead><tr><th>id</th><th>workspace</th><th>agent</th><th>state</th><th>updated</th></tr></thead>
        <tbody>{list.map((s) => <tr data-id={s.id}><td><A href={`/sessions/${encodeURIComponent(s.workspace_id)}/${encodeURIComponent(s.id)}`}>{s.id}</A></td><td>{s.workspace_id}</td><td>{s.agent_name}</td><td>{s.badge ?? s.state}</td><td>{s.updated_at}</td></tr>)}</tbody>
      </table>
    </section>
  );
}

/** newestFirst orders sessions by creation, newest first (the API lists them in no particular order). */
function newestFirst(list: Session[]): Session[] {
  return [...list].sort((a, b) => (b.created_at ?? '').localeCompare(a.created_at ?? '') || b.id.localeCompare(a.id));
}

/** summary is one line for an event: its text (an `error` event's error), title, tool or stop reason. */
function summary(e: SEvent): string {
  const c = e.content ?? {};
  if (e.type === 'session_stopped') return `stopped: ${e.stop_reason ?? ''}${c.failure?.summary ? ` (${c.failure.summary})` : ''}`;
  if (e.type === 'error') return String(c.error ?? c.message ?? c.text ?? '');
  if (e.type === 'permission') return `${c.action} ${c.title ?? ''}${c.decision ? ` → ${c.decision}` : ''}`;
  return String(c.text ?? c.title ?? c.kind ?? c.tool_name ?? c.status ?? '');
}

export function SessionPage(p: { ws: string; id: string }) {
  const [session, setSession] = useState<Session | undefined>();
  const [events, setEvents] = useState<SEvent[]>([]);
  const [conn, setConn] = useState('connecting');
  const [text, setText] = useState('');
  const [msg, setMsg] = useState('');
  const bottom = useRef<HTMLDivElement>(null);
  const base = `/api/workspaces/${encodeURIComponent(p.ws)}/sessions/${encodeURIComponent(p.id)}`;
  useEffect(() => {
    setEvents([]);
    api(base).then((r) => setSession(r.body.session), (e) => setMsg(e.message));
    let reread: ReturnType<typeof setTimeout> | undefined;
    const s = stream(`${base}/stream`, (m) => {
      const e = JSON.parse(m.data) as SEvent;
      setEvents((x) => (x.some((y) => y.sequence === e.sequence && e.type !== 'session_stopped') ? x : [...x, e]));
      // NOTE: the badge (running, idle, stopped...) is re-read after events, at most once per half second.
      if (!reread) reread = setTimeout(() => { reread = undefined; api(base).then((r) => setSession(r.body.session), () => undefined); }, 500);
    }, { lastEventId: '0', onState: setConn });
    return () => { s.close(); clearTimeout(reread); };
  }, [p.ws, p.id]);
  useEffect(() => bottom.current?.scrollIntoView({ block: 'end' }), [events.length]);
  // NOTE: pending = permission requests without a later answer (granted, denied or lapsed) for the same request_id.
  const answered = new Set(events.filter((e) => e.type === 'permission' && e.content.action !== 'request').map((e) => e.content.request_id));
  const pending = events.filter((e) => e.type === 'permission' && e.content.action === 'request' && !answered.has(e.content.request_id));
  const send = async (e: Event) => {
    e.preventDefault();
    if (!text.trim()) return;
    setMsg('sending…');
    try {
      // NOTE: the answer is this turn's UI message stream; the session stream already shows its events, so the
      // console reads only the headers and lets the turn run on (it does not depend on this connection).
      const res = await fetch(`${base}/prompt`, { method: 'POST', headers: headers({ 'Content-Type': 'application/json', Accept: 'text/event-stream' }), body: JSON.stringify({ message: text }) });
      if (res.status >= 400) setMsg(`${res.status}: ${await res.text()}`);
      else { setMsg(''); setText(''); void res.body?.cancel(); }
    } catch (err) {
      setMsg((err as Error).message);
    }
  };
  const decide = async (requestId: string, decision: string) => {
    try {
      await api(`${base}/approve`, { method: 'POST', body: { request_id: requestId, decision } });
    } catch (err) {
      setMsg((err as Error).message);
    }
  };
  return (
    <section>
      <p><A href="/sessions">← sessions</A></p>
      <h1>Session {p.id} <span class="badge">{session?.badge ?? session?.state}</span> <small class="muted stream-state">stream {conn}</small></h1>
      {pending.length > 0 && (
        <div class="approvals">
          <h2>Pending approvals</h2>
          {pending.map((e) => (
            <div class="approval" data-request={e.content.request_id}>
              <b>{e.content.title || 'permission'}</b> {e.content.resource && <code>{e.content.resource}</code>}{' '}
              <button class="approve" onClick={() => decide(e.content.request_id, 'allow-once')}>Approve</button>{' '}
              <button class="deny" onClick={() => decide(e.content.request_id, 'reject-once')}>Deny</button>
            </div>
          ))}
        </div>
      )}
      <div class="events">
        {events.map((e) => (
          <div class={`event event-${e.type}`} data-type={e.type} data-seq={e.sequence}>
            <span class="seq">{e.sequence}</span> <span class="type">{e.type}</span> <span class="text">{summary(e)}</span>
          </div>
        ))}
        <div ref={bottom} />
      </div>
      <form class="prompt" onSubmit={send}>
        <textarea name="prompt" rows={3} value={text} placeholder="Prompt (the scripted agent acts out lines such as /permission deploy or /progress 3 200)" onInput={(e) => setText(e.currentTarget.value)} />
        <button type="submit">Send</button> <span class="prompt-result">{msg}</span>
      </form>
    </section>
  );
}

