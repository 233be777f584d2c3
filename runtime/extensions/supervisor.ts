import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { daemonTimings } from '../../codecs/extension-manifest.ts';
import { duplicateConnection } from '../../store/connections.ts';
import type { ExtensionStore } from '../../store/extension-store.ts';
import { childEnv } from '../security/child-env.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { redactString } from '../tools/results.ts';
import type { ExtensionCache } from './artifacts.ts';
import { DaemonProcess, describeExit } from './daemon.ts';
import { sameInstall, type DaemonStatus, type ExtensionRecord } from './types.ts';

/** SupervisorSettings are the supervision's timings (EXTENSION_* settings, runtime/process/config.ts). */
export interface SupervisorSettings {
  /** A daemon's lease: how long after its runtime dies another may start it (plus one tick). */
  leaseMs: number;
  /** The first restart delay; it doubles per consecutive failure up to `backoffMaxMs`. */
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** Consecutive failures after which a daemon is left stopped (`CrashLoop`). */
  crashLoopAfter: number;
  /** How long `initialize` may take. */
  initTimeoutMs: number;
}

/** ToolCall is a tool call routed to the runtime that holds a daemon (through its Redis inbox). */
export interface ToolCall { id: string; name: string; tool: string; args: unknown; timeout_ms: number }
/** ToolReply is a daemon's answer to a ToolCall, or why there is none. */
export type ToolReply = { ok: true; result: { content?: unknown[]; structuredContent?: unknown; isError?: boolean } } | { ok: false; error: string };

/** Held is one daemon this runtime holds the lease of. */
interface Held {
  name: string;
  record: ExtensionRecord;
  status: DaemonStatus;
  daemon?: DaemonProcess;
  /** Bumped whenever the daemon is replaced or stopped, so a stale exit or health answer is ignored. */
  epoch: number;
  timer?: NodeJS.Timeout;
  stopping: boolean;
  /** The resolved `secret_env` values of the running daemon: masked in every status text (its stderr, its health). */
  secrets?: string[];
}

/** WATCH_MS is how often the extensions revision is checked between ticks. */
const WATCH_MS = 100;

const significant = (s: DaemonStatus) => JSON.stringify([s.generation, s.state, s.running, s.pid, s.health, s.health_message, s.last_error, s.failures, s.starts, s.missing_env, s.restart_at, s.owner]);

/**
 * ExtensionSupervisor runs the `runtime` role for extension daemons. Each enabled extension with a daemon is run by
 * one runtime replica, the one holding its Redis lease (`SET NX PX`, renewed each tick), as
 * sessions' agents are owned. A daemon starts under the exec policy with the scrubbed environment (its declared `env`
 * and its `secret_env` resolved from the vault, nothing of the service's), answers `initialize` with the granted
 * capabilities, then `health` every interval. A failure (exit, failed handshake or health check) restarts it after
 * a delay that starts at 1 s and doubles to 60 s; after 5 consecutive failures it stays stopped as `CrashLoop`
 * until the extension is enabled again or updated; a healthy check resets the count (systemd's and pm2's burst
 * limit). Status is written under the lease (ext-status-3.lua). When a runtime dies its leases lapse and another
 * runtime starts the daemons within the lease plus one tick.
 */
