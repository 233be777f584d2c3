import { spawn, type ChildProcess } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import {
  client, methods, ndJsonStream, PROTOCOL_VERSION, RequestError, type ClientConnection, type InitializeResponse,
  type ReadTextFileRequest, type ReadTextFileResponse, type RequestPermissionRequest, type RequestPermissionResponse,
  type SessionNotification, type WriteTextFileRequest, type WriteTextFileResponse,
} from '@agentclientprotocol/sdk';

const HANDSHAKE_TIMEOUT_MS = 30_000;
/** How far back a pool's burst of sessions counts toward its headroom (see AgentPool.headroom). */
const BURST_WINDOW_MS = 2_000;

/** AgentLaunch is how one agent process starts: program, argv, shell or not, directory and whole environment. */
export interface AgentLaunch {
  file: string;
  args: string[];
  shell: boolean;
  cwd: string;
  env: Record<string, string>;
  /** The client file methods offered in `initialize` (the definition's `client_capabilities.fs`); absent: both. */
  fs?: { read: boolean; write: boolean };
}

/**
 * AgentSessionClient is the client half of one ACP session hosted by an agent process: it answers the agent's
 * calls that name the session's `sessionId`, and hears when the process exits.
 */
export interface AgentSessionClient {
  update(n: SessionNotification): void;
  requestPermission(p: RequestPermissionRequest): Promise<RequestPermissionResponse>;
  readTextFile(p: ReadTextFileRequest): Promise<ReadTextFileResponse>;
  writeTextFile(p: WriteTextFileRequest): Promise<WriteTextFileResponse>;
  exited(code: number | null, signal: NodeJS.Signals | null): void;
}

/**
 * AgentSlot is one session's place on an agent process, from acquire to release. Calls the agent makes are
 * routed to it only once `attach` names its ACP session; an exit of the process reaches it from the start.
 */
export class AgentSlot {
  acpSessionId = '';
  released = false;

  constructor(readonly proc: AgentProcess, readonly client: AgentSessionClient) {}

  get conn(): ClientConnection {
    return this.proc.conn;
  }

  /** attach routes the agent's calls that name `acpSessionId` (updates, permission and fs requests) to this slot. */
  attach(acpSessionId: string): void {
    if (this.acpSessionId) this.proc.routes.delete(this.acpSessionId);
    this.acpSessionId = acpSessionId;
    this.proc.routes.set(acpSessionId, this);
  }
}

/**
 * AgentProcess is one agent process and its ACP connection over stdio. It hosts up to `capacity` sessions: every
 * call from the agent is routed by the ACP `sessionId` it names, so sessions sharing a process never see each
 * other's events, permission requests or file requests.
 */
export class AgentProcess {
  readonly child: ChildProcess;
  readonly conn: ClientConnection;
  /** The answer to `initialize`; rejects when the handshake fails. */
  readonly ready: Promise<InitializeResponse>;
  readonly slots = new Set<AgentSlot>();
  readonly routes = new Map<string, AgentSlot>();
  stderrTail = '';
  exited = false;
  /** In-flight or succeeded `authenticate` requests, by method id. */
  private readonly auth = new Map<string, Promise<void>>();

