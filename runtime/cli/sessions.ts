import type { Command } from 'commander';
import { ApiClient, enc } from './client.ts';
import { ApiError, CliError, ExitCode, UsageError } from './errors.ts';
import { age, emit, table, type ClientOf, type Format } from './output.ts';
import { readSse } from './sse.ts';

/** sessionOf reads a session (its workspace id is needed for the workspace-scoped stream and prompt routes). */
async function sessionOf(api: ApiClient, id: string): Promise<Record<string, any>> {
  return (await api.get(`/api/sessions/${enc(id)}`)).session;
}

/** eventLine is one session event as a line of text: sequence, type and what it says (an `error` event's error). */
function eventLine(e: Record<string, any>): string {
  const c = (e.content ?? {}) as Record<string, any>;
  const what = c.text ?? c.error ?? c.title ?? c.tool_name ?? e.stop_reason ?? c.stop_reason ?? '';
  return `${e.sequence ?? '-'} ${e.type}${e.turn_id ? ` ${e.turn_id}` : ''}${what ? ` ${String(what).replace(/\n/g, '\\n')}` : ''}`;
}

/** sessionCommands adds `sessions list|create|stop|resume|attach|prompt` and `approve`. */
export function sessionCommands(p: Command, clientOf: ClientOf, duration: (v: string) => number): void {
  const s = p.command('sessions').description('agent sessions: list, create, stop, resume, attach to their events, prompt');

  s.command('list')
    .description('list sessions')
    .option('-w, --workspace <ref>', 'only this workspace (id, name or path)')
    .action(async (o, cmd) => {
      const { api, format } = clientOf(cmd);
      const { sessions } = await api.get(`/api/sessions${o.workspace ? `?workspace=${enc(o.workspace)}` : ''}`);
      if (format === 'json' || format === 'yaml') return emit({ sessions }, format);
      table(['ID', 'WORKSPACE', 'AGENT', 'STATE', 'AGE'], sessions.map((x: any) => [x.id, x.workspace_id, x.agent_name, `${x.state}${x.prompt_active ? ' (busy)' : ''}`, x.created_at ? age(x.created_at) : '']));
    });

  const show = (session: Record<string, any>, format: Format) => {
    if (format === 'json' || format === 'yaml') return emit({ session }, format);
    process.stdout.write(`${session.id} ${session.state} (workspace ${session.workspace_id}, agent ${session.agent_name})\n`);
  };

  s.command('create')
    .description('start a session in a workspace; prints it (its id first in text)')
    .requiredOption('-w, --workspace <ref>', 'the workspace (id, name or path)')
    .option('--agent <name>', 'agent (else the workspace default, then the session role)')
    .option('--name <name>', 'session name')
    .option('--provider <provider>', 'model provider (needed with --model)')
    .option('--model <model>', 'model')
    .action(async (o, cmd) => {
      const { api, format } = clientOf(cmd);
      const body = { workspace: o.workspace, agent_name: o.agent, name: o.name, provider: o.provider, model: o.model };
      show((await api.ok('POST', '/api/sessions', body)).session, format);
    });

  s.command('stop')
    .description('stop a live session (it stays resumable)')
    .argument('<session>')
    .action(async (id: string, _o, cmd) => {
      const { api, format } = clientOf(cmd);
      await api.ok('POST', `/api/sessions/${enc(id)}/stop`, {});
      show(await sessionOf(api, id), format);
    });

  s.command('resume')
    .description('resume a stopped session')
    .argument('<session>')
    .action(async (id: string, _o, cmd) => {
      const { api, format } = clientOf(cmd);
      show((await api.ok('POST', `/api/sessions/${enc(id)}/resume`, {})).session, format);
    });

  s.command('attach')
    .description("stream a session's events (replayed from --since, then live) until it stops")
    .argument('<session>')
    .option('--since <sequence>', 'replay after this sequence (0: everything)', '0')
    .option('--count <n>', 'stop after n events')
    .option('--timeout <duration>', 'stop after this long')
    .action(async (id: string, o, cmd) => {
      const { api, format } = clientOf(cmd);
      const sess = await sessionOf(api, id);
      const ac = new AbortController();
      const timer = o.timeout ? setTimeout(() => ac.abort(), duration(o.timeout)) : undefined;
      let left = o.count ? Number(o.count) : Infinity;
      try {
        const res = await api.raw('GET', `/api/workspaces/${enc(sess.workspace_id)}/sessions/${enc(id)}/stream`, { headers: { accept: 'text/event-stream', 'last-event-id': String(o.since) }, signal: ac.signal });
        if (res.status === 204) return;
        if (res.status >= 400) throw new ApiError(res.status, await res.json().catch(() => undefined), 'attach');
        await readSse(res, (ev) => {
          const e = JSON.parse(ev.data);
          process.stdout.write(format === 'json' || format === 'yaml' ? `${JSON.stringify(e)}\n` : `${eventLine(e)}\n`);
          return ev.event !== 'session_stopped' && --left > 0;
        });
      } catch (err) {
        if (!ac.signal.aborted) throw err;
      } finally {
        clearTimeout(timer);
      }
    });

  s.command('prompt')
    .description("send a prompt and print the reply as it streams (exit 1 if the turn fails)")
    .argument('<session>')
    .argument('<message...>')
    .option('--mode <mode>', 'queue | interrupt | steer', 'queue')
    .action(async (id: string, words: string[], o, cmd) => {
      const { api, format } = clientOf(cmd);
      const sess = await sessionOf(api, id);
      const message = words.join(' ').replace(/\\n/g, '\n');
      const res = await api.raw('POST', `/api/workspaces/${enc(sess.workspace_id)}/sessions/${enc(id)}/prompt`, { body: { message, mode: o.mode }, headers: { accept: 'text/event-stream' } });
      if (res.status >= 400) throw new ApiError(res.status, await res.json().catch(() => undefined), 'prompt');
      if (res.status === 202) return emit(await res.json(), format === 'yaml' ? 'yaml' : 'json');
      let text = '';
      let error = '';
      let finish = '';
      const permissions: unknown[] = [];
      const json = format === 'json' || format === 'yaml';
      await readSse(res, (ev) => {
        if (ev.data === '[DONE]') return false;
        const c = JSON.parse(ev.data);
        if (c.type === 'text-delta') {
          text += c.delta;
          if (!json) process.stdout.write(c.delta);
        } else if (c.type === 'error') error = c.errorText;
        else if (c.type === 'finish') finish = c.finishReason ?? '';
        else if (c.type === 'data-svc-permission') {
          permissions.push(c.data);
          process.stderr.write(`\npermission requested (${c.id}): ${c.data?.title ?? ''}; answer with: svcctl approve ${id} ${c.id} --decision allow-once\n`);
        }
        return true;
      });
      if (json) emit({ session_id: id, text, finish_reason: finish, error: error || undefined, permissions }, format);
      else if (text && !text.endsWith('\n')) process.stdout.write('\n');
      if (error) throw new CliError(`the turn failed: ${error}`, ExitCode.failed);
    });

  p.command('approve')
    .description("answer a session's pending permission request")
    .argument('<session>')
    .argument('[request_id]', 'the request (else --turn)')
    .option('--turn <turn_id>', "the turn's only pending request")
    .option('--decision <decision>', 'allow-once | allow-always | reject-once | reject-always', 'allow-once')
    .action(async (id: string, requestId: string | undefined, o, cmd) => {
      if (!requestId && !o.turn) throw new UsageError('approve <session> <request_id> (or --turn <turn_id>)');
      const { api, format } = clientOf(cmd);
      const r = await api.ok('POST', `/api/sessions/${enc(id)}/approve`, { decision: o.decision, ...(requestId ? { request_id: requestId } : { turn_id: o.turn }) });
      if (format === 'json' || format === 'yaml') emit(r, format);
      else process.stdout.write(`${id}: ${o.decision} (${r.status})\n`);
    });
}
