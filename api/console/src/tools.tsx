// Tools with their decision (which layer decided, and why), and the dashboard of queue depths and reconcile
// latency from /metrics, re-read when the resource watch stream says something changed (no polling).
import { useEffect, useState } from 'preact/hooks';
import { api, stream } from './api.ts';

interface Layer { layer: string; result: string; reason_codes: string[] }
interface ToolView { descriptor: { tool_id: string; display_title: string; risk: string; source: { kind: string } }; availability: { available: boolean; reason_codes: string[] }; decision: { callable: boolean; approval_required: boolean; reason_codes: string[]; layers: Layer[] } }

export function ToolsPage() {
  const q = new URLSearchParams(location.search);
  const [ws, setWs] = useState(q.get('workspace_id') ?? '');
  const [agent, setAgent] = useState(q.get('agent_name') ?? '');
  const [tools, setTools] = useState<ToolView[]>([]);
  const [error, setError] = useState('');
  const load = () => {
    const p = new URLSearchParams();
    if (ws) p.set('workspace_id', ws);
    if (agent) p.set('agent_name', agent);
    api(`/api/tools${p.size ? `?${p}` : ''}`).then((r) => { setTools(r.body.tools ?? []); setError(''); }, (e) => setError(e.message));
  };
  useEffect(load, []);
  const verdict = (t: ToolView) => (!t.availability.available ? 'unavailable' : !t.decision.callable ? 'denied' : t.decision.approval_required ? 'approval required' : 'allowed');
  return (
    <section>
      <h1>Tools <small class="muted">{tools.length}</small></h1>
      <form class="context" onSubmit={(e) => { e.preventDefault(); load(); }}>
        <label>workspace_id <input value={ws} onInput={(e) => setWs(e.currentTarget.value)} /></label>{' '}
        <label>agent_name <input value={agent} onInput={(e) => setAgent(e.currentTarget.value)} /></label> <button>Decide for this context</button>
      </form>
      {error && <p class="error">{error}</p>}
      <table class="tools">
        <thead><tr><th>tool</th><th>source</th><th>risk</th><th>decision</th><th>reasons (layer: result [codes])</th></tr></thead>
        <tbody>
          {tools.map((t) => (
            <tr data-id={t.descriptor.tool_id}>
              <td><code>{t.descriptor.tool_id}</code><div class="muted">{t.descriptor.display_title}</div></td>
              <td>{t.descriptor.source.kind}</td>
              <td>{t.descriptor.risk}</td>
              <td><span class={`badge verdict-${verdict(t).replace(' ', '-')}`}>{verdict(t)}</span></td>
              <td class="layers">{t.decision.layers.map((l) => <div><b>{l.layer}</b>: {l.result}{l.reason_codes.length ? ` [${l.reason_codes.join(', ')}]` : ''}</div>)}{t.availability.reason_codes.length > 0 && <div>availability: [{t.availability.reason_codes.join(', ')}]</div>}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

interface Sample { name: string; labels: Record<string, string>; value: number }

/** parseMetrics reads the Prometheus text format's samples (comments skipped). */
export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || line.startsWith('#')) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

export function DashboardPage() {
  const [samples, setSamples] = useState<Sample[]>([]);
  const [at, setAt] = useState('');
  const [error, setError] = useState('');
  useEffect(() => {
    let pending = false;
    const load = () => {
      if (pending) return;
      pending = true;
      // NOTE: at most one read per half second however many changes arrive at once.
      setTimeout(() => {
        api('/metrics').then((r) => { setSamples(parseMetrics(String(r.body))); setAt(new Date().toLocaleTimeString()); setError(''); }, (e) => setError(e.message)).finally(() => { pending = false; });
      }, 500);
    };
    load();
    const w = stream('/api/resources?watch=true', () => load());
    return () => w.close();
  }, []);
  const byKind = (name: string) => samples.filter((s) => s.name === name);
  const depth = new Map<string, number>();
  for (const s of byKind('svc_reconcile_queue_depth')) depth.set(s.labels.kind, (depth.get(s.labels.kind) ?? 0) + s.value);
  const lat = new Map<string, { sum: number; count: number }>();
  for (const s of samples) {
    if (s.name !== 'svc_reconcile_duration_seconds_sum' && s.name !== 'svc_reconcile_duration_seconds_count') continue;
    const v = lat.get(s.labels.kind) ?? { sum: 0, count: 0 };
    if (s.name.endsWith('_sum')) v.sum += s.value; else v.count += s.value;
    lat.set(s.labels.kind, v);
  }
  const kinds = [...new Set([...depth.keys(), ...lat.keys()])].filter(Boolean).sort();
  const max = Math.max(1, ...depth.values());
  return (
    <section>
      <h1>Dashboard <small class="muted">from /metrics, read {at} (again on every resource change)</small></h1>
      {error && <p class="error">{error}</p>}
      <table class="dashboard">
        <thead><tr><th>kind</th><th>queue depth</th><th></th><th>reconciles</th><th>mean reconcile latency</th></tr></thead>
        <tbody>
          {kinds.map((k) => {
            const l = lat.get(k);
            const d = depth.get(k) ?? 0;
            return (
              <tr data-kind={k}>
                <td>{k}</td><td>{d}</td><td><div class="bar" style={{ width: `${(d / max) * 120}px` }} /></td>
                <td>{l?.count ?? 0}</td><td>{l && l.count ? `${((l.sum / l.count) * 1000).toFixed(1)} ms` : '–'}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </section>
  );
}
