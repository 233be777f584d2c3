// The floor of an automation firing without the service, for the automation bench: one process keeps JOBS BullMQ job
// schedulers repeating every second; its worker (CONCURRENCY firings in flight, as the service's) takes each tick,
// opens an ACP session (`session/new`) on the built-in scripted agent, pooled SESSIONS_PER_PROCESS sessions to a
// process with one process kept warm, prompts it once and gives the slot back LINGER_MS after the turn (the
// service's session linger). No records, runs, events, fire limits or gates. It prints `ready` once the schedulers
// are in, and on `report` from stdin one JSON line: per tick its scheduled time, and the lags to the worker taking it
// and to the session's answer.
import { spawn, type ChildProcess } from 'node:child_process';
import readline from 'node:readline';
import { Readable, Writable } from 'node:stream';
import { client, methods, ndJsonStream, PROTOCOL_VERSION, type ClientConnection } from '@agentclientprotocol/sdk';
import { Queue, Worker } from 'bullmq';
import { scheduledAtOf } from '../../runtime/automation/queue.ts';

const JOBS = Number(process.env.JOBS ?? 100);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 200);
const PER_PROCESS = Number(process.env.SESSIONS_PER_PROCESS ?? 32);
const LINGER_MS = Number(process.env.LINGER_MS ?? 5_000);
const AGENT = JSON.parse(process.env.AGENT_ARGV!) as string[];
const CWD = process.env.WORKSPACE!;
const connection = { url: process.env.REDIS_URL!, maxRetriesPerRequest: null };

interface Agent { child: ChildProcess; conn: ClientConnection; ready: Promise<unknown>; used: number }
const agents: Agent[] = [];

function startAgent(): Agent {
  const child = spawn(process.execPath, AGENT, { cwd: CWD, env: { PATH: process.env.PATH ?? '', HOME: CWD, SCRIPTED_STATE_DIR: process.env.STATE_DIR! }, stdio: ['pipe', 'pipe', 'ignore'] });
  const conn = client({ name: 'bare' })
    .onNotification(methods.client.session.update, () => undefined)
    .connect(ndJsonStream(Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>, Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>));
  const ready = conn.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {}, clientInfo: { name: 'bare', version: '0' } });
  const a = { child, conn, ready, used: 0 };
  agents.push(a);
  child.on('exit', (code) => {
    agents.splice(agents.indexOf(a), 1);
    process.stderr.write(`bare-automation: an agent process exited (${code})\n`);
  });
  return a;
}

/** acquire places a session on the first process with room, starting one when none has; one spare is kept warm. */
function acquire(): Agent {
  const a = agents.find((x) => x.used < PER_PROCESS) ?? startAgent();
  a.used++;
  if (agents.every((x) => x.used >= PER_PROCESS)) startAgent();
  return a;
}

const ticks: [scheduled: number, run: number, session: number][] = [];

async function main() {
  const queue = new Queue('bare-automation', { connection });
  await Promise.all(Array.from({ length: JOBS }, (_, i) => queue.upsertJobScheduler(`job-${i}`, { every: 1000 }, { name: 'fire', data: { i } })));
  const worker = new Worker('bare-automation', async (job) => {
    const due = scheduledAtOf(job.id)!;
    const run = Date.now() - due;
    const a = acquire();
    try {
      await a.ready;
      const { sessionId } = await a.conn.agent.request(methods.agent.session.new, { cwd: CWD, mcpServers: [] });
      ticks.push([due, run, Date.now() - due]);
      await a.conn.agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'tick' }] });
    } finally {
      setTimeout(() => a.used--, LINGER_MS);
    }
  }, { connection, concurrency: CONCURRENCY });
  worker.on('failed', (_job, err) => process.stderr.write(`bare-automation: ${err.message}\n`));
  process.stdout.write('ready\n');
  for await (const line of readline.createInterface({ input: process.stdin })) {
    if (line === 'report') process.stdout.write(`${JSON.stringify(ticks)}\n`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
