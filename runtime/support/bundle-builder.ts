import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { Header, Pack, ReadEntry } from 'tar';
import { sha256Hex } from '../../store/artifact-store.ts';
import type { EventBus, BusEvent } from '../../store/event-bus.ts';
import type { LogStream } from '../../store/log-stream.ts';
import type { ResourceStore } from '../../store/resource-store.ts';
import type { SessionFields, SessionStore } from '../../store/session-store.ts';
import type { ResourceRecord, ResourceStatus } from '../../store/types.ts';
import type { WorkspaceStore } from '../../store/workspace-store.ts';
import type { Config } from '../process/types.ts';
import { safeConfiguration } from './safe-config.ts';
import { REDACTION_VERSION, Redactor, type RedactionCounts, type RedactionRule } from '../sessions/redact.ts';
import { BUNDLE_CAPS, SUPPORT_BUNDLE_SCHEMA, TRUNCATION_MARKER, type BundleArtifact, type BundleManifest, type SupportBundleOperation } from './types.ts';

/**
 * ROOT is the service's package directory: the nearest one up from this module holding package.json. NOTE: searched,
 * not computed from this file's place: the sources sit two levels below it, the compiled code (dist/) three.
 */
const ROOT = (() => {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'package.json')) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return dir;
})();
/** Bytes kept back from the bundle cap for manifest.json and redaction-report.json, written last. */
const TRAILER_RESERVE = 256 * 1024;
/** How many bus events the summary counts, and how many of the newest it lists. */
const EVENTS_COUNTED = 10_000;
const EVENTS_LISTED = 500;
/** How many not-Ready records the resource summary lists (Degraded first); Ready ones are only counted. */
const RECORDS_LISTED = 2000;
const SESSIONS_LISTED = 200;

/** RULE_DESCRIPTIONS says what each redaction rule masks, for the redaction report's reader. */
const RULE_DESCRIPTIONS: Record<RedactionRule, string> = {
  'literal': 'a known secret value (resolved env: secrets under SECRET_ENV_ALLOWLIST, vault values)',
  'url-credentials': 'user:password in a URL (scheme://user:pass@host)',
  'bearer': 'a bearer token (Bearer …)',
  'json-field': 'a JSON field with a secret name inside text ("apiKey":"…"), plain or escaped',
  'key-value': 'name=value or name: value with a secret name in free text',
  'key-name': 'a structured field whose name looks secret (api_key, token, secret, password, authorization, cookie, private_key, …)',
  'token-shape': 'an API key shape (sk-…, ghp_…, AKIA…, svc_st_…)',
};

/** BundleSources is what a bundle is read from: the building process's view of the service, and Redis. */
export interface BundleSources {
  redis: Redis;
  /** The building process's configuration (the bundle carries only its safe fields: safeConfiguration). */
  config: Config;
  readiness: () => Promise<{ ready: boolean; checks: Record<string, string> }>;
  queueDepth: () => Promise<Map<string, number>>;
  resources: ResourceStore;
  workspaces: WorkspaceStore;
  sessions: SessionStore;
  bus: EventBus;
  logs: LogStream;
  /** The secret values to mask wherever they appear (resolved env: secrets now; the vault's values added later). */
  literals: () => Promise<string[]>;
}

/** BuiltBundle is an archive with the manifest it carries. */
export interface BuiltBundle {
  archive: Buffer;
  manifest: BundleManifest;
}

/** ResourceSummary is resources.json: counts by kind and state, then the records that are not Ready, Degraded first. */
export interface ResourceSummary {
  total: number;
  by_kind: Record<string, { total: number; ready: number; degraded: number; pending: number }>;
  degraded_total: number;
  pending_total: number;
  /** Degraded records (with reason, message, last error), then pending ones; at most RECORDS_LISTED. */
  records: { kind: string; id: string; state: 'degraded' | 'pending'; version: number; observed_version: number; reason: string; message: string; last_error: string; last_reconciled_at: string }[];
  records_omitted: number;
}

