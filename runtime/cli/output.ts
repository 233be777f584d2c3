import type { Command } from 'commander';
import YAML from 'yaml';
import type { ResourceRecord, ResourceStatus } from '../../store/types.ts';
import { degradedOf } from './apply.ts';
import type { ApiClient } from './client.ts';

/** Format is an output format: `text` (tables, lines) for people, `json`/`yaml` for programs. */
export type Format = 'text' | 'json' | 'yaml' | 'wide';

/** ClientOf gives a command its client (from the global --server/--token/--context) and its output format. */
export type ClientOf = (cmd: Command) => { api: ApiClient; format: Format };

/** defaultFormat is `text` on a terminal and `json` otherwise (pipes, CI logs). */
export function defaultFormat(): Format {
  return process.stdout.isTTY ? 'text' : 'json';
}

/** emit prints a value as JSON or YAML. */
export function emit(value: unknown, format: Format): void {
  process.stdout.write(format === 'yaml' ? YAML.stringify(value) : `${JSON.stringify(value, null, 2)}\n`);
}

/** table prints rows under headers, columns padded to their widest cell. */
export function table(headers: string[], rows: string[][]): void {
  const w = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : (c ?? '').padEnd(w[i]))).join('  ').trimEnd();
  process.stdout.write(`${[line(headers), ...rows.map(line)].join('\n')}\n`);
}

/** statusWord sums a record's status up: Pending (version not yet observed), Degraded, Ready or NotReady. */
export function statusWord(rec: ResourceRecord, st: ResourceStatus | undefined): string {
  if (!st || st.observed_version < rec.version) return 'Pending';
  if (degradedOf(st)) return 'Degraded';
  return st.conditions.find((c) => c.type === 'Ready')?.status === 'True' ? 'Ready' : 'NotReady';
}

/** reasonOf is the reason and message of the condition that explains a status that is not Ready. */
export function reasonOf(st: ResourceStatus | undefined): string {
  const c = st?.conditions.find((x) => x.type === 'Degraded' && x.status === 'True') ?? st?.conditions.find((x) => x.type === 'Ready' && x.status !== 'True');
  return c ? `${c.reason}${c.message ? `: ${c.message}` : ''}` : '';
}

/** age prints how long ago a timestamp was, kubectl-style (12s, 5m, 3h, 2d). */
export function age(iso: string): string {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172_800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}