export class ExtensionSupervisor {
  readonly owner = `rt-${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private readonly held = new Map<string, Held>();
  private timer?: NodeJS.Timeout;
  private watch?: NodeJS.Timeout;
  private inboxConn?: Redis;
  private inboxLoop?: Promise<void>;
  private running = false;
  private ticking?: Promise<void>;
  private cached = { revision: -1, records: new Map<string, ExtensionRecord>() };
  /** When this process last pruned its unpacked trees, and at which record revision. */
  private pruned = { revision: -1, at: 0 };

  constructor(private readonly o: {
    store: ExtensionStore; redis: Redis; cache: ExtensionCache; security: SecurityPolicy; settings: SupervisorSettings; logger: Logger;
  }) {}

  /** tickMs is how often leases are renewed and unheld daemons looked for. */
  get tickMs(): number { return Math.max(100, Math.min(1000, Math.floor(this.o.settings.leaseMs / 3))); }

  async start(): Promise<void> {
    this.running = true;
    this.inboxConn = duplicateConnection(this.o.redis);
    this.inboxLoop = this.serveInbox();
    await this.tick();
    const tick = () => { this.ticking ??= this.tick().catch((err) => this.o.logger.error({ err }, 'extension supervisor tick failed')).finally(() => { this.ticking = undefined; }); };
    this.timer = setInterval(tick, this.tickMs);
    // NOTE: an install, enable or disable is acted on within WATCH_MS (one GET of the revision), not a whole tick.
    this.watch = setInterval(() => {
      if (this.ticking) return;
      void this.o.store.revision().then((rev) => { if (rev !== this.cached.revision) tick(); }, () => undefined);
    }, WATCH_MS);
  }

  /** stop stops every daemon this runtime holds (SIGTERM, then SIGKILL) and gives up their leases, so another runtime takes over at once. */
  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.timer);
    clearInterval(this.watch);
    await this.ticking;
    await Promise.all([...this.held.values()].map((h) => this.letGo(h, 'runtime shutdown')));
    this.inboxConn?.disconnect();
    await this.inboxLoop;
  }

  /** local returns the daemon this process runs for an extension, when it holds it and it is running. */
  local(name: string): DaemonProcess | undefined {
    const h = this.held.get(name);
    return h?.status.running ? h.daemon : undefined;
  }

  /** callLocal runs a tool call on a daemon this process holds. */
  async callLocal(c: ToolCall): Promise<ToolReply> {
    const d = this.local(c.name);
    if (!d) return { ok: false, error: `extension "${c.name}" has no running daemon in this runtime` };
    try {
      return { ok: true, result: await d.request('tools/call', { name: c.tool, arguments: c.args ?? {} }, c.timeout_ms) };
    } catch (err) {
      return { ok: false, error: (err as Error).message.slice(0, 500) };
    }
  }

  private async records(): Promise<Map<string, ExtensionRecord>> {
    const rev = await this.o.store.revision();
    if (rev !== this.cached.revision) {
      const { revision, records } = await this.o.store.all();
      this.cached = { revision, records: new Map(Object.entries(records).map(([k, v]) => [k, JSON.parse(v) as ExtensionRecord])) };
    }
    return this.cached.records;
  }

  /** tick renews what is held, lets go of what should not run, and takes up daemons nobody runs. */
  private async tick(): Promise<void> {
    if (!this.running) return;
    const records = await this.records();
    for (const h of [...this.held.values()]) {
      const r = records.get(h.name);
      if (!r || !r.enabled || !r.manifest.daemon) { await this.letGo(h, r ? 'disabled' : 'removed', !r); continue; }
      if (!(await this.o.store.renew(h.name, this.owner, this.o.settings.leaseMs))) {
        // NOTE: the lease lapsed (this process was paused past it) and another runtime may run the daemon now.
        this.o.logger.warn({ extension: h.name }, 'extension daemon lease lost; stopping the local daemon');
        await this.stopDaemon(h);
        this.held.delete(h.name);
        continue;
      }
      if (!sameInstall(r, h.record)) {
        await this.stopDaemon(h);
        h.record = r;
        h.status = this.fresh(r);
        await this.launch(h);
      } else if (h.status.state === 'MissingEnv') {
        await this.launch(h);
      }
    }
    await this.prune(records);
    for (const r of records.values()) {
      if (!this.running || this.held.has(r.name) || !r.enabled || !r.manifest.daemon) continue;
      if (!(await this.o.store.acquire(r.name, this.owner, this.o.settings.leaseMs))) continue;
      const prior = await this.o.store.status(r.name).then((s) => (s ? (JSON.parse(s) as DaemonStatus) : undefined));
      const h: Held = { name: r.name, record: r, status: this.fresh(r), epoch: 0, stopping: false };
      this.held.set(r.name, h);
      // NOTE: a daemon left in CrashLoop stays stopped on whichever runtime holds it, until a new generation.
      if (prior && sameInstall(r, prior) && prior.state === 'CrashLoop') {
        h.status = { ...prior, owner: this.owner };
        await this.write(h);
        continue;
      }
      if (prior && sameInstall(r, prior)) h.status = { ...h.status, failures: prior.failures, starts: prior.starts, last_error: prior.last_error };
      await this.launch(h);
    }
  }

  /**
   * prune removes this process's unpacked trees of removed or replaced versions (the API process that took the
   * removal drops its own at once; the others follow here), when the records changed and once a minute.
   */
  private async prune(records: Map<string, ExtensionRecord>): Promise<void> {
    if (this.cached.revision === this.pruned.revision && Date.now() - this.pruned.at < 60_000) return;
    this.pruned = { revision: this.cached.revision, at: Date.now() };
    const keep = new Set([...records.values(), ...[...this.held.values()].map((h) => h.record)].map((r) => r.sha256));
    await this.o.cache.prune(keep).catch((err) => this.o.logger.warn({ err: (err as Error).message }, 'extension cache prune failed'));
  }

  private fresh(r: ExtensionRecord): DaemonStatus {
    return {
      owner: this.owner, generation: r.generation, sha256: r.sha256, state: 'Starting', running: false, pid: 0, started_at: '', health: 'unknown', health_message: '',
      last_error: '', failures: 0, starts: 0, missing_env: [], restart_at: '', updated_at: '',
    };
  }

  private async write(h: Held, force = false): Promise<void> {
    h.status.updated_at = new Date().toISOString();
    // NOTE: the status is read by reader-role callers; what a daemon says (stderr, health) may hold its secrets.
    if (h.secrets?.length) {
      h.status.last_error = redactString(h.status.last_error, h.secrets).text;
      h.status.health_message = redactString(h.status.health_message, h.secrets).text;
    }
    const ok = await this.o.store.writeStatus(h.name, this.owner, JSON.stringify(h.status)).catch((err) => {
      this.o.logger.warn({ err, extension: h.name }, 'extension status write failed');
      return true;
    });
    if (!ok && !force) this.o.logger.warn({ extension: h.name }, 'extension status not written: the lease is held elsewhere');
  }

  /** launch starts the daemon of a held extension, or records why it cannot start. */
  private async launch(h: Held): Promise<void> {
    if (!this.running || h.stopping) return;
    const epoch = ++h.epoch;
    const r = h.record;
    const d = r.manifest.daemon!;
    const secrets = await this.o.security.secrets.resolve(d.secret_env);
    const missing = [...new Set([...secrets.missing, ...secrets.refused])].sort();
    if (missing.length) {
      if (h.status.state !== 'MissingEnv' || JSON.stringify(h.status.missing_env) !== JSON.stringify(missing)) {
        h.status = { ...h.status, state: 'MissingEnv', running: false, pid: 0, missing_env: missing, health: 'unhealthy', health_message: `missing environment: ${missing.join(', ')}`, last_error: Object.values(secrets.problems).join('; ').slice(0, 500) };
        await this.write(h);
      }
      return;
    }
    const check = this.o.security.exec.check({ command: d.command, shell: false });
    if (!check.ok) {
      h.status = { ...h.status, state: 'Refused', running: false, pid: 0, missing_env: [], health: 'unhealthy', health_message: `daemon.command: ${check.reason}`, last_error: check.reason };
      await this.write(h);
      return;
    }
    let dir: string;
    try {
      dir = await this.o.cache.materialize(r);
    } catch (err) {
      return this.failed(h, epoch, `the extension's artifact could not be unpacked: ${(err as Error).message}`);
    }
    const identity: Record<string, string> = { SVC_EXTENSION_NAME: r.name, SVC_EXTENSION_VERSION: r.manifest.version, SVC_EXTENSION_DIR: dir };
    h.secrets = secrets.values;
    const env = childEnv({ ...d.env, ...secrets.env }, identity);
    const daemon = new DaemonProcess([d.command, ...d.args], { cwd: dir, env });
    h.daemon = daemon;
    h.status = { ...h.status, state: 'Starting', running: false, pid: daemon.pid, started_at: new Date().toISOString(), missing_env: [], restart_at: '', starts: h.status.starts + 1 };
    void daemon.exited.then((e) => { if (h.epoch === epoch && !h.stopping) void this.failed(h, epoch, `the daemon ${describeExit(e)}${daemon.stderr ? `: ${daemon.stderr}` : ''}`); });
    try {
      await daemon.request('initialize', {
        extension: { name: r.name, version: r.manifest.version }, capabilities: r.provenance.permissions,
        tools: d.tools.map((t) => t.name), protocol: 'svc-extension/1',
      }, this.o.settings.initTimeoutMs);
    } catch (err) {
      // NOTE: a daemon that died says more by how it exited than by the closed pipe the handshake saw.
      const exit = await Promise.race([daemon.exited, new Promise<undefined>((r) => setTimeout(r, 300))]);
      const why = exit ? `the daemon ${describeExit(exit)} during initialize${daemon.stderr ? `: ${daemon.stderr}` : ''}` : `initialize failed: ${(err as Error).message}`;
      if (h.epoch === epoch) await this.failed(h, epoch, why);
      return;
    }
    if (h.epoch !== epoch) return;
    h.status = { ...h.status, state: 'Running', running: true };
    this.o.logger.info({ extension: r.name, pid: daemon.pid }, 'extension daemon started');
    await this.health(h, epoch);
  }

  /** health calls `health` once and schedules the next; an error or timeout is a failure. */
  private async health(h: Held, epoch: number): Promise<void> {
    const d = h.daemon;
    if (!d || h.epoch !== epoch) return;
    const { healthIntervalMs } = daemonTimings(h.record.manifest.daemon!);
    try {
      const res = await d.request<{ status?: string; message?: string }>('health', {}, Math.max(1000, Math.min(healthIntervalMs, 10_000)));
      if (h.epoch !== epoch) return;
      const status = res?.status === 'ok' || res?.status === 'degraded' ? res.status : 'unhealthy';
      if (status === 'unhealthy') throw new Error(`health answered ${JSON.stringify(res).slice(0, 200)}`);
      const before = significant(h.status);
      // NOTE: a healthy check ends a failure streak (the burst count restarts).
      h.status = { ...h.status, health: status, health_message: String(res.message ?? '').slice(0, 500), failures: status === 'ok' ? 0 : h.status.failures };
      if (significant(h.status) !== before) await this.write(h);
    } catch (err) {
      if (h.epoch === epoch) await this.failed(h, epoch, `health check failed: ${(err as Error).message}`);
      return;
    }
    if (h.epoch === epoch && this.running) {
      clearTimeout(h.timer);
      h.timer = setTimeout(() => void this.health(h, epoch), healthIntervalMs);
    }
  }

  /** failed counts one failure: the daemon is stopped, then restarted after the backoff, or left in CrashLoop. */
  private async failed(h: Held, epoch: number, why: string): Promise<void> {
    if (h.epoch !== epoch || h.stopping) return;
    h.epoch++;
    clearTimeout(h.timer);
    const d = h.daemon;
    h.daemon = undefined;
    if (d) await d.stop(daemonTimings(h.record.manifest.daemon!).shutdownTimeoutMs);
    const failures = h.status.failures + 1;
    const { backoffBaseMs, backoffMaxMs, crashLoopAfter } = this.o.settings;
    this.o.logger.warn({ extension: h.name, failures, err: why }, 'extension daemon failed');
    if (failures >= crashLoopAfter) {
      h.status = { ...h.status, state: 'CrashLoop', running: false, pid: 0, failures, last_error: why, health: 'unhealthy', health_message: `stopped after ${failures} consecutive failures`, restart_at: '' };
      await this.write(h);
      return;
    }
    const delay = Math.min(backoffMaxMs, backoffBaseMs * 2 ** (failures - 1));
    h.status = { ...h.status, state: 'Backoff', running: false, pid: 0, failures, last_error: why, health: 'unhealthy', health_message: `restarting in ${delay} ms`, restart_at: new Date(Date.now() + delay).toISOString() };
    await this.write(h);
    const next = h.epoch;
    h.timer = setTimeout(() => { if (h.epoch === next && this.running && this.held.get(h.name) === h) void this.launch(h); }, delay);
  }

  /** stopDaemon stops a held daemon within its shutdown timeout (SIGTERM, then SIGKILL). */
  private async stopDaemon(h: Held): Promise<void> {
    h.epoch++;
    clearTimeout(h.timer);
    const d = h.daemon;
    h.daemon = undefined;
    if (d) await d.stop(daemonTimings(h.record.manifest.daemon ?? { health_interval: '10s', shutdown_timeout: '5s' } as never).shutdownTimeoutMs);
  }

  /** letGo stops a daemon, records it stopped (or drops its status when the extension is gone) and releases the lease. */
  private async letGo(h: Held, why: string, gone = false): Promise<void> {
    h.stopping = true;
    await this.stopDaemon(h);
    this.held.delete(h.name);
    if (gone) {
      await this.o.store.writeStatus(h.name, this.owner, '').catch(() => false);
    } else {
      h.status = { ...h.status, state: 'Stopped', running: false, pid: 0, health: 'unknown', health_message: why, restart_at: '' };
      await this.write(h, true);
    }
    await this.o.store.release(h.name, this.owner).catch(() => undefined);
    this.o.logger.info({ extension: h.name, why }, 'extension daemon stopped');
  }

  /** serveInbox runs the tool calls other replicas route to the daemons this runtime holds. */
  private async serveInbox(): Promise<void> {
    while (this.running) {
      try {
        const got = await this.inboxConn!.brpop(this.o.store.inboxKey(this.owner), 1);
        if (!got) continue;
        const call = JSON.parse(got[1]) as ToolCall;
        void this.callLocal(call).then((reply) => this.o.store.reply(call.id, JSON.stringify(reply), call.timeout_ms + 5000));
      } catch (err) {
        if (this.running) {
          this.o.logger.warn({ err }, 'extension inbox read failed');
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    }
  }
}
