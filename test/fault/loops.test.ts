import { expect } from 'chai';
import { ProcessCluster } from '../helpers/process.ts';
import { Client, eventually } from '../helpers/service.ts';

const RUNS = Number(process.env.LOOPS_FAULT_RUNS ?? 20);
const t = (id: string, depends_on: string[], out: unknown) => ({ id, kind: 'transform', depends_on, params: { output: out } });

/** TEN_NODES is the 10-node loop with a fan-out: a chain, a fan-out of 8 collected, a branch with a route not taken, a join. */
const TEN_NODES = {
  meta: { name: 'ten' },
  inputs: { items: { type: 'array', required: true } },
  graph: {
    nodes: [
      { id: 'start', kind: 'input', input_ref: 'items' },
      t('prep', ['start'], { n: '{{ .nodes.start.output }}' }),
      { id: 'split', kind: 'fan-out', depends_on: ['prep'], collection: '{{ .inputs.items }}', max_fan_out: 8 },
      t('work', ['split'], { item: '{{ .item }}', index: '{{ .item_index }}' }),
      { id: 'gather', kind: 'collect', depends_on: ['work'] },
      t('sum', ['gather'], { items: '{{ .nodes.gather.output.items }}' }),
      { id: 'route', kind: 'branch', depends_on: ['sum'], condition: 'yes' },
      t('yes', [], 'taken'),
      t('no', [], 'not taken'),
      t('final', ['yes', 'no'], { yes: '{{ .nodes.yes.outcome }}', no: '{{ .nodes.no.outcome }}' }),
    ],
    edges: [{ from: 'route', to: 'yes', when: 'yes' }, { from: 'route', to: 'no', when: 'no' }],
  },
};

describe(`Loops under a SIGKILL: ${RUNS} runs of a 10-node loop with a fan-out on 2 controller+runtime processes, one killed mid-way`, function () {
  this.timeout(120_000);
  // NOTE: a short lock and watchdog so the killed process's jobs and lost follow-ups are taken over within seconds.
  const c = new ProcessCluster('loops-fault', { LOOP_LOCK_DURATION: '2s', LOOP_WATCHDOG_INTERVAL: '1s' }).install();

  it('every run ends done, every node execution (each transform output) is recorded exactly once, no node is left running', async () => {
    const victim = await c.start();
    const survivor = await c.start();
    const api = new Client(survivor.url);
    const ws = (await api.post('/api/workspaces', { root_dir: c.root })).body.workspace;
    const created = await api.post(`/api/workspaces/${ws.id}/loops`, { definition: TEN_NODES });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const items = Array.from({ length: 8 }, (_, i) => `f${i}`);
    const ids: string[] = [];
    for (let i = 0; i < RUNS; i++) {
      const r = await api.post(`/api/workspaces/${ws.id}/loops/ten/run`, { inputs: { items } });
      expect(r.status, JSON.stringify(r.body)).to.equal(201);
      ids.push(r.body.run.id);
      // NOTE: the kill lands while runs are being started and their nodes run on both processes.
      if (i === Math.floor(RUNS / 3)) await victim.kill('SIGKILL');
    }
    const details = await eventually(async () => {
      const ds = await Promise.all(ids.map(async (id) => (await api.get(`/api/workspaces/${ws.id}/loop-runs/${id}`)).body));
      const pending = ds.filter((d) => d.run.status !== 'done');
      expect(pending.map((d) => `${d.run.id} ${d.run.status} ${d.run.status_reason}`)).to.deep.equal([]);
      return ds;
    }, 90_000, 250);
    for (const d of details) {
      const outs = d.generations.flatMap((g: any) => g.outputs);
      expect(outs.filter((o: any) => o.status === 'running' || o.status === 'queued')).to.deep.equal([]);
      expect(outs.find((o: any) => o.node_id === 'gather').output.items.map((x: any) => x.item)).to.deep.equal(items);
      expect(outs.find((o: any) => o.node_id === 'final').output).to.deep.equal({ yes: 'succeeded', no: 'skipped' });
      const res = await fetch(`${survivor.url}/api/workspaces/${ws.id}/loop-runs/${d.run.id}/events`);
      const events = (await res.text()).split('\n\n').filter((b) => b.includes('data: ')).map((b) => JSON.parse(b.slice(b.indexOf('data: ') + 6)));
      expect(events.map((e) => e.seq)).to.deep.equal(events.map((_, i) => i + 1));
      const succeeded = events.filter((e) => e.kind === 'node_succeeded').map((e) => `${e.payload.generation}:${e.payload.node_id}:${e.payload.item_index}`);
      expect(new Set(succeeded).size, `${d.run.id}: a node execution succeeded twice`).to.equal(succeeded.length);
      // 9 executions of the chain's own nodes (no is skipped) + 8 items: each output recorded once
      expect(succeeded.length).to.equal(9 - 1 + 8);
    }
  });
});
