// A small History-API router: the service answers every client route with index.html (api/console.ts).
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

const listeners = new Set<() => void>();

/** navigate moves to a console path without reloading the page. */
export function navigate(to: string): void {
  history.pushState(null, '', to);
  for (const l of listeners) l();
}

/** usePath is the current path, updated on navigate and on back/forward. */
export function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const f = () => setPath(location.pathname);
    listeners.add(f);
    addEventListener('popstate', f);
    return () => { listeners.delete(f); removeEventListener('popstate', f); };
  }, []);
  return path;
}

/** A is a link that navigates inside the console. */
export function A(p: { href: string; children: ComponentChildren; class?: string }) {
  return (
    <a href={p.href} class={p.class} onClick={(e) => { if (e.button === 0 && !e.metaKey && !e.ctrlKey) { e.preventDefault(); navigate(p.href); } }}>
      {p.children}
    </a>
  );
}

/** match returns the decoded parameters of `pattern` (":name" segments) in `path`, or undefined. */
export function match(pattern: string, path: string): Record<string, string> | undefined {
  const a = pattern.split('/').filter(Boolean);
  const b = path.split('/').filter(Boolean);
  if (a.length !== b.length) return undefined;
  const out: Record<string, string> = {};
  for (let i = 0; i < a.length; i++) {
    if (a[i].startsWith(':')) out[a[i].slice(1)] = decodeURIComponent(b[i]);
    else if (a[i] !== b[i]) return undefined;
  }
  return out;
}
