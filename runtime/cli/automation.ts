import type { Command } from 'commander';
import type { AutomationRun } from '../../store/automation-store.ts';
import { enc } from './client.ts';
import { CliError, ExitCode } from './errors.ts';
import { emit, type ClientOf } from './output.ts';

/** FINISHED are the automation run statuses that do not change any more. */
const FINISHED = new Set(['succeeded', 'failed', 'skipped']);

/** runLine is one automation run as a line of text: id, status, reason or error, session. */
function runLine(r: AutomationRun): string {
  const why = [r.reason, r.error].filter(Boolean).join(': ');
  return `${r.id} ${r.status}${why ? ` (${why})` : ''}${r.session_id ? ` session ${r.session_id}` : ''}\n`;
}

/**
 * fireCommand adds `fire <job>`: "fire now" of an automation job (`POST /api/automation/jobs/{id}/trigger`). It
 * prints the run; `--wait` follows it until it finishes. A run that is (or ends) skipped or failed is exit 1.
 */
export function fireCommand(p: Command, clientOf: ClientOf, duration: (v: string) => number): void {
  p.command('fire')
    .description('fire an automation job now and print its run (exit 1 when the run is skipped or fails)')
    .argument('<job>', 'the automation.job id')
    .option('-w, --workspace <id>', 'the workspace to run in (required for a global job)')
    .option('--wait', 'wait until the run finishes')
    .option('--timeout <duration>', 'how long --wait waits', '5m')
    .action(async (job: string, o, cmd) => {
      const { api, format } = clientOf(cmd);
      const deadline = Date.now() + duration(o.timeout);
      let { run } = await api.ok<{ run: AutomationRun }>('POST', `/api/automation/jobs/${enc(job)}/trigger`, o.workspace ? { workspace_id: o.workspace } : {});
      // NOTE: no route waits on a run, so --wait reads it again; a run lasts a turn, so 500 ms costs nothing.
      while (o.wait && !FINISHED.has(run.status)) {
        if (Date.now() > deadline) throw new CliError(`run ${run.id} still ${run.status} after ${o.timeout}`, ExitCode.failed);
        await new Promise((r) => setTimeout(r, 500));
        run = (await api.get<{ run: AutomationRun }>(`/api/automation/runs/${enc(run.id)}`)).run;
      }
      if (format === 'json' || format === 'yaml') emit({ run }, format);
      else process.stdout.write(runLine(run));
      process.exitCode = run.status === 'skipped' || run.status === 'failed' ? ExitCode.failed : ExitCode.ok;
    });
}
