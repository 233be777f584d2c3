import { spawn } from 'node:child_process';
import { realpath } from 'node:fs/promises';
import { criterionArgv } from '../../../codecs/loop.ts';
import { childEnv } from '../../security/child-env.ts';
import type { ExecPolicy } from '../../security/exec-policy.ts';
import { renderTemplate } from '../template.ts';
import type { Criterion, CriterionEvaluator, GateVerdict, NodeContext } from '../types.ts';
import { abortReason } from './agent-turns.ts';

/** MAX_FINDINGS is how much of a command's stdout a verdict keeps (its findings, handed to a revised upstream). */
const MAX_FINDINGS = 8 * 1024;
/** DEFAULT_TIMEOUT_MS bounds a check whose node has no timeout of its own. */
const DEFAULT_TIMEOUT_MS = 10 * 60_000;

/** argvOf is a criterion's argv (codecs/loop.ts criterionArgv), its refusal naming the field. */
export function argvOf(check: unknown): { ok: true; argv: string[] } | { ok: false; reason: string } {
  const r = criterionArgv(check);
  return r.ok ? r : { ok: false, reason: `check ${r.reason}` };
}

/** CommandCriterionOptions are what a command check needs: the exec policy and the workspace's root. */
export interface CommandCriterionOptions {
  exec: ExecPolicy;
  /** The root directory of a workspace (the check's working directory). */
  workspaceRoot(workspaceId: string): Promise<string>;
}

/**
 * CommandCriterion runs a gate's `command` criterion: the program of `check` (each argument rendered over the node's
 * scope) in the workspace's root, in the scrubbed child environment (runtime/security/child-env.ts) plus the run's
 * ids, with the node's inputs and upstream outputs as JSON on stdin. The exit code decides: `expect` (default "0")
 * approves, any other rejects with the first 8 KiB of stdout as findings. EXEC_ALLOWLIST is checked right before the
 * spawn (a definition stored under a looser policy does not run under a stricter one); refused, it is an `error`
 * verdict naming the rule. stderr is discarded (it may hold secrets). The node's stop or timeout kills the process
 * (`timeout` verdict).
 *
 * NOTE: at least once: a worker that dies while the command runs leaves the job stalled, and the check runs again.
 */
export class CommandCriterion implements CriterionEvaluator {
  readonly type = 'command';
  readonly sideEffects = 'at-least-once' as const;

  constructor(private readonly o: CommandCriterionOptions) {}

  async evaluate(ctx: NodeContext, c: Criterion): Promise<GateVerdict> {
    const parsed = argvOf(c.check);
    if (!parsed.ok) return { outcome: 'error', criterion_id: c.id, reason: parsed.reason };
    const argv = parsed.argv.map((a) => renderTemplate(a, ctx.scope));
    const allowed = this.o.exec.check({ command: argv[0], shell: false });
    if (!allowed.ok) return { outcome: 'error', criterion_id: c.id, reason: `CommandNotAllowed: ${allowed.reason}` };
    let cwd: string;
    try {
      cwd = await realpath(await this.o.workspaceRoot(ctx.run.workspace_id));
    } catch (err) {
      return { outcome: 'error', criterion_id: c.id, reason: `the workspace root is not available: ${(err as Error).message}` };
    }
    const expect = String(c.expect ?? '0').trim() || '0';
    // NOTE: a bare name is looked up on the child's PATH, so a restricted policy keeps the PATH it checked against.
    const pinned: Record<string, string> = this.o.exec.unrestricted ? {} : { PATH: process.env.PATH ?? '' };
    const env = childEnv({}, { ...pinned, SVC_LOOP_RUN_ID: ctx.run.id, SVC_LOOP_NODE_ID: ctx.key.nodeId, SVC_LOOP_GENERATION: String(ctx.key.generation), SVC_WORKSPACE_ID: ctx.run.workspace_id });
    const stdin = JSON.stringify({
      run_id: ctx.run.id, loop_name: ctx.run.loop_name, node_id: ctx.key.nodeId, generation: ctx.key.generation, item_index: ctx.key.itemIndex,
      item: ctx.item, revision: ctx.revision, inputs: ctx.inputs, criterion_inputs: c.inputs ?? {},
      upstream: Object.fromEntries(Object.entries(ctx.upstream).map(([id, u]) => [id, { outcome: u.outcome, output: u.output }])),
    });
    const timeoutMs = typeof c.timeout_ms === 'number' && c.timeout_ms > 0 ? c.timeout_ms : DEFAULT_TIMEOUT_MS;
    return new Promise<GateVerdict>((resolve) => {
      if (ctx.signal.aborted) return resolve({ outcome: 'timeout', criterion_id: c.id, reason: abortReason(ctx.signal) });
      const child = spawn(argv[0], argv.slice(1), { cwd, env, stdio: ['pipe', 'pipe', 'ignore'] });
      let out = '';
      let settled = false;
      const finish = (v: GateVerdict) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        ctx.signal.removeEventListener('abort', onAbort);
        resolve(v);
      };
      const kill = (reason: string) => {
        child.kill('SIGKILL');
        finish({ outcome: 'timeout', criterion_id: c.id, reason });
      };
      const onAbort = () => kill(abortReason(ctx.signal));
      ctx.signal.addEventListener('abort', onAbort, { once: true });
      const timer = setTimeout(() => kill(`the check ran longer than ${timeoutMs} ms`), timeoutMs);
      child.stdout.on('data', (b: Buffer) => { if (out.length < MAX_FINDINGS) out += b.toString('utf8'); });
      child.on('error', (err) => finish({ outcome: 'error', criterion_id: c.id, reason: `cannot start ${argv[0]}: ${(err as NodeJS.ErrnoException).code ?? err.message}` }));
      child.on('close', (code, signal) => {
        const findings = out.slice(0, MAX_FINDINGS);
        if (code === null) return finish({ outcome: 'error', criterion_id: c.id, reason: `${argv[0]} was killed by ${signal}`, findings });
        if (String(code) === expect) return finish({ outcome: 'approved', criterion_id: c.id, reason: `${argv[0]} exited with code ${code}`, findings });
        finish({ outcome: 'rejected', criterion_id: c.id, reason: `${argv[0]} exited with code ${code} (expected ${expect})`, findings });
      });
      child.stdin.on('error', () => undefined);
      child.stdin.end(stdin);
    });
  }
}
