import { spawn } from 'node:child_process';
import type { Logger } from 'pino';
import { parseDuration } from '../../codecs/duration.ts';
import { NATIVE_BUILTINS } from '../../codecs/hook-binding.ts';
import { childEnv } from '../security/child-env.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { realPath } from '../security/workspace-roots.ts';
import type { Binding, HookInput } from './matcher.ts';

/** HookOutcome is one hook's run: `deny` stops a gated action; `error` stops it only for a required hook. */
export interface HookOutcome {
  name: string;
  /** The hook.binding record id. */
  binding: string;
  decision: 'allow' | 'deny' | 'error';
  reason: string;
  required: boolean;
  duration_ms: number;
  /** What the `record` built-in keeps in the run record: the event as published (never a private field). */
  record?: Record<string, unknown>;
}

/** ExecContext is what an executor needs besides the binding and the event. */
export interface ExecContext {
  /** The timeout when the binding sets none. */
  defaultTimeoutMs: number;
  /** The working directory of a subprocess without `working_dir` (the workspace root, else DATA_DIR). */
  cwd: string;
  security: SecurityPolicy;
  logger: Logger;
  /** The event without the gated point's private fields (e.g. a tool call's input): what natives see. */
  publicInput: HookInput;
}

const MAX_OUTPUT = 64 * 1024;
const MAX_RECORD = 16 * 1024;
const REASON_CAP = 500;

/** timeoutOf is the binding's timeout, or the default. */
export const timeoutOf = (b: Binding, dflt: number) => (b.spec.timeout && parseDuration(b.spec.timeout)) || dflt;

/** execute runs one binding on one event with its executor. It never throws: a failure is an `error` outcome. */
export async function execute(b: Binding, input: HookInput, ctx: ExecContext): Promise<HookOutcome> {
  const started = Date.now();
  const done = (decision: HookOutcome['decision'], reason: string, extra: Partial<HookOutcome> = {}): HookOutcome => ({
    name: b.spec.name, binding: b.id, decision, reason: reason.slice(0, REASON_CAP), required: Boolean(b.spec.required), duration_ms: Date.now() - started, ...extra,
  });
  try {
    if (b.spec.executor_kind === 'subprocess') {
      const r = await runSubprocess(b, input, timeoutOf(b, ctx.defaultTimeoutMs), ctx.cwd, ctx.security);
      return done(r.decision, r.reason);
    }
    if (b.spec.executor_kind === 'native') return done(...runNative(b, ctx));
    return done('error', `executor ${b.spec.executor_kind} is not built in this service`);
  } catch (err) {
    return done('error', `executor failed: ${(err as Error).message}`);
  }
}

/**
 * runNative runs a built-in (metadata.builtin, default `record`):
 * - `record`: allows, and keeps the event (as published, capped at 16 KiB) in the run record: an audit trail
 *   readable at GET /api/hooks/runs without writing a script;
 * - `log`: allows, and writes the event (as published) to the service log at info;
 * - `deny`: denies with metadata.reason: a switch that closes a gated point (e.g. no new sessions in a workspace).
 */
function runNative(b: Binding, ctx: ExecContext): [HookOutcome['decision'], string, Partial<HookOutcome>?] {
  const builtin = b.spec.metadata?.builtin || 'record';
  switch (builtin as (typeof NATIVE_BUILTINS)[number]) {
    case 'record': {
      const json = JSON.stringify(ctx.publicInput);
      return ['allow', '', { record: json.length <= MAX_RECORD ? ctx.publicInput : { event: ctx.publicInput.event, event_id: ctx.publicInput.event_id, truncated: true } }];
    }
    case 'log':
      ctx.logger.info({ hook: b.spec.name, binding: b.id, event: ctx.publicInput }, 'hook event');
      return ['allow', ''];
    case 'deny':
      return ['deny', b.spec.metadata?.reason || `denied by hook ${b.spec.name}`];
    default:
      return ['error', `unknown built-in ${builtin}`];
  }
}

/**
 * runSubprocess runs one subprocess hook with the event as JSON on stdin. Protocol: exit 0 allows unless stdout
 * is JSON `{"decision":"deny","reason":...}`; exit 2 denies; any other exit, a timeout or a spawn failure is an
 * `error`. Its stderr is discarded (it may hold secrets); only the stdout decision's reason is reported.
 * It runs only if `security` allows its command now (EXEC_ALLOWLIST), its `working_dir` (the path rule,
 * runtime/security/paths.ts) and its secret refs resolve (SECRET_ENV_ALLOWLIST), in a scrubbed environment: the basics, its `env` and its resolved `secret_env`.
 */
export async function runSubprocess(b: Binding, input: HookInput, timeoutMs: number, cwd: string, security: SecurityPolicy): Promise<{ decision: HookOutcome['decision']; reason: string }> {
  const s = b.spec;
  const allowed = security.exec.check({ command: s.command ?? '', shell: false });
  if (!allowed.ok) return { decision: 'error', reason: `CommandNotAllowed: ${allowed.reason}` };
  // NOTE: checked again here, as the command is: the record may predate the rule, or its directory be re-linked.
  const dirRefused = s.working_dir ? security.paths.refusal(s.working_dir) : undefined;
  if (dirRefused) return { decision: 'error', reason: `WorkingDirNotAllowed: working_dir ${dirRefused}` };
  const secrets = await security.secrets.resolve(s.secret_env);
  const unresolved = [...secrets.refused, ...secrets.missing];
  if (unresolved.length) return { decision: 'error', reason: `secret_env ${unresolved.join(', ')} does not resolve` };
  // NOTE: a bare name is looked up on the child's PATH, so a restricted policy keeps the PATH it checked against.
  const pinned: Record<string, string> = security.exec.unrestricted ? {} : { PATH: process.env.PATH ?? '' };
  return new Promise((resolve) => {
    const child = spawn(s.command!, s.args ?? [], {
      cwd: s.working_dir ? realPath(s.working_dir) : cwd, env: childEnv({ ...s.env, ...secrets.env }, pinned), stdio: ['pipe', 'pipe', 'ignore'],
    });
    let out = '';
    let settled = false;
    const finish = (decision: HookOutcome['decision'], reason: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ decision, reason });
    };
    const timer = setTimeout(() => { child.kill('SIGKILL'); finish('error', `timed out after ${timeoutMs} ms`); }, timeoutMs);
    child.stdout.on('data', (c: Buffer) => { if (out.length < MAX_OUTPUT) out += c.toString('utf8'); });
    child.on('error', (err) => finish('error', `cannot start: ${(err as NodeJS.ErrnoException).code ?? err.message}`));
    child.on('close', (code, signal) => {
      let reply: { decision?: string; reason?: string } = {};
      try { reply = out.trim() ? JSON.parse(out) : {}; } catch { /* not a JSON decision: the exit code decides */ }
      if (code === 2 || (code === 0 && reply?.decision === 'deny')) finish('deny', String(reply?.reason ?? `exited with code ${code}`));
      else if (code === 0) finish('allow', String(reply?.reason ?? ''));
      else finish('error', code === null ? `killed by ${signal}` : `exited with code ${code}`);
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(JSON.stringify(input));
  });
}