/**
 * summarizeResources classifies each record by its status: `degraded` (condition Degraded is True), `ready`
 * (Ready is True for the current version), else `pending` (not reconciled yet, or Ready is not True).
 */
export function summarizeResources(records: readonly ResourceRecord[], statuses: readonly (ResourceStatus | undefined)[]): ResourceSummary {
  const out: ResourceSummary = { total: records.length, by_kind: {}, degraded_total: 0, pending_total: 0, records: [], records_omitted: 0 };
  const degraded: ResourceSummary['records'] = [];
  const pending: ResourceSummary['records'] = [];
  records.forEach((rec, i) => {
    const st = statuses[i];
    const cond = (type: string) => st?.conditions.find((c) => c.type === type);
    const bad = cond('Degraded')?.status === 'True';
    const ready = !bad && cond('Ready')?.status === 'True' && st?.observed_version === rec.version;
    const k = (out.by_kind[rec.kind] ??= { total: 0, ready: 0, degraded: 0, pending: 0 });
    k.total++;
    if (ready) { k.ready++; return; }
    const why = bad ? cond('Degraded') : cond('Ready');
    const row = {
      kind: rec.kind, id: rec.id, state: bad ? 'degraded' as const : 'pending' as const, version: rec.version, observed_version: st?.observed_version ?? 0,
      reason: why?.reason ?? (st ? '' : 'NotReconciled'), message: why?.message ?? '', last_error: st?.last_error ?? '', last_reconciled_at: st?.last_reconciled_at ?? '',
    };
    if (bad) { k.degraded++; degraded.push(row); } else { k.pending++; pending.push(row); }
  });
  out.degraded_total = degraded.length;
  out.pending_total = pending.length;
  const listed = [...degraded, ...pending];
  out.records = listed.slice(0, RECORDS_LISTED);
  out.records_omitted = listed.length - out.records.length;
  return out;
}

/**
 * BundleArchive collects a bundle's files, each held to its own cap (over it: the truncation marker) and to the
 * bundle's (past it: omitted), with the manifest entry of each.
 */
export class BundleArchive {
  readonly files: { path: string; content: Buffer }[] = [];
  readonly artifacts: BundleArtifact[] = [];
  private total = 0;

  /** add adds a file (or, with `omittedReason`, lists it as left out). */
  add(file: string, text: string, cap: number, omittedReason = ''): void {
    const entry = (content: Buffer | undefined, truncated: boolean, reason: string): BundleArtifact => ({
      path: file, bytes: content?.length ?? 0, sha256: content ? sha256Hex(content) : '', included: Boolean(content),
      omitted_reason: reason, redaction_version: REDACTION_VERSION, truncated,
    });
    if (omittedReason) { this.artifacts.push(entry(undefined, false, omittedReason)); return; }
    let content = Buffer.from(text);
    const truncated = content.length > cap;
    if (truncated) content = Buffer.from(TRUNCATION_MARKER);
    if (this.total + content.length > BUNDLE_CAPS.bundle - TRAILER_RESERVE) { this.artifacts.push(entry(undefined, false, 'bundle exceeded byte cap')); return; }
    this.total += content.length;
    this.files.push({ path: file, content });
    this.artifacts.push(entry(content, truncated, ''));
  }

  /** tarGz packs the files under `dir/` (gzip, portable headers: no owner names or ids). */
  async tarGz(dir: string, mtime: Date): Promise<Buffer> {
    const pack = new Pack({ gzip: true, portable: true });
    const chunks: Buffer[] = [];
    pack.on('data', (c: Buffer) => chunks.push(c));
    const done = new Promise<void>((resolve, reject) => { pack.on('end', () => resolve()); pack.on('error', reject); });
    for (const f of this.files) {
      // NOTE: entries come from memory (a ReadEntry per file): nothing of a bundle touches the local disk.
      const entry = new ReadEntry(new Header({ path: `${dir}/${f.path}`, mode: 0o644, size: f.content.length, type: 'File', mtime }));
      entry.end(f.content);
      pack.add(entry);
    }
    pack.end();
    await done;
    return Buffer.concat(chunks);
  }
}

