import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';

const dir = fileURLToPath(new URL('./scripts/', import.meta.url));

/**
 * defineScripts registers every `store/scripts/<name>-<numKeys>.lua` (or `<name>-n.lua`: numkeys passed first) on
 * a connection as a custom command named `<name>` in camelCase (BullMQ's convention), so callers use EVALSHA
 * with a load-on-miss fallback.
 */
export function defineScripts(redis: Redis): void {
  for (const file of readdirSync(dir)) {
    const m = /^([a-z-]+)-(\d+|n)\.lua$/.exec(file);
    if (!m) continue;
    const name = m[1].replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    // NOTE: `-n` scripts take a variable number of keys: the caller passes numkeys first.
    redis.defineCommand(name, { ...(m[2] === 'n' ? {} : { numberOfKeys: Number(m[2]) }), lua: readFileSync(dir + file, 'utf8') });
  }
}

/** ScriptCommands types the custom commands `defineScripts` adds. */
export interface ScriptCommands {
  putRecord(...args: (string | number)[]): Promise<[number, ...(string | number)[]]>;
  deleteRecord(...args: (string | number)[]): Promise<[number, ...(string | number)[]]>;
  writeStatus(...args: (string | number)[]): Promise<number>;
  putWorkspace(...args: (string | number)[]): Promise<number>;
  deleteWorkspace(...args: (string | number)[]): Promise<number>;
  appendEvent(...args: (string | number)[]): Promise<number>;
  patchSession(...args: (string | number)[]): Promise<number>;
  releaseLease(key: string, token: string): Promise<number>;
  readSnapshot(revision: string, record: string, status: string): Promise<[string | null, string | null, string | null]>;
  projectEntry(registry: string, revision: string, id: string, entry: string, channel?: string): Promise<number>;
  queuePrompt(lease: string, queue: string, bytes: number, maxCount: number, maxBytes: number): Promise<string | null>;
  consumeApproval(key: string, binding: string, now: number): Promise<'ok' | 'missing' | 'replayed' | 'expired' | 'mismatch'>;
  createRun(...args: (string | number)[]): Promise<[number, string]>;
  reconcileRead(numKeys: number, ...args: (string | number)[]): Promise<(string | number | null)[]>;
  reconcileWrite(numKeys: number, ...args: (string | number)[]): Promise<number[]>;
  updateRun(key: string, patch: string, expected: string): Promise<[number, string?]>;
}
