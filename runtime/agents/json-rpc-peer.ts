import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';

/** RpcError is a JSON-RPC error a handler throws to answer a request with that code (ACP: -32002 not found). */
export class RpcError extends Error {
  constructor(readonly code: number, message: string, readonly data?: unknown) {
    super(message);
    this.name = 'RpcError';
  }
}

type Handler = (params: any) => unknown;

/**
 * JsonRpcPeer is newline-delimited JSON-RPC 2.0 over a pair of streams (ACP's stdio transport), both ways:
 * handlers for the other side's requests and notifications, and `request` / `notify` towards it. Handlers run
 * concurrently (a `session/cancel` must reach a running `session/prompt`); what is sent keeps its order.
 * NOTE: the built-in agent speaks ACP through this instead of @agentclientprotocol/sdk, whose zod schemas
 * (validating every message) cost about 20 MiB per process; the service side still validates with the SDK.
 */
export class JsonRpcPeer {
  private readonly requests = new Map<string, Handler>();
  private readonly notifications = new Map<string, Handler>();
  private readonly waiting = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  private nextId = 0;

  constructor(private readonly input: Readable, private readonly output: Writable) {}

  onRequest(method: string, handler: Handler): this {
    this.requests.set(method, handler);
    return this;
  }

  onNotification(method: string, handler: Handler): this {
    this.notifications.set(method, handler);
    return this;
  }

  /** request sends a request and answers its result (or rejects with its error as an RpcError). */
  request<R = any>(method: string, params: unknown): Promise<R> {
    const id = ++this.nextId;
    return new Promise<R>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.send({ jsonrpc: '2.0', id, method, params });
    });
  }

  notify(method: string, params: unknown): Promise<void> {
    this.send({ jsonrpc: '2.0', method, params });
    return Promise.resolve();
  }

  /** run serves until the input ends; requests still waiting for an answer are rejected then. */
  async run(): Promise<void> {
    const lines = createInterface({ input: this.input, crlfDelay: Infinity });
    for await (const line of lines) {
      if (!line.trim()) continue;
      let msg: { id?: number | string | null; method?: string; params?: unknown; result?: unknown; error?: { code: number; message: string; data?: unknown } };
      try {
        msg = JSON.parse(line);
      } catch {
        this.send({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
        continue;
      }
      if (msg.method !== undefined) void this.dispatch(msg as { id?: number | string; method: string; params?: unknown });
      else if (typeof msg.id === 'number') this.settle(msg.id, msg.result, msg.error);
    }
    for (const w of this.waiting.values()) w.reject(new Error('connection closed'));
    this.waiting.clear();
  }

  private async dispatch(msg: { id?: number | string; method: string; params?: unknown }): Promise<void> {
    const isRequest = msg.id !== undefined && msg.id !== null;
    const handler = (isRequest ? this.requests : this.notifications).get(msg.method);
    if (!isRequest) {
      try { await handler?.(msg.params); } catch { /* a notification has no answer */ }
      return;
    }
    if (!handler) return this.send({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: `Method not found: ${msg.method}` } });
    try {
      const result = await handler(msg.params);
      this.send({ jsonrpc: '2.0', id: msg.id, result: result ?? null });
    } catch (err) {
      const e = err instanceof RpcError ? err : new RpcError(-32603, (err as Error).message ?? 'Internal error');
      this.send({ jsonrpc: '2.0', id: msg.id, error: { code: e.code, message: e.message, ...(e.data === undefined ? {} : { data: e.data }) } });
    }
  }

  private settle(id: number, result: unknown, error?: { code: number; message: string; data?: unknown }): void {
    const w = this.waiting.get(id);
    if (!w) return;
    this.waiting.delete(id);
    if (error) w.reject(new RpcError(error.code, error.message, error.data));
    else w.resolve(result);
  }

  private send(msg: object): void {
    this.output.write(`${JSON.stringify(msg)}\n`);
  }
}
