// The web console's shell: navigation, the token form of `token` mode, and the pages.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, token, whenUnauthorized } from './api.ts';
import { DashboardPage, ToolsPage } from './tools.tsx';
import { KINDS, RecordPage, ResourcesPage } from './resources.tsx';
import { A, match, navigate, usePath } from './router.tsx';
import { SessionPage, SessionsPage, WorkspacesPage } from './sessions.tsx';
import { AutomationPage, DeliveriesPage, TaskPage, TasksPage } from './work.tsx';
import { LoopRunPage, LoopRunsPage } from './loops.tsx';
import './style.css';

function TokenForm(p: { onDone: () => void }) {
  const [value, setValue] = useState('');
  const [msg, setMsg] = useState('');
  const submit = async (e: Event) => {
    e.preventDefault();
    token.set(value.trim());
    try {
      await api('/api/workspaces');
      p.onDone();
    } catch (err) {
      token.clear();
      setMsg((err as Error).message);
    }
  };
  return (
    <form class="token" onSubmit={submit}>
      <h1>Sign in</h1>
      <p>This service runs with <code>AUTH_MODE=token</code>. Paste a bearer token; it is kept in this tab's session storage only.</p>
      <input type="password" name="token" autocomplete="off" value={value} onInput={(e) => setValue(e.currentTarget.value)} />{' '}
      <button type="submit">Use token</button>
      <p class="error">{msg}</p>
    </form>
  );
}

function Page(p: { path: string }) {
  const { path } = p;
  let m;
  if (path === '/' || path === '/resources') return <ResourcesPage kind={KINDS[0]} />;
  if ((m = match('/resources/:kind', path))) return <ResourcesPage kind={m.kind} />;
  if ((m = match('/resources/:kind/:id', path))) return <RecordPage kind={m.kind} id={m.id} />;
  if (path === '/workspaces') return <WorkspacesPage />;
  if (path === '/sessions') return <SessionsPage />;
  if ((m = match('/sessions/:ws/:id', path))) return <SessionPage ws={m.ws} id={m.id} />;
  if (path === '/tasks') return <TasksPage />;
  if ((m = match('/tasks/:id', path))) return <TaskPage id={m.id} />;
  if (path === '/loops') return <LoopRunsPage />;
  if ((m = match('/loops/:ws/:id', path))) return <LoopRunPage ws={m.ws} id={m.id} />;
  if (path === '/automation') return <AutomationPage />;
  if (path === '/notifications') return <DeliveriesPage />;
  if (path === '/tools') return <ToolsPage />;
  if (path === '/dashboard') return <DashboardPage />;
  return <p>No page here. <A href="/resources">Resources</A></p>;
}

function App() {
  const path = usePath();
  const [needToken, setNeedToken] = useState(false);
  const [epoch, setEpoch] = useState(0);
  useEffect(() => whenUnauthorized(() => setNeedToken(true)), []);
  const section = path.split('/')[1] || 'resources';
  return (
    <>
      <header>
        <b>Agent Runtime Control</b>
        {['resources', 'workspaces', 'sessions', 'tasks', 'loops', 'automation', 'notifications', 'tools', 'dashboard'].map((s) => <A href={`/${s}`} class={s === section ? 'active' : ''}>{s}</A>)}
        {token.get() && <button class="signout" onClick={() => { token.clear(); setNeedToken(true); }}>Forget token</button>}
      </header>
      <main key={epoch}>{needToken ? <TokenForm onDone={() => { setNeedToken(false); setEpoch((x) => x + 1); }} /> : <Page path={path} />}</main>
    </>
  );
}

void navigate;
// NOTE: leaving the page closes its streams (api.ts), so a page the browser restores from its back/forward cache
// would show a frozen state: load it afresh instead.
addEventListener('pageshow', (e) => { if (e.persisted) location.reload(); });
render(<App />, document.getElementById('app')!);