  constructor(readonly key: string | undefined, readonly capacity: number, launch: AgentLaunch, private readonly onGone: (p: AgentProcess) => void) {
    const child = (this.child = spawn(launch.file, launch.args, { cwd: launch.cwd, env: launch.env, stdio: 'pipe', shell: launch.shell, detached: true }));
    child.stderr!.on('data', (d: Buffer) => { this.stderrTail = (this.stderrTail + d.toString()).slice(-8192); });
    child.on('error', (err) => { this.stderrTail += `\nspawn error: ${err.message}`; });
    child.on('exit', (code, signal) => {
      this.exited = true;
      this.onGone(this);
      for (const slot of [...this.slots]) slot.client.exited(code, signal);
    });
    const route = (sessionId: string): AgentSessionClient => {
      const slot = this.routes.get(sessionId);
      if (!slot) throw RequestError.resourceNotFound(sessionId);
      return slot.client;
    };
    const app = client({ name: 'svc' })
      .onNotification(methods.client.session.update, ({ params }) => { this.routes.get(params.sessionId)?.client.update(params); })
      .onRequest(methods.client.session.requestPermission, ({ params }) => route(params.sessionId).requestPermission(params))
      .onRequest(methods.client.fs.readTextFile, ({ params }) => route(params.sessionId).readTextFile(params))
      .onRequest(methods.client.fs.writeTextFile, ({ params }) => route(params.sessionId).writeTextFile(params));
    this.conn = app.connect(ndJsonStream(Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>, Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>));
    this.ready = withTimeout(this.conn.agent.request(methods.agent.initialize, {
      protocolVersion: PROTOCOL_VERSION, clientCapabilities: { fs: { readTextFile: launch.fs?.read ?? true, writeTextFile: launch.fs?.write ?? true } },
      clientInfo: { name: 'svc', version: '0.1.0' },
    }), HANDSHAKE_TIMEOUT_MS, 'initialize');
    this.ready.catch(() => undefined);
  }

  /**
   * authenticate runs ACP `authenticate` with `methodId` once for this process: the sessions it hosts share the
   * process's authentication. NOTE: a failure is forgotten, so the next session placed here tries again (a
   * credential may have been fixed meanwhile, or the failure was transient).
   */
  authenticate(methodId: string): Promise<void> {
    let done = this.auth.get(methodId);
    if (!done) {
      done = withTimeout(this.conn.agent.request(methods.agent.authenticate, { methodId }), HANDSHAKE_TIMEOUT_MS, 'authenticate').then(() => undefined);
      this.auth.set(methodId, done);
      done.catch(() => this.auth.delete(methodId));
    }
    return done;
  }

  /** hasRoom says whether another session may be placed here. */
  get hasRoom(): boolean {
    return !this.exited && this.slots.size < this.capacity;
  }

  /** kill ends the process and everything it started (its own process group). */
  kill(): void {
    this.conn.close();
    const { child } = this;
    if (child.exitCode !== null || child.signalCode !== null || !child.pid) return;
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  }
}

/** AgentPoolOptions configures an AgentPool. */
export interface AgentPoolOptions {
  /** Sessions one shared process hosts at most (AGENT_SESSIONS_PER_PROCESS). */
  sessionsPerProcess: number;
}

/**
 * AgentPool places sessions on agent processes. Sessions whose launch has a pool key (same agent definition,
 * workspace and environment) share a process up to `sessionsPerProcess`; a launch without a key gets a process
 * of its own, as every agent did before pooling. A process exits when its last session leaves.
 * NOTE: once a key's free slots fall to its headroom (a quarter of a process, more while sessions come fast), its
 * next process starts at once, with no session yet (a warm spare): the session that needs it then finds it started,
 * since an agent's start is most of a create's tail (sessions.ts: sequential create p99 52 -> 15 ms; automation at
 * 100 starts/s: p99 ~510 -> 348 ms). A key's spares are at most its headroom beyond its sessions' need (two
 * processes' worth), and they end with its last session.
 */
export class AgentPool {
  private readonly shared = new Map<string, Set<AgentProcess>>();
  private readonly all = new Set<AgentProcess>();
  /** When each key's sessions placed in a burst in the last BURST_WINDOW_MS came (see headroom). */
  private readonly placed = new Map<string, number[]>();

  constructor(private readonly o: AgentPoolOptions) {}

  /**
   * acquire takes a slot for one session: on a process of `key` with room, else on a new one. The slot hears the
   * process's exit at once; the caller awaits `slot.proc.ready`, opens its ACP session and attaches it.
   */
  acquire(key: string | undefined, launch: AgentLaunch, session: AgentSessionClient): AgentSlot {
    const overlapping = key !== undefined && this.opening(key) > 0;
    const proc = (key && this.withRoom(key)) || this.start(key, launch);
    const slot = new AgentSlot(proc, session);
    proc.slots.add(slot);
    if (key && this.freeSlots(key) <= this.headroom(key, overlapping)) this.start(key, launch);
    return slot;
  }

