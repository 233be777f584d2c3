import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { dirChecksum } from '../../runtime/extensions/artifacts.ts';
import type { Client } from '../helpers/service.ts';
import { eventually } from '../helpers/service.ts';

/** HELLO is the example extension shipped with the repository. */
export const HELLO = fileURLToPath(new URL('../fixtures/extensions/hello/', import.meta.url)).replace(/\/$/, '');

/** copyHello copies the example into a fresh directory, changing its manifest with `edit`; returns the directory. */
export function copyHello(edit: (m: any) => void = () => undefined): string {
  const dir = path.join(mkdtempSync(path.join(os.tmpdir(), 'ext-')), 'hello');
  cpSync(HELLO, dir, { recursive: true });
  const file = path.join(dir, 'extension.json');
  const m = JSON.parse(readFileSync(file, 'utf8'));
  edit(m);
  writeFileSync(file, JSON.stringify(m, null, 2));
  return dir;
}

/** checksum is a directory's install checksum (`sha256:<hex>`). */
export async function checksum(dir: string): Promise<string> {
  return `sha256:${await dirChecksum(dir, 10_000)}`;
}

/** install installs a directory with its checksum and expects 201. */
export async function install(api: Client, dir: string): Promise<any> {
  const res = await api.post('/api/extensions', { path: dir, checksum: await checksum(dir) });
  if (res.status !== 201) throw new Error(`install: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.extension;
}

/** alive says whether a process exists. */
export function alive(pid: number): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** running waits until an extension's daemon runs healthy and answers its view. */
export async function running(api: Client, name: string, timeoutMs = 20_000): Promise<any> {
  return eventually(async () => {
    const x = (await api.get(`/api/extensions/${name}`)).body.extension;
    if (!(x.daemon_running && x.health === 'ok' && x.pid > 0)) throw new Error(`not running yet: ${JSON.stringify(x.daemon)} ${x.last_error}`);
    return x;
  }, timeoutMs, 100);
}

/** TRUSTED is a settings file under which extension tools need no approval (tools.external_default: enabled). */
export const TRUSTED = 'tools:\n  external_default: enabled\n';
