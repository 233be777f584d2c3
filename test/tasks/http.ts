import http from 'node:http';

/**
 * AgentHttp is one agent's kept-alive node:http connection with its identity headers (fetch() costs more per
 * request than the service does). `post` answers the status and the parsed JSON body.
 */
export class AgentHttp {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  private readonly url: URL;

  constructor(base: string, private readonly headers: Record<string, string> = {}) {
    this.url = new URL(base);
  }

  post(path: string, body: unknown = {}): Promise<{ status: number; body: any }> {
    return new Promise((resolve, reject) => {
      const req = http.request({ host: this.url.hostname, port: this.url.port, path, method: 'POST', agent: this.agent, headers: { 'content-type': 'application/json', ...this.headers } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try { parsed = text ? JSON.parse(text) : undefined; } catch { /* not JSON */ }
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
  }

  close(): void { this.agent.destroy(); }
}