/**
 * SupportBundleBuilder builds a support bundle: versions, masked configuration, readiness and
 * queue depths, resource statuses, workspace and session summaries, recent bus events, the shared log tail of every
 * process, a redaction report and the manifest, as one tar.gz in memory. Every file goes through the one Redactor
 * with the known secret values; each is held to its cap, over it replaced by the truncation marker.
 */
export class SupportBundleBuilder {
  constructor(private readonly s: BundleSources) {}

  /** build builds the bundle of an operation. */
  async build(op: SupportBundleOperation): Promise<BuiltBundle> {
    const { s } = this;
    const redactor = new Redactor(await s.literals());
    const report: { path: string; rules: RedactionCounts }[] = [];
    const archive = new BundleArchive();
    const json = (file: string, value: unknown, cap = BUNDLE_CAPS.artifact) => {
      const rules: RedactionCounts = {};
      const text = `${JSON.stringify(redactor.value(value, rules), null, 2)}\n`;
      report.push({ path: file, rules });
      archive.add(file, text, cap);
    };
    const skipStatus = op.include_status ? '' : 'include_status is false';

    json('versions.json', await this.versions());
    json('configuration.json', { config: safeConfiguration(s.config) });
    if (skipStatus) {
      archive.add('readiness.json', '', 0, skipStatus);
      archive.add('resources.json', '', 0, skipStatus);
    } else {
      json('readiness.json', await this.readiness());
      json('resources.json', await this.resourceSummary());
    }
    const sessions = await s.sessions.list();
    json('workspaces.json', await this.workspaceSummary(sessions));
    json('sessions.json', sessionSummary(sessions));
    json('events.json', eventSummary(await s.bus.latest(EVENTS_COUNTED)), BUNDLE_CAPS.eventSummary);
    const logRules: RedactionCounts = {};
    archive.add('logs.ndjson', await this.logTail(redactor, logRules), BUNDLE_CAPS.logTail);
    report.push({ path: 'logs.ndjson', rules: logRules });

    const totals: RedactionCounts = {};
    for (const f of report) for (const [rule, n] of Object.entries(f.rules) as [RedactionRule, number][]) totals[rule] = (totals[rule] ?? 0) + n;
    archive.add('redaction-report.json', `${JSON.stringify({
      redaction_version: REDACTION_VERSION,
      note: 'counts of values masked, per file and rule; the values themselves are never recorded',
      rules: RULE_DESCRIPTIONS,
      files: report.map((f) => ({ path: f.path, masked: Object.values(f.rules).reduce((a, b) => a + b, 0), rules: f.rules })),
      totals,
    }, null, 2)}\n`, BUNDLE_CAPS.artifact);
    const manifest: BundleManifest = {
      schema_version: SUPPORT_BUNDLE_SCHEMA, redaction_version: REDACTION_VERSION, operation_id: op.operation_id, created_at: op.created_at,
      bundle_max_bytes: BUNDLE_CAPS.bundle, artifact_max_bytes: BUNDLE_CAPS.artifact, log_tail_max_bytes: BUNDLE_CAPS.logTail,
      event_summary_max_bytes: BUNDLE_CAPS.eventSummary, artifacts: archive.artifacts,
    };
    archive.files.push({ path: 'manifest.json', content: Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`) });
    return { archive: await archive.tarGz(op.file_name.replace(/\.tar\.gz$/, ''), new Date()), manifest };
  }

  private async versions() {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string; dependencies?: Record<string, string> };
    const installed = (name: string, declared: string) => {
      try {
        return (JSON.parse(readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
      } catch {
        return declared;
      }
    };
    const info = await this.s.redis.info('server');
    const field = (name: string) => new RegExp(`^${name}:(.*)$`, 'm').exec(info)?.[1]?.trim() ?? '';
    return {
      service: { name: pkg.name, version: pkg.version },
      node: process.versions.node, v8: process.versions.v8, openssl: process.versions.openssl, platform: `${process.platform}/${process.arch}`,
      redis: { version: field('redis_version'), mode: field('redis_mode'), os: field('os') },
      packages: Object.fromEntries(Object.entries(pkg.dependencies ?? {}).map(([name, declared]) => [name, installed(name, declared)])),
    };
  }

  private async readiness() {
    const { s } = this;
    const [ready, depth] = await Promise.all([s.readiness(), s.queueDepth()]);
    return {
      ...ready,
      reconcile_queue_depths: Object.fromEntries(depth),
      built_by: { hostname: os.hostname(), pid: process.pid, roles: s.config.roles, uptime_seconds: Math.round(process.uptime()), rss_bytes: process.memoryUsage().rss },
    };
  }

  private async resourceSummary(): Promise<ResourceSummary> {
    const records = await this.s.resources.list();
    return summarizeResources(records, await this.s.resources.statusesOf(records));
  }

  private async workspaceSummary(sessions: SessionFields[]) {
    const perWs = new Map<string, number>();
    for (const x of sessions) perWs.set(String(x.workspace_id), (perWs.get(String(x.workspace_id)) ?? 0) + 1);
    const workspaces = await this.s.workspaces.list();
    return {
      total: workspaces.length,
      workspaces: workspaces.map((w) => ({ id: w.id, name: w.name, root_dir: w.root_dir, add_dirs: w.add_dirs.length, default_agent: w.default_agent, sessions: perWs.get(w.id) ?? 0, updated_at: w.updated_at })),
    };
  }

  /**
   * logTail is the newest warning and error lines of every process that fit the log tail cap, redacted, oldest
   * first (one JSON object a line).
   */
  private async logTail(redactor: Redactor, rules: RedactionCounts): Promise<string> {
    const lines: string[] = [];
    let bytes = 0;
    for await (const raw of this.s.logs.newestFirst()) {
      let line: string;
      try {
        line = JSON.stringify(redactor.value(JSON.parse(raw), rules));
      } catch {
        line = JSON.stringify({ line: redactor.text(raw, rules) });
      }
      bytes += Buffer.byteLength(line) + 1;
      if (bytes > BUNDLE_CAPS.logTail) break;
      lines.push(line);
    }
    return lines.reverse().map((l) => `${l}\n`).join('');
  }
}

/** sessionSummary counts sessions by state, agent and workspace and lists the newest. */
function sessionSummary(sessions: SessionFields[]) {
  const count = (f: (x: SessionFields) => unknown) => {
    const out: Record<string, number> = {};
    for (const x of sessions) { const k = String(f(x) ?? ''); out[k] = (out[k] ?? 0) + 1; }
    return out;
  };
  return {
    total: sessions.length,
    by_state: count((x) => x.state),
    by_agent: count((x) => x.agent_name),
    by_workspace: count((x) => x.workspace_id),
    newest: sessions.slice(0, SESSIONS_LISTED).map((x) => ({
      id: x.id, workspace_id: x.workspace_id, agent_name: x.agent_name, type: x.type, state: x.state, created_at: x.created_at, updated_at: x.updated_at,
      stop_reason: x.stop_reason, stop_detail: x.stop_detail, failure_kind: (x.failure as { kind?: string } | null)?.kind ?? '',
    })),
  };
}

/** eventSummary counts the bus events by type and outcome and lists the newest (redacted by the caller). */
function eventSummary(events: BusEvent[]) {
  const byType: Record<string, number> = {};
  const byOutcome: Record<string, number> = {};
  for (const e of events) {
    byType[e.type] = (byType[e.type] ?? 0) + 1;
    byOutcome[e.outcome] = (byOutcome[e.outcome] ?? 0) + 1;
  }
  return {
    counted: events.length, oldest: events[0]?.timestamp ?? '', newest: events.at(-1)?.timestamp ?? '',
    by_type: byType, by_outcome: byOutcome, recent: events.slice(-EVENTS_LISTED),
  };
}
