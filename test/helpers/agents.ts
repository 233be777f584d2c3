import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** SCRIPTED is the built-in agent's source file. */
export const SCRIPTED = path.resolve(fileURLToPath(new URL('../../runtime/agents/scripted.ts', import.meta.url)));
/**
 * TSX_LOADER is the path of the TypeScript loader a child runs the sources under (`node --import <it>`), resolved
 * here since a child may run elsewhere. NOTE: require's resolver: import.meta.resolve is missing where mocha loads
 * a file as CommonJS (one file run alone).
 */
export const TSX_LOADER = createRequire(import.meta.url).resolve('tsx');
/**
 * SCRIPTED_COMMAND runs the built-in agent as an agent definition's own `command`: a real ACP agent of its own
 * process (not pooled), whose environment holds its session's identity.
 */
export const SCRIPTED_COMMAND = `${process.execPath} --import ${TSX_LOADER} ${SCRIPTED}`;

/** environOf reads a live process's environment from /proc. */
export function environOf(pid: string): Record<string, string> {
  const raw = readFileSync(`/proc/${pid}/environ`, 'utf8');
  return Object.fromEntries(raw.split('\0').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
}

/**
 * agentPids are the processes of a session's own (unpooled) agents: those whose environment names the session
 * (more than one when a lost runtime's agent still runs beside the resumed session's).
 */
export function agentPids(sessionId: string): string[] {
  return readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/environ`, 'utf8').includes(`SVC_SESSION_ID=${sessionId}\0`);
    } catch { return false; /* gone, or not ours */ }
  });
}

/** agentPid finds the process of a session's own (unpooled) agent. */
export function agentPid(sessionId: string): string {
  const [pid] = agentPids(sessionId);
  if (!pid) throw new Error(`no agent process for session ${sessionId}`);
  return pid;
}

/** sessionToken reads a session's token from its own agent process's environment (the agent's credential). */
export const sessionToken = (sessionId: string): string => environOf(agentPid(sessionId)).SVC_SESSION_TOKEN;

/** sessionTokens are the tokens of every agent process of a session (a lost runtime's agent keeps its own). */
export const sessionTokens = (sessionId: string): string[] => agentPids(sessionId).map((pid) => environOf(pid).SVC_SESSION_TOKEN);
