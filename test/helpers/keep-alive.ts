import http from 'node:http';

/**
 * KeepAliveClient sends sequential requests over one kept-alive node:http connection. Benchmarks use it
 * because fetch() adds a per-request cost of its own that would be counted as the service's.
 */
export class KeepAliveClient {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  private readonly url: URL;

  constructor(base: string) {
    this.url = new URL(base);
  }

  /** request answers the status and the whole body as text. */
  request(method: string, path: string, body?: unknown): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = http.request({ host: this.url.hostname, port: this.url.port, path, method, agent: this.agent, headers: { 'content-type': 'application/json' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      });
      req.on('error', reject);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });
  }

  /**
   * drain reads a response to its end without keeping it (a large list would otherwise cost the client more than the
   * service), sending `headers` (e.g. Accept-Encoding, If-None-Match); a compressed body is counted, not decoded.
   */
  drain(path: string, headers: Record<string, string> = {}): Promise<{ status: number; bytes: number }> {
    return new Promise((resolve, reject) => {
      const req = http.request({ host: this.url.hostname, port: this.url.port, path, agent: this.agent, headers }, (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => { bytes += c.length; });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes }));
      });
      req.on('error', reject);
      req.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
