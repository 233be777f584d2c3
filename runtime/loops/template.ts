import { renderTemplate, valueAt } from '../automation/template.ts';

const WHOLE = /^\{\{\s*\.([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\}\}$/;

/**
 * renderValue fills a JSON template with the node's scope: a string that is exactly one `{{ .a.b }}` becomes the
 * value at that path with its own type (a list stays a list), any other string is rendered as text
 * (runtime/automation/template.ts, the same restricted grammar: no functions, nothing executes), and objects and
 * arrays are walked.
 */
export function renderValue(tpl: unknown, scope: Record<string, unknown>): unknown {
  if (typeof tpl === 'string') {
    const whole = WHOLE.exec(tpl);
    if (whole) return valueAt(scope, whole[1]) ?? null;
    return renderTemplate(tpl, scope);
  }
  if (Array.isArray(tpl)) return tpl.map((v) => renderValue(v, scope));
  if (tpl !== null && typeof tpl === 'object') {
    return Object.fromEntries(Object.entries(tpl).map(([k, v]) => [k, renderValue(v, scope)]));
  }
  return tpl;
}

export { renderTemplate, valueAt };
