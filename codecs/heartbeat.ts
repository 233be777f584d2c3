import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Node, type Pair } from 'yaml';
import { parseDuration } from './duration.ts';

/** HeartbeatConfig is the `heartbeat:` configuration subset a HEARTBEAT.md is checked and projected under. */
export interface HeartbeatConfig {
  active_session_only: boolean;
  allow_active_hours_preferences: boolean;
  context_projection_bytes: number;
  default_interval: string;
  enabled: boolean;
  max_body_bytes: number;
  max_wakes_per_cycle: number;
  min_interval: string;
  session_health_hook_min_interval: string;
  session_health_stale_after: string;
  wake_cooldown: string;
  wake_event_retention: string;
}

/** DEFAULT_HEARTBEAT_CONFIG is the built-in subset (the original's defaults). */
export const DEFAULT_HEARTBEAT_CONFIG: HeartbeatConfig = {
  active_session_only: true, allow_active_hours_preferences: true, context_projection_bytes: 4096, default_interval: '30m', enabled: true,
  max_body_bytes: 32768, max_wakes_per_cycle: 25, min_interval: '5m', session_health_hook_min_interval: '1m', session_health_stale_after: '2m',
  wake_cooldown: '1m', wake_event_retention: '168h',
};

/** HeartbeatDiagnostic points at a problem: `line` and `column` are 1-based positions in the whole file. */
export interface HeartbeatDiagnostic {
  code: string;
  column: number;
  field: string;
  line: number;
  message: string;
  owner_surface: string;
  section: string;
  severity: 'error' | 'warning' | 'info';
  source_path: string;
}

export interface TimeWindow { end: string; start: string; timezone: string }

/** HeartbeatFrontmatter is the canonical frontmatter; absent fields take their defaults. */
export interface HeartbeatFrontmatter {
  context: { include: string[] };
  enabled: boolean;
  preferences: { active_hours: TimeWindow[]; min_interval: string; quiet_windows: TimeWindow[] };
  summary: string;
  version: number;
}

export interface ParsedHeartbeat {
  frontmatter: HeartbeatFrontmatter;
  guidance: string;
  diagnostics: HeartbeatDiagnostic[];
}

/** Fields that belong to other surfaces; naming their owner tells the author where to put them. */
const FORBIDDEN: Record<string, string> = {
  lease_duration: 'task runs (lease APIs)', claim_token: 'task runs (lease APIs)', interval: 'the scheduler configuration', schedule: 'automation jobs',
  provider: 'the agent definition', model: 'the agent definition', tools: 'the agent definition', capabilities: 'the agent definition',
  hooks: 'hook.binding records', mcp_servers: 'the agent definition', permissions: 'the agent definition', network: 'the network configuration',
};
const TIME = /^([01]\d|2[0-3]):[0-5]\d$/;
const ZONES = new Set([...Intl.supportedValuesOf('timeZone'), 'UTC', 'Etc/UTC']);

/**
 * parseHeartbeat parses a HEARTBEAT.md: optional YAML frontmatter between `---` lines (version, enabled,
 * summary, preferences, context) and a markdown guidance body. It never throws; every problem is a
 * diagnostic at the line and column of the offending key or value in the file.
 */
