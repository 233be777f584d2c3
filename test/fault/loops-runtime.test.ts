import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { ProcessCluster } from '../helpers/process.ts';
import { Client, eventually } from '../helpers/service.ts';

describe('Loops: the runtime hosting a run-agent node\'s session is SIGKILLed mid-turn', function () {
  this.timeout(120_000);
  const c = new ProcessCluster('loops-rtcrash', { LOOP_WATCHDOG_INTERVAL: '1s' }).install();

  it('the node prompts a new session on a surviving runtime and succeeds in the same generation (at least once), instead of failing the generation', async () => {
    const ctl = await c.start('api,controller');
    const victim = await c.start('runtime');
    const api = new Client(ctl.url);
    const ws = (await api.post('/api/workspaces', { root_dir: c.root })).body.workspace;
    // NOTE: the node's turn waits for this file, which appears only after the kill: the turn cannot end first.
    const go = path.join(c.root, 'go');
    const def = { meta: { name: 'agentic' }, graph: { nodes: [{ id: 'w', kind: 'run-agent', prompt: `/await ${go}\nworked` }, { id: 'after', kind: 'transform', depends_on: ['w'], params: { output: '{{ .nodes.w.output }}' } }] } };
    expect((await api.post(`/api/workspaces/${ws.id}/loops`, { definition: def })).status).to.equal(201);
    const run = (await api.post(`/api/workspaces/${ws.id}/loops/agentic/run`, {})).body.run;
    // The session the node's turn runs in is named by the run's channel_msg event.
    const first = await sessionOf(`${ctl.url}/api/workspaces/${ws.id}/loop-runs/${run.id}/events`);
    await c.start('runtime');
    await victim.kill('SIGKILL');
    writeFileSync(go, '');
    const d = await eventually(async () => {
      const x = (await api.get(`/api/workspaces/${ws.id}/loop-runs/${run.id}`)).body;
      expect(x.run.status, `${x.run.status_cause}: ${x.run.status_reason}`).to.equal('done');
      return x;
    }, 90_000, 250);
    expect(d.run.generation, 'the lost session did not fail the generation').to.equal(1);
    const w = d.generations[0].outputs.find((o: any) => o.node_id === 'w');
    expect(w).to.deep.include({ status: 'succeeded', output: 'worked' });
    expect((await api.get(`/api/sessions/${first}`)).body.session.stop_detail).to.equal('owning runtime lost');
  });
});

/** sessionOf follows a run's event stream until its first channel_msg and answers the session it names. */
async function sessionOf(url: string): Promise<string> {
  const res = await fetch(url, { signal: AbortSignal.timeout(20_000) });
  const reader = res.body!.getReader();
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended with no channel_msg: ${text}`);
    text += new TextDecoder().decode(value);
    const m = /"kind":"channel_msg".*?"session_id":"([^"]+)"/.exec(text);
    if (m) { await reader.cancel(); return m[1]; }
  }
}
