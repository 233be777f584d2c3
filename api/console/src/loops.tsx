// Loop runs: a workspace's runs with their aggregates (read again on every loop.run.* bus event), and one run's
// graph with each node's status, live from the run's own event stream (each node event moves its node at once; the
// run is read again after each burst, which is authoritative), with approve / request changes / reject for the gate
// a run is parked on.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, stream } from './api.ts';
import { A } from './router.tsx';
import { Live, Reload, useLive, useLoad, type LiveState } from './work.tsx';

interface LoopRun {
  id: string; workspace_id: string; loop_name: string; status: string; generation: number; active_gate_id: string; tokens_used: number;
  budget_tokens: number; created_at: string; status_cause?: string; status_reason?: string;
}
interface Execution { node_id: string; item_index: number; status: string; attempt?: number; error?: string; output?: unknown }
interface GraphNode { id: string; kind: string; depends_on?: string[] }
interface Detail {
  run: LoopRun;
  executed_definition: { graph: { nodes: GraphNode[]; edges?: { from: string; to: string; when?: string }[] }; annotations?: { node_id: string; x: number; y: number }[] };
  generations: { generation: number; outputs: Execution[] }[];
}

const TERMINAL = ['done', 'no-op', 'blocked', 'failed', 'exhausted', 'stalled'];
/** EVENT_STATE maps a run event of one node execution to the state it moves the execution to. */
const EVENT_STATE: Record<string, string> = { node_running: 'running', node_succeeded: 'succeeded', node_failed: 'failed', node_skipped: 'skipped', node_waiting: 'waiting' };
const REFETCH_MS = 200;

