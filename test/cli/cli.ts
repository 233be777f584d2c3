import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';

/** SVCCTL is the bin of package.json, run as a child process exactly as `npx svcctl` runs it. */
export const SVCCTL = fileURLToPath(new URL('../../runtime/cli/svcctl.mjs', import.meta.url));

/** Run is a finished svcctl: exit code and output. */
export interface Run { code: number; stdout: string; stderr: string }

/** start spawns svcctl with only the given environment (plus PATH and HOME); no config file unless given. */
export function start(args: string[], env: Record<string, string> = {}): ChildProcess & { out: { stdout: string; stderr: string }; done: Promise<Run> } {
  const child = spawn(process.execPath, [SVCCTL, ...args], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, SVCCTL_CONFIG: '/nonexistent/svcctl.yaml', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  }) as ChildProcess & { out: { stdout: string; stderr: string }; done: Promise<Run> };
  child.out = { stdout: '', stderr: '' };
  child.stdout!.on('data', (d) => { child.out.stdout += d; });
  child.stderr!.on('data', (d) => { child.out.stderr += d; });
  child.done = new Promise((resolve) => child.on('close', (code) => resolve({ code: code ?? -1, ...child.out })));
  return child;
}

/** svcctl runs svcctl to the end. NOTE: async (spawn), since the service runs in this test process. */
export function svcctl(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return start(args, env).done;
}

/**
 * InterposingProxy forwards JSON requests to the service; `beforePut` runs before a PUT is forwarded, so a test
 * can make a concurrent write land between svcctl's read and its write.
 */
export class InterposingProxy {
  private server?: http.Server;
  beforePut?: (path: string, body: any) => Promise<void>;
  url = '';

  constructor(private readonly target: () => string) {}

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d) => { body += d; });
      req.on('end', async () => {
        try {
          if (req.method === 'PUT' && this.beforePut) {
            const hook = this.beforePut;
            this.beforePut = undefined;
            await hook(req.url!, JSON.parse(body));
          }
          const r = await fetch(this.target() + req.url, { method: req.method, headers: { 'content-type': 'application/json', accept: 'application/json' }, body: body || undefined });
          res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' });
          res.end(await r.text());
        } catch (err) {
          res.writeHead(502);
          res.end(String(err));
        }
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise((r) => this.server?.close(r));
  }
}

/** CuttingProxy forwards TCP to the service; `cut()` drops every open connection (a dropped watch stream). */
export class CuttingProxy {
  private server?: net.Server;
  private readonly sockets = new Set<net.Socket>();
  url = '';

  constructor(private readonly target: () => string) {}

  async start(): Promise<void> {
    this.server = net.createServer((client) => {
      const { hostname, port } = new URL(this.target());
      const upstream = net.connect(Number(port), hostname);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** cut destroys every connection open now and returns how many there were. */
  cut(): number {
    const n = this.sockets.size;
    for (const s of this.sockets) s.destroy();
    return n;
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise((r) => this.server?.close(r));
  }
}
