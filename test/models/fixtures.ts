import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

/** TEST_KEY is the provider key the fixtures expect: it must never appear in an answer, a log line or an event. */
export const TEST_KEY = 'sk-catalogtest-6f1d0c2b9a8e7d6c5b4a';

/**
 * ProviderFixture is a local OpenAI-compatible (and Anthropic-style) model list server: `GET /v1/models` answers
 * `models` when the request carries TEST_KEY (Bearer or x-api-key), 401 echoing the key it got otherwise (as real
 * providers do, partly), or `status` when set; it counts requests and can answer slowly. It also serves `catalog`
 * at `/api.json` (a models.dev copy).
 */
export class ProviderFixture {
  requests = 0;
  catalogRequests = 0;
  status = 200;
  delayMs = 0;
  models: string[] = ['gpt-4o', 'gpt-4o-mini', 'fixture-only-1'];
  catalog: unknown = {};
  private server?: http.Server;
  url = '';

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      void (async () => {
        if (req.url === '/api.json') {
          this.catalogRequests++;
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify(this.catalog));
          return;
        }
        if (!req.url?.startsWith('/v1/models')) { res.statusCode = 404; res.end('{}'); return; }
        this.requests++;
        if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
        const got = req.headers['x-api-key'] ?? /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
        res.setHeader('content-type', 'application/json');
        if (this.status !== 200) {
          res.statusCode = this.status;
          res.end(JSON.stringify({ error: { message: `upstream trouble for key ${got}` } }));
          return;
        }
        if (got !== TEST_KEY) {
          res.statusCode = 401;
          res.end(JSON.stringify({ error: { message: `Incorrect API key provided: ${got}`, type: 'invalid_request_error' } }));
          return;
        }
        res.end(JSON.stringify({ object: 'list', data: this.models.map((id) => ({ id, object: 'model', created: 0, owned_by: 'fixture' })) }));
      })();
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

/** writeSettings writes the global settings file (DATA_DIR/config.yaml) with YAML text. */
export function writeSettings(dataDir: string, yaml: string): void {
  writeFileSync(path.join(dataDir, 'config.yaml'), yaml);
}

/** providerYaml configures one provider named `name` at `url` with an env: key ref. */
export const providerYaml = (name: string, url: string, env = 'SVC_SECRET_CATALOG_KEY', kind = 'openai-compatible') =>
  `providers:\n  - name: ${name}\n    kind: ${kind}\n    base_url: ${url}${kind === 'anthropic' ? '' : '/v1'}\n    api_key: env:${env}\n`;
