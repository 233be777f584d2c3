const UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * parseDuration reads a Go-style duration (`30s`, `5m`, `1h30m`, `250ms`, `1.5h`) into milliseconds, or
 * returns undefined when it is not one. NOTE: a dozen lines, so no dependency: the npm duration parsers
 * accept other syntaxes (`5 minutes`, ISO 8601) that this contract must reject.
 */
export function parseDuration(s: string): number | undefined {
  const t = s.trim();
  if (!t) return undefined;
  if (t === '0') return 0;
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/y;
  let total = 0;
  let i = 0;
  while (i < t.length) {
    re.lastIndex = i;
    const m = re.exec(t);
    if (!m) return undefined;
    total += Number(m[1]) * UNITS[m[2]];
    i = re.lastIndex;
  }
  return total;
}

/** isPositiveDuration is true for a duration string greater than zero. */
export const isPositiveDuration = (s: unknown): boolean => typeof s === 'string' && (parseDuration(s) ?? 0) > 0;

/** formatDuration writes milliseconds in the largest whole unit of the same syntax (`30m`, `90s`, `250ms`). */
export function formatDuration(ms: number): string {
  for (const [unit, size] of [['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) if (ms > 0 && ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}
