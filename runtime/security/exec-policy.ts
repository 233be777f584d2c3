import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import { minimatch } from 'minimatch';
import { parse as parseShell } from 'shell-quote';
import { fieldsNamed } from './spec-fields.ts';
import type { Executable } from './types.ts';

/** CommandCheck is the policy's answer for one executable: allowed (with its argv when parsed), or why not. */
export type CommandCheck = { ok: true; argv?: string[] } | { ok: false; reason: string };

/**
 * executablesOf lists every field of a spec that makes the service run a program: any `command` string, at any
 * depth (agents, their MCP servers and hooks, mcp_server and hook.binding records, skills, bundles' agents, and
 * whatever later kinds add).
 */
export function executablesOf(kind: string, spec: unknown): Executable[] {
  return fieldsNamed(spec, 'command')
    .filter((f): f is { path: string; value: string } => typeof f.value === 'string' && f.value.trim() !== '')
    // NOTE: an agent's command is a shell line; MCP servers and hooks run one executable plus args.
    .map((f) => ({ path: f.path, command: f.value.trim(), shell: (kind === 'agent' && f.path === 'command') || f.path.endsWith('.agent.command') }))
    .concat(kind === 'loop' ? loopCommandChecks(spec) : []);
}

/** loopCommandChecks lists a loop's `command` gate criteria (`check`: argv, or a line split on white space, no shell). */
function loopCommandChecks(spec: unknown): Executable[] {
  return fieldsNamed(spec, 'check').flatMap(({ path: p, value }) => {
    const argv = typeof value === 'string' ? value.trim().split(/\s+/) : Array.isArray(value) ? value.filter((x): x is string => typeof x === 'string') : [];
    return argv[0] ? [{ path: p, command: argv[0], shell: false }] : [];
  });
}

/**
 * ExecPolicy decides which executables the service may start (EXEC_ALLOWLIST). Patterns with a `/` match the
 * executable's absolute path (a bare name is looked up on PATH); patterns without one match a bare name; `*`
 * alone allows anything, shell lines included. The same check runs at write time, at reconcile time and right
 * before a spawn, so a record stored under a looser policy cannot run under a stricter one.
 */
export class ExecPolicy {
  readonly unrestricted: boolean;

  constructor(private readonly patterns: readonly string[], private readonly searchPath = process.env.PATH ?? '') {
    this.unrestricted = patterns.includes('*');
  }

  /** check decides one executable; for a restricted shell line it also returns the argv to spawn without a shell. */
  check(exe: Pick<Executable, 'command' | 'shell'>): CommandCheck {
    if (this.unrestricted) return { ok: true };
    let argv = [exe.command];
    if (exe.shell) {
      // NOTE: a shell line could chain any program after an allowed one, so a restricted policy accepts only a
      // plain command line (words and quotes) and runs it without a shell.
      const words = /[$`]/.test(exe.command) ? [] : parseShell(exe.command);
      if (!words.length || words.some((w) => typeof w !== 'string')) {
        return { ok: false, reason: 'must be a plain command line (no shell operators, substitutions, globs or comments) while EXEC_ALLOWLIST restricts executables' };
      }
      argv = words as string[];
    }
    const bin = argv[0];
    if (!this.patterns.length) return { ok: false, reason: `"${bin}" is not allowed: EXEC_ALLOWLIST allows no executables` };
    if (bin.includes('/') && !path.isAbsolute(bin)) return { ok: false, reason: `"${bin}" must be a bare name found on PATH or an absolute path` };
    const abs = bin.includes('/') ? path.normalize(bin) : this.lookup(bin);
    const allowed = this.patterns.some((p) => (p.includes('/') ? abs !== undefined && minimatch(abs, p) : !bin.includes('/') && minimatch(bin, p)));
    return allowed ? { ok: true, argv } : { ok: false, reason: `"${bin}" is not in EXEC_ALLOWLIST` };
  }

  /** lookup finds a bare name on PATH as the shell would (the first executable file). */
  private lookup(name: string): string | undefined {
    for (const dir of this.searchPath.split(path.delimiter).filter(Boolean)) {
      const candidate = path.join(dir, name);
      try {
        accessSync(candidate, constants.X_OK);
        return candidate;
      } catch { /* not here */ }
    }
    return undefined;
  }
}