export function parseHeartbeat(text: string, cfg: HeartbeatConfig, sourcePath: string, ownerSurface: string): ParsedHeartbeat {
  const fm: HeartbeatFrontmatter = { context: { include: [] }, enabled: true, preferences: { active_hours: [], min_interval: '', quiet_windows: [] }, summary: '', version: 1 };
  const diagnostics: HeartbeatDiagnostic[] = [];
  const add = (severity: HeartbeatDiagnostic['severity'], code: string, field: string, message: string, line: number, column: number, section = 'frontmatter') => {
    diagnostics.push({ code, column, field, line, message, owner_surface: ownerSurface, section, severity, source_path: sourcePath });
  };

  let guidance = text;
  let bodyLine = 1;
  const open = /^---\r?\n/.exec(text);
  if (open) {
    const close = /\r?\n---[ \t]*(\r?\n|$)/.exec(text.slice(open[0].length - 1));
    if (!close) {
      add('error', 'heartbeat_malformed_frontmatter', '', 'the frontmatter opened on line 1 is never closed with ---', 1, 1);
      return { frontmatter: fm, guidance: '', diagnostics };
    }
    const src = text.slice(open[0].length, open[0].length - 1 + close.index);
    guidance = text.slice(open[0].length - 1 + close.index + close[0].length);
    bodyLine = text.slice(0, text.length - guidance.length).split('\n').length;
    parseFrontmatter(src, fm, cfg, add);
  }
  if (Buffer.byteLength(guidance) > cfg.max_body_bytes) {
    add('error', 'heartbeat_body_too_large', 'body', `the guidance body is ${Buffer.byteLength(guidance)} bytes; the limit (heartbeat.max_body_bytes) is ${cfg.max_body_bytes}`, bodyLine, 1, 'body');
  }
  return { frontmatter: fm, guidance: guidance.trim(), diagnostics };
}

type Add = (severity: HeartbeatDiagnostic['severity'], code: string, field: string, message: string, line: number, column: number) => void;

