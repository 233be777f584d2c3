import { canonicalJson } from '../../store/canonical.ts';
import type { ResourceRecord, ResourceStatus } from '../../store/types.ts';
import type { FieldValidation } from '../validation/field-validation.ts';
import { ApiClient, enc } from './client.ts';
import { ApiError, UnreachableError } from './errors.ts';
import { digestOf, type Manifest } from './manifests.ts';
import { parseSource, SOURCE_KIND, sourceRef } from './source.ts';

/** Action is what happened to one record. */
export type Action = 'created' | 'configured' | 'unchanged' | 'pruned' | 'deleted' | 'conflict' | 'degraded' | 'failed';

/** Outcome is one line of an apply's report. */
export interface Outcome {
  kind: string;
  id: string;
  action: Action;
  version?: number;
  /** Why a record failed, conflicted or is Degraded (the condition's reason and message). */
  reason?: string;
  message?: string;
}

/** ApplyOptions are apply's switches. */
export interface ApplyOptions {
  /** The source name (`--selector source=<name>`, else "default"). */
  source: string;
  prune: boolean;
  dryRun: boolean;
  wait: boolean;
  timeoutMs: number;
  concurrency?: number;
  onProgress?: (done: number, total: number) => void;
  /**
   * What a manifest's unknown fields do (`--validate`, as kubectl's): strict refuses that record (nothing is
   * written), warn writes it without them and calls `onWarning` per field, ignore writes it silently.
   */
  validate?: FieldValidation;
  onWarning?: (message: string) => void;
}

/** RETRIES bounds re-reads after 409s from writers of the same source. */
const RETRIES = 5;

/** LIST_ABOVE is the manifest count above which one list replaces a GET per record. */
const LIST_ABOVE = 50;

const path = (kind: string, id: string) => `/api/resources/${enc(kind)}/${enc(id)}`;

/** pool runs fn over items with at most n in flight, keeping the results in input order. */
export async function pool<T, R>(items: T[], n: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}

/** readRecord GETs a record, or undefined on 404. */
export async function readRecord(api: ApiClient, kind: string, id: string): Promise<ResourceRecord | undefined> {
  const r = await api.call('GET', path(kind, id));
  if (r.status === 404) return undefined;
  if (r.status >= 400) throw new ApiError(r.status, r.body, `GET ${path(kind, id)}`);
  return r.body.record;
}

/**
 * ownsLive says whether the live record is exactly what an apply of `source` last wrote: its source names this
 * source and its digest still matches the live scope and spec. Only then may a 409 be retried after a re-read.
 */
function ownsLive(live: ResourceRecord, source: string): boolean {
  const s = parseSource(live.source);
  return !!s && s.name === source && s.digest === digestOf(live.scope, live.spec);
}

/** sameAsLive says whether the live record already has this manifest's scope, spec and source. */
function sameAsLive(live: ResourceRecord, m: Manifest, digest: string, source: string): boolean {
  const s = parseSource(live.source);
  return !!s && s.name === source && s.digest === digest && digestOf(live.scope, live.spec) === digest;
}

/** degradedOf returns the Degraded condition of a status when it is True. */
export function degradedOf(status: ResourceStatus | undefined) {
  return status?.conditions?.find((c) => c.type === 'Degraded' && c.status === 'True');
}

/**
 * SETTLE_MS: how long `--wait` looks again at a record that a reconcile older than the apply's last write left
 * Degraded. NOTE: what degrades it may be written by the same apply (a job naming an agent created beside it, in
 * either order): that write re-reconciles it a moment later. Past this, it is Degraded for another reason.
 */
const SETTLE_MS = 3_000;

/**
 * waitReconciled polls a record's status until it observed `version` (or the deadline), and reports Degraded once a
 * reconcile after `lastWrite` (the apply's newest write, service time) left it so, or `settleBy` passed.
 */
