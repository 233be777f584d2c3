import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { expect } from 'chai';
import { stringify } from 'yaml';
import type { ServiceFixture } from '../helpers/fixture.ts';

/** TarEntry is one entry of a hand-made tar (so a test can make entries no archiver would: `..`, devices, escaping links). */
export interface TarEntry { path: string; content?: string | Buffer; type?: 'file' | 'dir' | 'symlink' | 'hardlink' | 'chardev' | 'fifo'; linkpath?: string }

const TYPE_FLAG = { file: '0', hardlink: '1', symlink: '2', chardev: '3', dir: '5', fifo: '6' } as const;

/** tarHeader is one entry's 512-byte ustar header, declaring `size` bytes of content (so a test can declare more than it sends). */
export function tarHeader(e: TarEntry, size: number): Buffer {
  const h = Buffer.alloc(512);
  const put = (s: string, at: number, len: number) => h.write(s.slice(0, len), at, len, 'utf8');
  const oct = (n: number, at: number, len: number) => put(`${n.toString(8).padStart(len - 1, '0')}\0`, at, len);
  put(e.path, 0, 100);
  oct(e.type === 'dir' ? 0o755 : 0o644, 100, 8);
  oct(0, 108, 8);
  oct(0, 116, 8);
  oct(size, 124, 12);
  oct(1_700_000_000, 136, 12);
  h.fill(' ', 148, 156);
  put(TYPE_FLAG[e.type ?? 'file'], 156, 1);
  put(e.linkpath ?? '', 157, 100);
  put('ustar\0', 257, 6);
  put('00', 263, 2);
  let sum = 0;
  for (const b of h) sum += b;
  put(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
  return h;
}

/** tarRaw builds an uncompressed ustar archive from entries, byte for byte as given, ending with the two zero blocks. */
export function tarRaw(entries: TarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const body = e.type && e.type !== 'file' ? Buffer.alloc(0) : Buffer.from(e.content ?? '');
    parts.push(tarHeader(e, body.length), body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

/** tarGz builds a gzipped ustar archive from entries, byte for byte as given (no path cleaning). */
export function tarGz(entries: TarEntry[]): Buffer {
  return gzipSync(tarRaw(entries));
}

/** skillMd is a valid SKILL.md for a name. */
export const skillMd = (name: string, body = 'Use it well.', version = '1.0.0') => `---\nname: ${name}\ndescription: The ${name} skill\nversion: ${version}\n---\n${body}\n`;

/** skillArchive is a well-formed skill archive: `<name>/SKILL.md` and a helper script. */
export const skillArchive = (name: string, body?: string, version?: string) => tarGz([
  { path: `${name}/`, type: 'dir' }, { path: `${name}/SKILL.md`, content: skillMd(name, body, version) }, { path: `${name}/scripts/run.sh`, content: '#!/bin/sh\necho hi\n' },
]);

export const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Fixture is a small HTTP server whose routes a test sets; it records every request. */
class Fixture {
  private server?: http.Server;
  readonly requests: { method: string; url: string; headers: http.IncomingHttpHeaders }[] = [];
  url = '';

  constructor(private readonly handle: (req: http.IncomingMessage, res: http.ServerResponse, url: URL) => void | Promise<void>) {}

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      this.requests.push({ method: req.method!, url: req.url!, headers: req.headers });
      Promise.resolve(this.handle(req, res, new URL(req.url!, 'http://x'))).catch((err) => { res.statusCode = 500; res.end(String(err)); });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((r) => this.server?.close(r) ?? r(undefined));
  }
}

const json = (res: http.ServerResponse, status: number, body: unknown) => {
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify(body));
};

/** RegistryServer is one server.json entry of the registry fixture, with the registry's official metadata. */
export interface RegistryServer { server: Record<string, unknown>; status: 'active' | 'deprecated' | 'deleted'; publishedAt: string; updatedAt: string }

/**
 * RegistryFixture speaks the MCP Registry API v0.1 (`GET /v0.1/servers`): `limit` (1-100, else 400), an opaque
 * `cursor`, `search` (substring of the name), `version=latest`, and `updated_since` (then deleted and deprecated
 * entries are included, as the official registry does); items are `{server, _meta}`, paging in `metadata.nextCursor`.
 */
export class RegistryFixture extends Fixture {
  servers: RegistryServer[] = [];
  failing = false;

  constructor() {
    super((req, res, url) => {
      if (url.pathname !== '/v0.1/servers') return json(res, 404, { error: 'Not found' });
      if (this.failing) return json(res, 500, { error: 'registry down' });
      const limit = Number(url.searchParams.get('limit') ?? 30);
      if (!(limit >= 1 && limit <= 100)) return json(res, 400, { error: 'limit must be 1..100' });
      const since = url.searchParams.get('updated_since');
      const search = url.searchParams.get('search') ?? '';
      let list = this.servers.filter((s) => (since ? s.updatedAt >= since : s.status === 'active') && String(s.server.name).includes(search));
      list = [...list].sort((a, b) => String(a.server.name).localeCompare(String(b.server.name)));
      const cursor = url.searchParams.get('cursor');
      const start = cursor ? Number(Buffer.from(cursor, 'base64url').toString()) : 0;
      const page = list.slice(start, start + limit);
      const next = start + limit < list.length ? Buffer.from(String(start + limit)).toString('base64url') : undefined;
      json(res, 200, {
        servers: page.map((s) => ({ server: s.server, _meta: { 'io.modelcontextprotocol.registry/official': { status: s.status, publishedAt: s.publishedAt, updatedAt: s.updatedAt, isLatest: true } } })),
        metadata: { count: page.length, ...(next ? { nextCursor: next } : {}) },
      });
    });
  }

  /** pages counts the list requests seen (each page is one). */
  listRequests(): URL[] {
    return this.requests.filter((r) => r.url.startsWith('/v0.1/servers')).map((r) => new URL(r.url, 'http://x'));
  }
}

/** registryEntry is a real-shaped server.json (schema 2025-12-11) with an npm package by default. */
export function registryEntry(name: string, o: Partial<{ version: string; description: string; packages: unknown[]; remotes: unknown[]; title: string; updatedAt: string; status: RegistryServer['status'] }> = {}): RegistryServer {
  const version = o.version ?? '1.0.0';
  return {
    server: {
      $schema: 'https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json',
      name, description: o.description ?? `The ${name} server`, version, ...(o.title ? { title: o.title } : {}),
      repository: { url: `https://github.com/example/${name.split('/')[1]}`, source: 'github' },
      ...(o.packages !== undefined ? { packages: o.packages } : o.remotes ? {} : { packages: [{ registryType: 'npm', identifier: `@example/${name.split('/')[1]}`, version, transport: { type: 'stdio' } }] }),
      ...(o.remotes ? { remotes: o.remotes } : {}),
    },
    status: o.status ?? 'active', publishedAt: '2025-09-01T00:00:00Z', updatedAt: o.updatedAt ?? '2025-09-01T00:00:00Z',
  };
}

/**
 * IndexFixture serves a static marketplace index at `/index.json` (with an ETag: a matching If-None-Match answers
 * 304) and archives at `/a/<name>`; `/slow/<name>` waits before answering, `/big` streams more than asked for.
 */
export class IndexFixture extends Fixture {
  index: Record<string, unknown> = { skills: [] };
  readonly archives = new Map<string, Buffer>();
  slowMs = 5000;
  /** When set, /index.json answers this status. */
  failWith = 0;

  constructor() {
    super(async (req, res, url) => {
      if (url.pathname === '/index.json') {
        if (this.failWith) return json(res, this.failWith, { error: 'down' });
        const body = JSON.stringify(this.index);
        const etag = `"${sha256(Buffer.from(body)).slice(0, 16)}"`;
        if (req.headers['if-none-match'] === etag) { res.statusCode = 304; res.end(); return; }
        res.setHeader('etag', etag);
        return json(res, 200, this.index);
      }
      const m = /^\/(a|slow)\/(.+)$/.exec(url.pathname);
      if (m && this.archives.has(m[2])) {
        if (m[1] === 'slow') await new Promise((r) => setTimeout(r, this.slowMs));
        res.setHeader('content-type', 'application/gzip');
        res.end(this.archives.get(m[2]));
        return;
      }
      if (url.pathname === '/big') {
        // NOTE: no Content-Length: the client must count what it reads.
        const chunk = Buffer.alloc(64 * 1024, 1);
        for (let i = 0; i < 64 && !res.destroyed; i++) await new Promise((r) => res.write(chunk, r));
        res.end();
        return;
      }
      json(res, 404, { error: 'not found' });
    });
  }

  /** addSkill serves an archive and lists it as a version of `@author/name` (the newest first). */
  addSkill(slug: string, version: string, archive: Buffer, o: { digest?: string; path?: string; extra?: Record<string, unknown> } = {}): void {
    const file = `${slug.slice(1).replace('/', '-')}-${version}.tgz`;
    this.archives.set(file, archive);
    const skills = this.index.skills as Record<string, any>[];
    let e = skills.find((s) => s.slug === slug);
    if (!e) {
      e = { slug, description: `The ${slug} skill`, license: 'MIT', tags: ['demo'], downloads: 10, versions: [], ...o.extra };
      skills.push(e);
    }
    e.versions = [{ version, url: o.path ?? `/a/${file}`, sha256: o.digest ?? sha256(archive) }, ...e.versions.filter((v: any) => v.version !== version)];
  }
}

/**
 * skillMarketplace is the set-up of a suite installing skills from `index` (the service's one source): `start`
 * writes the marketplace settings with these limits, starts the service and refreshes the skills; `install` asks
 * for a slug.
 */
export function skillMarketplace(f: ServiceFixture, index: IndexFixture) {
  const refresh = async () => expect((await f.api.post('/api/marketplace/refresh?kind=skill', {})).status).to.equal(200);
  return {
    refresh,
    start: async (limits: Record<string, unknown> = {}, env: Record<string, string> = {}) => {
      writeFileSync(path.join(f.dataDir, 'config.yaml'), stringify({ marketplace: { refresh_interval: '0s', limits, sources: [{ id: 'team', type: 'index', url: `${index.url}/index.json` }] } }));
      await f.start(env);
      await refresh();
    },
    install: (slug: string, version?: string) => f.api.post('/api/skills/marketplace/install', { slug, ...(version ? { version } : {}) }),
  };
}
