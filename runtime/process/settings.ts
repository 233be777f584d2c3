import { statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { isMap, LineCounter, parseDocument } from 'yaml';

/** SettingsFile is one parsed configuration file: its sections, or why it could not be read. */
export interface SettingsFile {
  path: string;
  exists: boolean;
  /** Top-level sections (`tools`, `roles`, `heartbeat`, ...); each consumer validates its own section. */
  data: Record<string, unknown>;
  /** A file that exists but is not a YAML mapping; its sections are then empty. */
  error?: { message: string; line: number; column: number };
}

/** workspaceConfigPath is where a workspace keeps its configuration, under its root. */
export const workspaceConfigPath = (rootDir: string) => path.join(rootDir, '.svc', 'config.yaml');

/**
 * Settings reads the layered configuration files: the global file (SVC_CONFIG_FILE, default
 * DATA_DIR/config.yaml) and each workspace's `.svc/config.yaml`. Files are re-read only when their
 * mtime or size changes, so every request sees edits without paying a parse.
 */
export class Settings {
  private readonly cache = new Map<string, { stamp: string; file: SettingsFile }>();

  constructor(readonly globalPath: string) {}

  global(): Promise<SettingsFile> {
    return this.read(this.globalPath);
  }

  workspace(rootDir: string): Promise<SettingsFile> {
    return this.read(workspaceConfigPath(rootDir));
  }

  private async read(file: string): Promise<SettingsFile> {
    // NOTE: a synchronous stat of a local file costs ~5 µs of CPU, one through the thread pool ~45 µs; every session
    // start reads two files (its roles), so this is on the hot path.
    let st: ReturnType<typeof statSync>;
    try { st = statSync(file, { throwIfNoEntry: false }); } catch { st = undefined; }
    const stamp = st?.isFile() ? `${st.mtimeMs}:${st.size}` : 'missing';
    const hit = this.cache.get(file);
    // NOTE: an absent file is one object too until it appears, so a reader that rebuilds what it derives from a
    // file when the file object changes (the model catalog) does not rebuild on every call.
    if (hit?.stamp === stamp) return hit.file;
    if (!st?.isFile()) {
      const missing: SettingsFile = { path: file, exists: false, data: {} };
      this.cache.set(file, { stamp, file: missing });
      return missing;
    }
    const parsed = parseSettings(file, await readFile(file, 'utf8'));
    this.cache.set(file, { stamp, file: parsed });
    return parsed;
  }
}

/** parseSettings parses a configuration file's text; errors carry the line and column of the fault. */
export function parseSettings(file: string, text: string): SettingsFile {
  // NOTE: without prettyErrors the parser gives an error only its offset; the line counter turns it into a line and column.
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { prettyErrors: false, lineCounter });
  const err = doc.errors[0];
  if (err) {
    const { line, col: column } = lineCounter.linePos(err.pos[0]);
    return { path: file, exists: true, data: {}, error: { message: err.message, line, column } };
  }
  if (doc.contents !== null && !isMap(doc.contents)) return { path: file, exists: true, data: {}, error: { message: 'the file must be a YAML mapping of sections', line: 1, column: 1 } };
  return { path: file, exists: true, data: (doc.toJS() ?? {}) as Record<string, unknown> };
}
