import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** Received is one request a WebhookReceiver took. */
export interface Received {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The status it was answered with. */
  status: number;
}

/**
 * WebhookReceiver is a local node:http receiver the tests control: it records every request and answers 200, and
 * can be stopped and started again on the same port (a receiver that is down for a while).
 */
export class WebhookReceiver {
  readonly requests: Received[] = [];
  port = 0;
  private server?: http.Server;
  /** Status answered to POSTs (e.g. 503 to act broken while listening). */
  postStatus = 200;
  /** Status answered to one POST by its body, where it says one (e.g. to refuse one delivery of a batch). */
  postStatusFor?: (body: string) => number | undefined;

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  posts(path?: string): Received[] {
    return this.requests.filter((r) => r.method === 'POST' && (!path || r.path === path));
  }

  async start(): Promise<void> {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        res.statusCode = req.method === 'POST' ? this.postStatusFor?.(body) ?? this.postStatus : 200;
        this.requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, status: res.statusCode });
        res.end(req.method === 'POST' ? '{"ok":true}' : undefined);
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    const closed = new Promise<void>((resolve) => s.close(() => resolve()));
    s.closeAllConnections();
    await closed;
  }
}