function parseFrontmatter(src: string, fm: HeartbeatFrontmatter, cfg: HeartbeatConfig, add: Add): void {
  const lines = new LineCounter();
  const doc = parseDocument(src, { lineCounter: lines, uniqueKeys: true });
  // NOTE: frontmatter line 1 is file line 2 (the opening --- is line 1).
  const at = (offset = 0) => { const p = lines.linePos(offset); return [p.line + 1, p.col] as const; };
  const pos = (n: Node | Pair | null | undefined) => at(((n as Pair)?.key as Node | undefined)?.range?.[0] ?? (n as Node)?.range?.[0] ?? 0);
  if (doc.errors.length) {
    const e = doc.errors[0];
    add('error', 'heartbeat_malformed_frontmatter', '', `frontmatter is not valid YAML: ${e.message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '')}`, ...at(e.pos[0]));
    return;
  }
  const root = doc.contents;
  if (root === null) return;
  if (!isMap(root)) return add('error', 'heartbeat_malformed_frontmatter', '', 'frontmatter must be a YAML mapping', ...pos(root));

  const scalar = (n: unknown) => (isScalar(n) ? n.value : undefined);
  const str = (n: unknown, field: string): string | undefined => {
    const v = scalar(n);
    if (typeof v === 'string') return v;
    add('error', 'heartbeat_invalid_field_type', field, `${field} must be a string`, ...pos(n as Node));
    return undefined;
  };
  const windows = (n: unknown, field: string): TimeWindow[] => {
    if (!isSeq(n)) { add('error', 'heartbeat_invalid_field_type', field, `${field} must be a list of {timezone, start, end}`, ...pos(n as Node)); return []; }
    return n.items.flatMap((item, i) => {
      const f = `${field}[${i}]`;
      if (!isMap(item)) { add('error', 'heartbeat_invalid_field_type', f, `${f} must be a mapping`, ...pos(item as Node)); return []; }
      const w: TimeWindow = { end: '', start: '', timezone: '' };
      for (const pair of item.items) {
        const key = String(scalar(pair.key));
        if (!['timezone', 'start', 'end'].includes(key)) { add('error', 'heartbeat_unsupported_field', `${f}.${key}`, `${f}.${key} is not supported`, ...pos(pair)); continue; }
        const v = str(pair.value, `${f}.${key}`);
        if (v === undefined) continue;
        w[key as keyof TimeWindow] = v;
        if (key === 'timezone' && !ZONES.has(v)) add('error', 'heartbeat_invalid_timezone', `${f}.timezone`, `"${v}" is not an IANA time zone name (e.g. Europe/Berlin or UTC); fixed offsets are not accepted`, ...pos(pair.value as Node));
        if (key !== 'timezone' && !TIME.test(v)) add('error', 'heartbeat_invalid_time_window', `${f}.${key}`, `${f}.${key} must be a time HH:MM`, ...pos(pair.value as Node));
      }
      for (const k of ['timezone', 'start', 'end'] as const) if (!item.has(k)) add('error', k === 'timezone' ? 'heartbeat_invalid_timezone' : 'heartbeat_invalid_time_window', `${f}.${k}`, `${f}.${k} is required`, ...pos(item));
      return [w];
    });
  };

  for (const pair of root.items) {
    const key = String(scalar(pair.key));
    const value = pair.value;
    switch (key) {
      case 'version':
        if (scalar(value) !== 1) add('error', 'heartbeat_invalid_field_type', key, 'version must be 1', ...pos(value as Node));
        break;
      case 'enabled':
        if (typeof scalar(value) !== 'boolean') add('error', 'heartbeat_invalid_field_type', key, 'enabled must be true or false', ...pos(value as Node));
        else fm.enabled = scalar(value) as boolean;
        break;
      case 'summary':
        fm.summary = str(value, key) ?? '';
        break;
      case 'context':
        if (!isMap(value)) { add('error', 'heartbeat_invalid_field_type', key, 'context must be a mapping', ...pos(value as Node)); break; }
        for (const p of value.items) {
          const k = String(scalar(p.key));
          if (k !== 'include') { add('error', 'heartbeat_unsupported_field', `context.${k}`, `context.${k} is not supported`, ...pos(p)); continue; }
          if (!isSeq(p.value)) { add('error', 'heartbeat_invalid_field_type', 'context.include', 'context.include must be a list of strings', ...pos(p.value as Node)); continue; }
          fm.context.include = p.value.items.map((x, i) => str(x, `context.include[${i}]`)).filter((x): x is string => x !== undefined);
        }
        break;
      case 'preferences':
        if (!isMap(value)) { add('error', 'heartbeat_invalid_field_type', key, 'preferences must be a mapping', ...pos(value as Node)); break; }
        for (const p of value.items) {
          const k = String(scalar(p.key));
          const field = `preferences.${k}`;
          if (k === 'active_hours' || k === 'quiet_windows') fm.preferences[k] = windows(p.value, field);
          else if (k === 'min_interval') {
            const v = str(p.value, field);
            if (v === undefined) continue;
            const ms = parseDuration(v);
            if (!ms || ms <= 0) { add('error', 'heartbeat_invalid_min_interval', field, `"${v}" is not a positive duration such as 30m`, ...pos(p.value as Node)); continue; }
            fm.preferences.min_interval = v;
            // NOTE: a preference below the configured floor is clamped to it, and said so, not dropped silently.
            if (ms < (parseDuration(cfg.min_interval) ?? 0)) add('warning', 'heartbeat_preference_clamped', field, `min_interval ${v} is below heartbeat.min_interval ${cfg.min_interval}; ${cfg.min_interval} applies`, ...pos(p.value as Node));
          } else {
            const owner = FORBIDDEN[k];
            add('error', owner ? 'heartbeat_forbidden_field' : 'heartbeat_unsupported_field', field, owner ? `${field} belongs to ${owner}` : `${field} is not supported`, ...pos(p));
          }
        }
        if (!cfg.allow_active_hours_preferences && fm.preferences.active_hours.length) add('warning', 'heartbeat_preference_ignored', 'preferences.active_hours', 'heartbeat.allow_active_hours_preferences is false; active_hours are ignored', ...pos(value));
        break;
      default: {
        const owner = FORBIDDEN[key];
        add('error', owner ? 'heartbeat_forbidden_field' : 'heartbeat_unsupported_field', key, owner ? `${key} belongs to ${owner}, not HEARTBEAT.md` : `${key} is not a HEARTBEAT.md field`, ...pos(pair));
      }
    }
  }
}