async function waitReconciled(api: ApiClient, kind: string, id: string, version: number, deadline: number, lastWrite: string, settleBy: number): Promise<Pick<Outcome, 'action' | 'reason' | 'message'> | undefined> {
  for (;;) {
    const st: ResourceStatus = (await api.get(`${path(kind, id)}/status`)).status;
    const degraded = degradedOf(st);
    if (st.observed_version >= version && (!degraded || st.last_reconciled_at >= lastWrite || Date.now() > settleBy)) {
      return degraded ? { action: 'degraded', reason: degraded.reason, message: degraded.message || st.last_error } : undefined;
    }
    if (Date.now() > deadline) return { action: 'failed', reason: 'Timeout', message: `not reconciled within the timeout (observed version ${st.observed_version} < ${version})` };
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * applyOne writes one manifest: read the current version, PUT with it as `expected_version` (0 creates) and the
 * source `svcctl/<name>.<digest>`. A 409 is retried after a re-read only when the live record is still exactly
 * what this source last wrote; otherwise it is a conflict and nothing is overwritten. It answers the outcome and,
 * when it wrote, the write's time on the service (`--wait` judges every record after the apply's last write).
 */
async function applyOne(api: ApiClient, m: Manifest, o: ApplyOptions, deadline: number, known?: Map<string, ResourceRecord>): Promise<{ outcome: Outcome; wroteAt?: string }> {
  const digest = digestOf(m.scope, m.canonical);
  const base = { kind: m.kind, id: m.id };
  const validate = o.validate ?? 'strict';
  if (m.unknown.length && validate === 'strict') {
    return { outcome: { ...base, action: 'failed', reason: 'unknown_field', message: `unknown field${m.unknown.length > 1 ? 's' : ''} ${m.unknown.map((p) => `"${p}"`).join(', ')} (--validate=warn or ignore applies it without them)` } };
  }
  if (validate === 'warn') for (const p of m.unknown) o.onWarning?.(`${m.kind}/${m.id}: unknown field "${p}"`);
  // NOTE: a large apply reads the current versions with one list; a stale one only costs a 409 and a re-read.
  let live = known ? known.get(`${m.kind}/${m.id}`) : await readRecord(api, m.kind, m.id);
  let written: ResourceRecord | undefined;
  let action: Action = 'unchanged';
  if (live && sameAsLive(live, m, digest, o.source)) {
    written = live;
  } else {
    // NOTE: the manifest's unknown fields were judged above (and warned of once); the service then need not judge them again.
    const q = [validate === 'strict' ? '' : 'field_validation=ignore', o.dryRun ? 'dry_run=true' : '', o.wait && !o.dryRun ? `wait=true&timeout_ms=${Math.max(1, Math.min(600_000, deadline - Date.now()))}` : ''].filter(Boolean).join('&');
    for (let attempt = 0; ; attempt++) {
      const body = { scope: m.scope, spec: m.spec, expected_version: live?.version ?? 0, source: sourceRef(o.source, digest) };
      const r = await api.call('PUT', `${path(m.kind, m.id)}${q ? `?${q}` : ''}`, body);
      if (r.status < 300) {
        written = r.body.record as ResourceRecord;
        action = r.status === 201 ? 'created' : written.version === live?.version ? 'unchanged' : 'configured';
        break;
      }
      if (r.status !== 409 || r.body?.diagnostic?.code !== 'version_conflict') {
        return { outcome: { ...base, action: r.status === 409 ? 'conflict' : 'failed', reason: r.body?.diagnostic?.code ?? String(r.status), message: r.body?.error ?? String(r.body) } };
      }
      live = await readRecord(api, m.kind, m.id);
      if (!live || !ownsLive(live, o.source) || attempt >= RETRIES) {
        const by = live ? `${live.source.kind}/${live.source.id}` : 'a delete';
        return { outcome: { ...base, action: 'conflict', version: live?.version, reason: 'Conflict', message: `changed concurrently by ${by} (now version ${live?.version ?? 'none'}); not overwritten` } };
      }
    }
  }
  return { outcome: { ...base, action, version: written.version }, wroteAt: action === 'unchanged' ? undefined : written.updated_at };
}

/** listOwned lists the records whose source is svcctl's with this source name. */
export async function listOwned(api: ApiClient, source: string): Promise<ResourceRecord[]> {
  const { records } = await api.get<{ records: ResourceRecord[] }>('/api/resources');
  return records.filter((r) => r.source.kind === SOURCE_KIND && parseSource(r.source)?.name === source);
}

/** pruneCandidates are the records of this source that the manifests no longer name. */
export async function pruneCandidates(api: ApiClient, manifests: Manifest[], source: string): Promise<ResourceRecord[]> {
  const keep = new Set(manifests.map((m) => `${m.kind}/${m.id}`));
  return (await listOwned(api, source)).filter((r) => !keep.has(`${r.kind}/${r.id}`));
}

/** apply applies every manifest (a bounded number in flight), then prunes when asked and nothing failed. */
export async function apply(api: ApiClient, manifests: Manifest[], o: ApplyOptions): Promise<Outcome[]> {
  const deadline = Date.now() + o.timeoutMs;
  let done = 0;
  const total = manifests.length;
  let known: Map<string, ResourceRecord> | undefined;
  if (total > LIST_ABOVE) {
    const { records } = await api.get<{ records: ResourceRecord[] }>('/api/resources');
    known = new Map(records.map((r) => [`${r.kind}/${r.id}`, r]));
  }
  const applied = await pool(manifests, o.concurrency ?? 16, async (m) => {
    try {
      return await applyOne(api, m, o, deadline, known);
    } catch (err) {
      if (err instanceof UnreachableError) throw err;
      return { outcome: { kind: m.kind, id: m.id, action: 'failed' as const, reason: 'Error', message: (err as Error).message } };
    } finally {
      o.onProgress?.(++done, total);
    }
  });
  const out = applied.map((a) => a.outcome);
  if (o.wait && !o.dryRun) {
    // NOTE: once every record is written, so one Degraded by a dependency this apply writes is judged after it.
    const lastWrite = applied.reduce((at, a) => (a.wroteAt && a.wroteAt > at ? a.wroteAt : at), '');
    const settleBy = Date.now() + SETTLE_MS;
    await pool(out.map((r, i) => [r, i] as const), o.concurrency ?? 16, async ([r, i]) => {
      if (r.action !== 'created' && r.action !== 'configured' && r.action !== 'unchanged') return;
      const bad = await waitReconciled(api, r.kind, r.id, r.version!, deadline, lastWrite, settleBy);
      if (bad) out[i] = { ...r, ...bad };
    });
  }
  if (o.prune && out.every((r) => r.action === 'created' || r.action === 'configured' || r.action === 'unchanged')) {
    for (const r of await pruneCandidates(api, manifests, o.source)) {
      const res = await api.call('DELETE', `${path(r.kind, r.id)}${o.dryRun ? '?dry_run=true' : ''}`, { expected_version: r.version });
      if (res.status === 204 || res.status === 404) out.push({ kind: r.kind, id: r.id, action: 'pruned', version: r.version });
      else out.push({ kind: r.kind, id: r.id, action: res.status === 409 ? 'conflict' : 'failed', reason: res.body?.diagnostic?.code, message: res.body?.error });
    }
  }
  return out;
}

/** canonicalView is what diff and get -o yaml show of a record: its scope and canonical spec, keys sorted. */
export function canonicalView(scope: unknown, spec: unknown): unknown {
  return JSON.parse(canonicalJson({ scope, spec }));
}
