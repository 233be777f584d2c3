import { spawn } from 'node:child_process';
import { minimatch } from 'minimatch';
import type { RegistryEntry } from '../../controllers/registry-controller.ts';
import { parseDuration } from '../../codecs/duration.ts';
import { childEnv } from '../security/child-env.ts';
import type { SecurityPolicy } from '../security/policy.ts';

/** PreCallEvent is what a `tool.pre_call` hook receives on stdin (JSON) and is matched against. */
export interface PreCallEvent {
  event: 'tool.pre_call';
  tool_id: string;
  tool_name: string;
  tool_read_only: boolean;
  input: unknown;
  input_digest: string;
  session_id: string;
  workspace_id: string;
  workspace_root: string;
  agent_name: string;
}

/** HookOutcome is one hook's run: `deny` stops the call; `error` denies only a required hook. */
export interface HookOutcome {
  name: string;
  decision: 'allow' | 'deny' | 'error';
  reason: string;
  required: boolean;
  duration_ms: number;
}

const MAX_OUTPUT = 64 * 1024;

/** matches applies a hook's matcher: every key must match the event (strings as globs, booleans exactly). */
function matches(matcher: Record<string, unknown>, ev: PreCallEvent): boolean {
  const values: Record<string, unknown> = { ...ev, session_type: ev.session_id ? 'user' : '' };
  return Object.entries(matcher).every(([k, want]) => {
    const have = values[k];
    if (typeof want === 'boolean') return have === want;
    return typeof have === 'string' && typeof want === 'string' && (have === want || minimatch(have, want));
  });
}

/** preCallHooks selects the sync, enabled subprocess hooks on `tool.pre_call` in scope, highest priority first. */
export function preCallHooks(bindings: RegistryEntry[], ev: PreCallEvent): RegistryEntry[] {
  return bindings
    .filter((b) => b.spec.event === 'tool.pre_call' && b.spec.mode === 'sync' && b.spec.enabled !== false && b.spec.executor_kind === 'subprocess')
    .filter((b) => b.scope.kind === 'global' || b.scope.id === ev.workspace_id)
    .filter((b) => matches(b.spec.matcher ?? {}, ev))
    .sort((a, b) => b.spec.priority - a.spec.priority || a.spec.name.localeCompare(b.spec.name));
}

/**
 * runHook runs one subprocess hook with the event as JSON on stdin. Protocol: exit 0 allows unless stdout is
 * JSON `{"decision":"deny","reason":...}`; exit 2 denies; any other exit, a timeout or a spawn failure is an
 * `error`. Its stderr is discarded (it may hold secrets); only the stdout decision's reason is reported.
 * It runs only if `security` allows its command now (EXEC_ALLOWLIST) and its secret refs resolve
 * (SECRET_ENV_ALLOWLIST), in a scrubbed environment: the basics, its `env` and its resolved `secret_env`.
 */
export function runHook(b: RegistryEntry, ev: PreCallEvent, defaultTimeoutMs: number, cwd: string, security: SecurityPolicy): Promise<HookOutcome> {
  const s = b.spec;
  const started = Date.now();
  const done = (decision: HookOutcome['decision'], reason: string): HookOutcome => ({ name: s.name, decision, reason, required: Boolean(s.required), duration_ms: Date.now() - started });
  const allowed = security.exec.check({ command: s.command, shell: false });
  if (!allowed.ok) return Promise.resolve(done('error', `CommandNotAllowed: ${allowed.reason}`));
  const secrets = security.secrets.resolve(s.secret_env);
  const unresolved = [...secrets.refused, ...secrets.missing];
  // NOTE: a bare name is looked up on the child's PATH, so a restricted policy keeps the PATH it checked against.
  const pinned: Record<string, string> = security.exec.unrestricted ? {} : { PATH: process.env.PATH ?? '' };
  if (unresolved.length) return Promise.resolve(done('error', `secret_env ${unresolved.join(', ')} does not resolve`));
  const timeoutMs = (s.timeout && parseDuration(s.timeout)) || defaultTimeoutMs;
  return new Promise((resolve) => {
    const child = spawn(s.command, s.args ?? [], {
      cwd: s.working_dir || cwd, env: childEnv({ ...s.env, ...secrets.env }, pinned), stdio: ['pipe', 'pipe', 'ignore'],
    });
    let out = '';
    const timer = setTimeout(() => { child.kill('SIGKILL'); resolve(done('error', `timed out after ${timeoutMs} ms`)); }, timeoutMs);
    child.stdout.on('data', (c: Buffer) => { if (out.length < MAX_OUTPUT) out += c.toString('utf8'); });
    child.on('error', (err) => { clearTimeout(timer); resolve(done('error', `cannot start: ${(err as NodeJS.ErrnoException).code ?? err.message}`)); });
    child.on('close', (code) => {
      clearTimeout(timer);
      let reply: { decision?: string; reason?: string } = {};
      try { reply = out.trim() ? JSON.parse(out) : {}; } catch { /* not a JSON decision: the exit code decides */ }
      if (code === 2 || (code === 0 && reply.decision === 'deny')) resolve(done('deny', String(reply.reason ?? `exited with code ${code}`).slice(0, 500)));
      else if (code === 0) resolve(done('allow', String(reply.reason ?? '').slice(0, 500)));
      else resolve(done('error', `exited with code ${code}`));
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(JSON.stringify(ev));
  });
}
