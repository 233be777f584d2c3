import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { duplicateConnection } from '../../store/connections.ts';
import type { ExtensionStore } from '../../store/extension-store.ts';
import type { SecretRefs } from '../security/child-env.ts';
import type { ExtensionSupervisor, ToolReply } from './supervisor.ts';
import type { DaemonStatus, ExtensionRecord } from './types.ts';

/** DaemonToolState is whether an extension's daemon can take tool calls, and why not. */
export interface DaemonToolState { ready: boolean; reason_codes: string[] }

/**
 * ExtensionToolHost is the tool catalog's view of extension daemons (backend `extension_host`): a daemon's tools are
 * executable while its daemon runs and its last health check was `ok`, and a call goes to the runtime that holds the
 * daemon's lease: in this process directly, otherwise through that runtime's Redis inbox, answered on a reply list.
 */
export class ExtensionToolHost {
  private cached = { revision: '', states: new Map<string, DaemonStatus>(), secrets: new Map<string, string[]>() };

  constructor(private readonly o: { store: ExtensionStore; redis: Redis; secrets: SecretRefs; supervisor?: ExtensionSupervisor }) {}

  /**
   * statuses reads every daemon's status and the values of each daemon's `secret_env` (to redact them from its tool
   * results, as an MCP server's are), re-read only when the status or extension revision moved.
   */
  async statuses(): Promise<{ revision: string; states: Map<string, DaemonStatus>; secrets: Map<string, string[]> }> {
    const [statusRev, extRev] = await Promise.all([this.o.store.statusRevision(), this.o.store.revision()]);
    const rev = `${statusRev}.${extRev}`;
    if (rev !== this.cached.revision) {
      const [{ statuses }, { records }] = await Promise.all([this.o.store.statuses(), this.o.store.all()]);
      const secrets = new Map<string, string[]>();
      for (const raw of Object.values(records)) {
        const r = JSON.parse(raw) as ExtensionRecord;
        if (r.enabled && r.manifest.daemon && Object.keys(r.manifest.daemon.secret_env).length) secrets.set(r.name, (await this.o.secrets.resolve(r.manifest.daemon.secret_env)).values);
      }
      this.cached = { revision: rev, states: new Map(Object.entries(statuses).map(([k, v]) => [k, JSON.parse(v) as DaemonStatus])), secrets };
    }
    return this.cached;
  }

  /** state answers whether an extension's tools can run now. */
  static stateOf(s: DaemonStatus | undefined): DaemonToolState {
    if (!s || !s.running) return { ready: false, reason_codes: ['extension_inactive'] };
    if (s.health !== 'ok') return { ready: false, reason_codes: ['backend_unhealthy'] };
    return { ready: true, reason_codes: [] };
  }

  /** call runs one tool call on the daemon, wherever it runs; rejects with why when it cannot. */
  async call(name: string, tool: string, args: unknown, timeoutMs: number): Promise<NonNullable<Extract<ToolReply, { ok: true }>['result']>> {
    const call = { id: randomUUID(), name, tool, args, timeout_ms: timeoutMs };
    let reply: ToolReply;
    if (this.o.supervisor?.local(name)) {
      reply = await this.o.supervisor.callLocal(call);
    } else {
      const owner = await this.o.store.holder(name);
      if (!owner) throw new Error(`extension "${name}" has no running daemon`);
      const conn = duplicateConnection(this.o.redis);
      try {
        await this.o.store.sendCall(owner, JSON.stringify(call), timeoutMs + 5000);
        const got = await conn.blpop(this.o.store.replyKey(call.id), Math.max(1, Math.ceil(timeoutMs / 1000) + 1));
        if (!got) throw new Error(`extension "${name}" did not answer within ${timeoutMs} ms (timed out)`);
        reply = JSON.parse(got[1]) as ToolReply;
      } finally {
        conn.disconnect();
      }
    }
    if (!reply.ok) throw new Error(reply.error);
    return reply.result;
  }
}