  /**
   * headroom is how many free slots a key keeps ready: a quarter of a process, or, in a burst, as many sessions as
   * came while another of the key's sessions was still opening in the last BURST_WINDOW_MS (at most two processes'
   * worth).
   * NOTE: a quarter starts the next process in time for sessions that come one at a time, but late for a burst: at
   * 100 automation starts a second, 15% of session starts waited for an agent process still starting (a start's
   * p99 322 ms, of which that wait 196 ms). Sessions opened one after another never count as a burst.
   */
  private headroom(key: string, overlapping: boolean): number {
    const now = Date.now();
    const recent = (this.placed.get(key) ?? []).filter((t) => now - t < BURST_WINDOW_MS);
    if (overlapping) recent.push(now);
    this.placed.set(key, recent);
    const cap = this.o.sessionsPerProcess;
    return Math.min(2 * cap, Math.max(Math.floor(cap / 4), recent.length));
  }

  /** opening counts a key's sessions placed but not yet open on their process (not attached). */
  private opening(key: string): number {
    let n = 0;
    for (const p of this.shared.get(key) ?? []) for (const slot of p.slots) if (!slot.acpSessionId) n++;
    return n;
  }

  private withRoom(key: string): AgentProcess | undefined {
    return [...(this.shared.get(key) ?? [])].find((p) => p.hasRoom);
  }

  private freeSlots(key: string): number {
    let free = 0;
    for (const p of this.shared.get(key) ?? []) if (!p.exited) free += p.capacity - p.slots.size;
    return free;
  }

  private start(key: string | undefined, launch: AgentLaunch): AgentProcess {
    const proc = new AgentProcess(key, key ? this.o.sessionsPerProcess : 1, launch, (p) => this.forget(p));
    this.all.add(proc);
    if (key) this.shared.set(key, (this.shared.get(key) ?? new Set()).add(proc));
    return proc;
  }

  /**
   * release takes a session off its process, once: a shared process is asked to close the ACP session (when it
   * advertises `session/close`) and keeps running for its other sessions; a process left empty is ended.
   */
  release(slot: AgentSlot): void {
    if (slot.released) return;
    slot.released = true;
    const { proc } = slot;
    proc.slots.delete(slot);
    if (slot.acpSessionId && proc.routes.get(slot.acpSessionId) === slot) proc.routes.delete(slot.acpSessionId);
    if (!proc.slots.size) {
      this.forget(proc);
      proc.kill();
      // NOTE: the key's last session is gone: its spares go too.
      const rest = proc.key ? [...(this.shared.get(proc.key) ?? [])] : [];
      if (rest.every((p) => !p.slots.size)) {
        for (const p of rest) {
          this.forget(p);
          p.kill();
        }
      }
      return;
    }
    if (slot.acpSessionId) this.closeSession(proc, slot.acpSessionId);
  }

  /** closeSession asks a live process to close one ACP session, when it advertises `session/close` (best effort). */
  closeSession(proc: AgentProcess, acpSessionId: string): void {
    if (proc.exited) return;
    void proc.ready.then((init) => {
      if (init.agentCapabilities?.sessionCapabilities?.close) return proc.conn.agent.request(methods.agent.session.close, { sessionId: acpSessionId });
    }).catch(() => undefined);
  }

  /** processes lists the live agent processes (for metrics and benchmarks). */
  get processes(): AgentProcess[] {
    return [...this.all];
  }

  /** stop ends every process (their sessions were stopped first). */
  stop(): void {
    for (const p of [...this.all]) {
      this.forget(p);
      p.kill();
    }
  }

  private forget(p: AgentProcess): void {
    this.all.delete(p);
    if (!p.key) return;
    const set = this.shared.get(p.key);
    set?.delete(p);
    if (set && !set.size) {
      this.shared.delete(p.key);
      this.placed.delete(p.key);
    }
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    p.then((v) => { clearTimeout(t); resolve(v); }, (e) => { clearTimeout(t); reject(e); });
  });
}
