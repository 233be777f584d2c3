import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { JSONRPCClient, JSONRPCErrorException, JSONRPCServer, JSONRPCServerAndClient, type JSONRPCResponse } from 'json-rpc-2.0';

/** RpcError is a JSON-RPC error a handler throws to answer a request with that code (ACP: -32002 not found). */
export class RpcError extends JSONRPCErrorException {
  constructor(code: number, message: string, data?: unknown) {
    super(message, code, data);
    this.name = 'RpcError';
  }
}

type Handler = (params: any) => unknown;

/**
 * JsonRpcPeer is ACP's stdio transport for the built-in agent: newline-delimited JSON-RPC 2.0 both ways, through
 * json-rpc-2.0 (a small, dependency-free implementation; the framing and matching of answers are its).
 * Handlers run concurrently (a `session/cancel` must reach a running `session/prompt`).
 * NOTE: the built-in agent speaks ACP through this instead of @agentclientprotocol/sdk, whose zod schemas
 * (validating every message) cost about 20 MiB per agent process; the service side still validates with the SDK.
 */
export class JsonRpcPeer {
  private readonly rpc: JSONRPCServerAndClient;

  constructor(private readonly input: Readable, private readonly output: Writable) {
    const send = (msg: unknown) => { this.output.write(`${JSON.stringify(msg)}\n`); };
    const server = new JSONRPCServer();
    // NOTE: an unexpected error answers "Internal error" (-32603), not the library's default code 0.
    server.mapErrorToJSONRPCErrorResponse = (id, err) => ({
      jsonrpc: '2.0', id,
      error: err instanceof JSONRPCErrorException ? err.toObject() : { code: -32603, message: (err as Error)?.message || 'Internal error' },
    } as JSONRPCResponse as never);
    this.rpc = new JSONRPCServerAndClient(server, new JSONRPCClient(async (request) => send(request)));
  }

  onRequest(method: string, handler: Handler): this {
    this.rpc.addMethod(method, handler);
    return this;
  }

  /** onNotification handles a method the other side only notifies (JSON-RPC methods answer both ways alike). */
  onNotification(method: string, handler: Handler): this {
    return this.onRequest(method, handler);
  }

  /** request sends a request and answers its result (or rejects with its error). */
  async request<R = any>(method: string, params: unknown): Promise<R> {
    return (await this.rpc.request(method, params)) as R;
  }

  notify(method: string, params: unknown): Promise<void> {
    this.rpc.notify(method, params);
    return Promise.resolve();
  }

  /** run serves until the input ends; requests still waiting for an answer are rejected then. */
  async run(): Promise<void> {
    for await (const line of createInterface({ input: this.input, crlfDelay: Infinity })) {
      if (!line.trim()) continue;
      let msg: unknown;
      try {
        msg = JSON.parse(line);
      } catch {
        this.output.write(`${JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } })}\n`);
        continue;
      }
      void this.rpc.receiveAndSend(msg, undefined, undefined);
    }
    this.rpc.rejectAllPendingRequests('connection closed');
  }
}
