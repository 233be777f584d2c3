const FIELD = /\{\{\s*\.([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\}\}/g;

/** valueAt reads a dotted path (`data.repo.name`) from a JSON value; undefined when any step is missing. */
export function valueAt(v: unknown, path: string): unknown {
  let cur = v;
  for (const key of path.split('.')) {
    if (cur === null || typeof cur !== 'object' || Array.isArray(cur) || !Object.hasOwn(cur, key)) return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}

/**
 * renderTemplate fills a restricted prompt template (codecs/automation.ts isRestrictedTemplate): each
 * `{{ .a.b }}` becomes the value at that path of `ctx` (objects as JSON, a missing field as ""). Nothing else is
 * interpreted: no functions, pipelines or code, so an event's content can never run anything.
 */
export function renderTemplate(template: string, ctx: Record<string, unknown>): string {
  return template.replace(FIELD, (_, path: string) => {
    const v = valueAt(ctx, path);
    if (v === undefined || v === null) return '';
    return typeof v === 'object' ? JSON.stringify(v) : String(v);
  });
}
