import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { freePort } from '../helpers/redis-server.ts';

/** EVERYTHING is the entry of @modelcontextprotocol/server-everything, the MCP project's reference server. */
export const EVERYTHING = path.join(path.dirname(createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/package.json')), 'dist/index.js');

/** everythingStdio is an mcp_server spec that runs the reference server over stdio. */
export const everythingStdio = (name: string) => ({ name, command: process.execPath, args: [EVERYTHING, 'stdio'] });

/** EverythingHttp runs the reference server on streamable HTTP (or the older SSE transport) at a fixed port, so a test can kill and restart it there. */
export class EverythingHttp {
  private child?: ChildProcess;
  port = 0;

  constructor(readonly transport: 'streamableHttp' | 'sse' = 'streamableHttp') {}

  /** url is the endpoint a client connects to: `/mcp` for streamable HTTP, `/sse` (the event stream) for SSE. */
  get url(): string {
    return `http://127.0.0.1:${this.port}/${this.transport === 'sse' ? 'sse' : 'mcp'}`;
  }

  /** reservePort picks the port without starting the server (a test may want the URL to be dead first). */
  async reservePort(): Promise<this> {
    this.port ||= await freePort();
    return this;
  }

  /** start runs the server and waits until it listens. */
  async start(): Promise<this> {
    await this.reservePort();
    const child = spawn(process.execPath, [EVERYTHING, this.transport], { env: { ...process.env, PORT: String(this.port) }, stdio: ['ignore', 'ignore', 'pipe'] });
    this.child = child;
    await new Promise<void>((resolve, reject) => {
      let err = '';
      child.stderr!.on('data', (d) => {
        err += d;
        // NOTE: streamable HTTP says "listening on port N", SSE says "Server is running on port N".
        if (/(listening|running) on port/.test(err)) resolve();
      });
      child.once('exit', (code) => reject(new Error(`server-everything exited with ${code}: ${err}`)));
    });
    return this;
  }

  /** stop SIGKILLs the server and waits for it to exit. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null) return;
    await new Promise((r) => { child.once('exit', r); child.kill('SIGKILL'); });
  }
}