export function LoopRunsPage() {
  const [workspaces, setWorkspaces] = useState<{ id: string; name?: string }[]>([]);
  const [ws, setWs] = useState(new URLSearchParams(location.search).get('ws') ?? '');
  useEffect(() => {
    api('/api/workspaces').then((r) => {
      const all = r.body.workspaces ?? [];
      setWorkspaces(all);
      setWs((cur) => cur || all[0]?.id || '');
    }, () => undefined);
  }, []);
  const { value, error, loaded, reload } = useLoad(async () => {
    if (!ws) return undefined;
    return (await api<{ aggregates: Record<string, number>; runs: LoopRun[] }>(`/api/workspaces/${encodeURIComponent(ws)}/loop-runs?limit=200`)).body;
  }, [ws]);
  const live = useLive(['loop.run.*'], reload, (ev) => ev.workspace_id === ws);
  const a = value?.aggregates;
  return (
    <section>
      <h1>Loop runs <small class="muted">{value?.runs.length ?? 0}</small> <Reload onClick={reload} /> <Live state={live} /></h1>
      {error && <p class="error">{error}</p>}
      <p>
        <label>workspace <select name="workspace" value={ws} onChange={(e) => setWs(e.currentTarget.value)}>{workspaces.map((w) => <option value={w.id}>{w.name ?? w.id}</option>)}</select></label>
        {a && <span class="aggregates muted">{a.total} runs: {a.live} live, {a.succeeded} succeeded, {a.failed} failed</span>}
      </p>
      <table class="loop-runs" data-loaded={String(loaded)}>
        <thead><tr><th>run</th><th>loop</th><th>status</th><th>generation</th><th>gate</th><th>tokens</th><th>created</th></tr></thead>
        <tbody>
          {(value?.runs ?? []).map((r) => (
            <tr data-id={r.id} data-status={r.status}>
              <td><A href={`/loops/${encodeURIComponent(r.workspace_id)}/${encodeURIComponent(r.id)}`}>{r.id}</A></td><td>{r.loop_name}</td>
              <td><span class={`badge run-${r.status}`}>{r.status}</span></td><td>{r.generation}</td><td>{r.active_gate_id}</td>
              <td>{r.tokens_used}{r.budget_tokens ? `/${r.budget_tokens}` : ''}</td><td>{r.created_at}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** layout places each node: the definition's annotations where given, else by depth (column) and order (row). */
function layout(d: Detail): { pos: Map<string, { x: number; y: number }>; edges: [string, string, string?][]; width: number; height: number } {
  const nodes = d.executed_definition.graph.nodes;
  const edges: [string, string, string?][] = [];
  for (const n of nodes) for (const u of n.depends_on ?? []) edges.push([u, n.id]);
  for (const e of d.executed_definition.graph.edges ?? []) if (!edges.some(([f, t]) => f === e.from && t === e.to)) edges.push([e.from, e.to, e.when]);
  const ups = new Map(nodes.map((n) => [n.id, edges.filter(([, t]) => t === n.id).map(([f]) => f)]));
  const depth = new Map<string, number>();
  const depthOf = (id: string, seen = new Set<string>()): number => {
    if (depth.has(id)) return depth.get(id)!;
    if (seen.has(id)) return 0;
    seen.add(id);
    const v = Math.max(-1, ...(ups.get(id) ?? []).map((u) => depthOf(u, seen))) + 1;
    depth.set(id, v);
    return v;
  };
  const rows = new Map<number, number>();
  const pos = new Map<string, { x: number; y: number }>();
  const notes = new Map((d.executed_definition.annotations ?? []).map((a) => [a.node_id, a]));
  for (const n of nodes) {
    const note = notes.get(n.id);
    if (note) { pos.set(n.id, { x: note.x, y: note.y }); continue; }
    const c = depthOf(n.id);
    const r = rows.get(c) ?? 0;
    rows.set(c, r + 1);
    pos.set(n.id, { x: 20 + c * 190, y: 20 + r * 74 });
  }
  const xs = [...pos.values()];
  return { pos, edges, width: Math.max(400, ...xs.map((p) => p.x + 190)), height: Math.max(120, ...xs.map((p) => p.y + 74)) };
}

/**
 * nodeStatus sums a node's executions of a generation up: one state, and `k/n` when it ran per fan-out item. A node
 * with none is `pending` while the run is live and `not-run` once it ended (a fan-out of no items, a run stopped
 * before it): an ended run has nothing left pending.
 */
function nodeStatus(execs: Execution[], ended: boolean): { status: string; count: string } {
  if (!execs.length) return { status: ended ? 'not-run' : 'pending', count: '' };
  const states = execs.map((e) => e.status);
  const order = ['running', 'waiting', 'queued', 'pending', 'failed', 'succeeded', 'skipped'];
  const status = states.length === 1 ? states[0]
    : order.find((s) => ['running', 'waiting', 'queued', 'pending'].includes(s) && states.includes(s))
      ?? (states.includes('failed') ? 'failed' : states.every((s) => s === 'skipped') ? 'skipped' : 'succeeded');
  const items = execs.filter((e) => e.item_index >= 0);
  return { status, count: items.length ? `${items.filter((e) => e.status === 'succeeded').length}/${items.length}` : '' };
}

export function LoopRunPage(p: { ws: string; id: string }) {
  const base = `/api/workspaces/${encodeURIComponent(p.ws)}/loop-runs/${encodeURIComponent(p.id)}`;
  const [msg, setMsg] = useState('');
  const { value, error, reload } = useLoad(async () => (await api<Detail>(base)).body, [p.id]);
  // Node states the run's event stream reported since the last read (`gen:node:item` → state).
  const [overlay, setOverlay] = useState<Map<string, string>>(new Map());
  const [runStatus, setRunStatus] = useState('');
  const [live, setLive] = useState<LiveState>('connecting');
  const latest = useRef(reload);
  latest.current = reload;
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let last: ReturnType<typeof setTimeout> | undefined;
    const s = stream(`${base}/events`, (m) => {
      const ev = JSON.parse(m.data) as { kind: string; payload: Record<string, any> };
      const state = EVENT_STATE[ev.kind];
      if (state && ev.payload.node_id !== undefined) {
        const st = ev.kind === 'node_failed' && ev.payload.will_retry ? 'queued' : state;
        setOverlay((o) => new Map(o).set(`${ev.payload.generation}:${ev.payload.node_id}:${ev.payload.item_index ?? -1}`, st));
      }
      if (ev.kind === 'status_changed') {
        setRunStatus(String(ev.payload.status));
        // NOTE: the stream ends after the terminal status_changed; closing it keeps it from reconnecting. One more read
        // a moment later is the page's last word: a read that crossed the run's last events cannot leave it stale.
        if (TERMINAL.includes(String(ev.payload.status))) {
          s.close();
          last = setTimeout(() => latest.current(), 4 * REFETCH_MS);
        }
      }
      if (timer === undefined) timer = setTimeout(() => { timer = undefined; latest.current(); }, REFETCH_MS);
    }, { onState: setLive, lastEventId: '0' });
    return () => { clearTimeout(timer); clearTimeout(last); s.close(); };
  }, [base]);
  // NOTE: a fresh read is authoritative: the stream's states apply only until the next one.
  useEffect(() => { setOverlay(new Map()); }, [value]);

  const decide = async (decision: 'approve' | 'request_changes' | 'reject') => {
    const gate = value?.run.active_gate_id;
    if (!gate) return;
    try {
      await api(`${base}/approve`, { method: 'POST', body: { gate_id: gate, decision } });
      setMsg(`gate ${gate}: ${decision}`);
    } catch (e) {
      setMsg((e as Error).message);
    }
    reload();
  };
  const stop = async () => {
    if (!confirm(`Stop loop run ${p.id}?`)) return;
    try { await api(`${base}/stop`, { method: 'POST', body: {} }); setMsg('stopped'); } catch (e) { setMsg((e as Error).message); }
    reload();
  };

  if (!value) return <section><p><A href="/loops">← loop runs</A></p>{error ? <p class="error">{error}</p> : <p class="muted">loading…</p>}</section>;
  const run = value.run;
  const status = TERMINAL.includes(runStatus) ? runStatus : run.status;
  const gen = run.generation;
  const execs = (id: string) => {
    const rows = value.generations.find((g) => g.generation === gen)?.outputs.filter((o) => o.node_id === id) ?? [];
    const merged = rows.map((e) => ({ ...e, status: overlay.get(`${gen}:${id}:${e.item_index}`) ?? e.status }));
    const seen = overlay.get(`${gen}:${id}:-1`);
    return merged.length ? merged : seen ? [{ node_id: id, item_index: -1, status: seen }] : [];
  };
  const g = layout(value);
  const parked = status === 'needs-approval' && run.active_gate_id;
  const gateNode = parked ? run.active_gate_id.replace(/\[\d+\]$/, '') : '';
  return (
    <section>
      <p><A href={`/loops?ws=${encodeURIComponent(p.ws)}`}>← loop runs</A></p>
      <h1>Loop run {run.id} <span class={`badge run-status run-${status}`} data-status={status}>{status}</span> <Reload onClick={reload} /> <Live state={live} /></h1>
      {error && <p class="error">{error}</p>}
      <p class="muted">
        loop <b>{run.loop_name}</b>, generation {gen}, tokens {run.tokens_used}{run.budget_tokens ? `/${run.budget_tokens}` : ''}
        {run.status_cause ? `; ${run.status_cause}${run.status_reason ? `: ${run.status_reason}` : ''}` : ''}
      </p>
      {parked && (
        <div class="approvals gate-panel" data-gate={run.active_gate_id}>
          Gate <code>{run.active_gate_id}</code> waits for a decision:{' '}
          <button class="approve" onClick={() => decide('approve')}>Approve</button>{' '}
          <button class="request-changes" onClick={() => decide('request_changes')}>Request changes</button>{' '}
          <button class="reject" onClick={() => decide('reject')}>Reject</button>
        </div>
      )}
      <p>{!TERMINAL.includes(status) && <button class="stop" onClick={stop}>Stop</button>} <span class="action-result">{msg}</span></p>
      <svg class="loop-graph" width={g.width} height={g.height} data-generation={gen}>
        <defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#98a2b3" /></marker></defs>
        {g.edges.map(([f, t, when]) => {
          const a = g.pos.get(f);
          const b = g.pos.get(t);
          if (!a || !b) return null;
          return (
            <g class="edge">
              <line x1={a.x + 160} y1={a.y + 25} x2={b.x} y2={b.y + 25} stroke="#98a2b3" marker-end="url(#arrow)" />
              {when && <text x={(a.x + 160 + b.x) / 2} y={(a.y + b.y) / 2 + 20} class="when">{when}</text>}
            </g>
          );
        })}
        {value.executed_definition.graph.nodes.map((n) => {
          const at = g.pos.get(n.id)!;
          const s = nodeStatus(execs(n.id), TERMINAL.includes(status));
          return (
            <g class={`node node-${s.status}${n.id === gateNode ? ' parked' : ''}`} data-node={n.id} data-status={s.status} transform={`translate(${at.x},${at.y})`}>
              <rect width="160" height="50" rx="6" />
              <text x="8" y="20" class="id">{n.id}</text>
              <text x="8" y="38" class="kind">{n.kind} · {s.status.replace('-', ' ')}{s.count ? ` ${s.count}` : ''}</text>
            </g>
          );
        })}
      </svg>
      <h2>Node executions <small class="muted">generation {gen}</small></h2>
      <table class="executions">
        <thead><tr><th>node</th><th>item</th><th>status</th><th>attempt</th><th>error</th></tr></thead>
        <tbody>{(value.generations.find((x) => x.generation === gen)?.outputs ?? []).map((e) => <tr data-node={e.node_id} data-status={e.status}><td>{e.node_id}</td><td>{e.item_index >= 0 ? e.item_index : ''}</td><td>{e.status}</td><td>{e.attempt ?? ''}</td><td class="error">{e.error ?? ''}</td></tr>)}</tbody>
      </table>
    </section>
  );
}

