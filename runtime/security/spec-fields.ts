/**
 * fieldsNamed finds every field called `key` in a spec, at any depth (records and the declarations they embed),
 * with its dotted path (`mcp_servers[0].command`); it does not look inside a match. NOTE: policy finds the fields
 * it governs by name, not by a per-kind list, so a new kind with such a field is governed from day one.
 */
export function fieldsNamed(spec: unknown, key: string): { path: string; value: unknown }[] {
  const out: { path: string; value: unknown }[] = [];
  const walk = (v: unknown, at: string, depth: number): void => {
    if (depth > 64 || v === null || typeof v !== 'object') return;
    if (Array.isArray(v)) { v.forEach((x, i) => walk(x, `${at}[${i}]`, depth + 1)); return; }
    for (const [k, x] of Object.entries(v)) {
      const p = at ? `${at}.${k}` : k;
      if (k === key) out.push({ path: p, value: x });
      else walk(x, p, depth + 1);
    }
  };
  walk(spec, '', 0);
  return out;
}
