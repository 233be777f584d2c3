import { expect } from 'chai';
import type { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';

/** loopDef builds a definition: its name, nodes, edges and the rest of it. */
export function loopDef(name: string, nodes: Record<string, unknown>[], extra: Record<string, unknown> = {}, edges?: Record<string, unknown>[]) {
  return { meta: { name }, graph: { nodes, ...(edges ? { edges } : {}) }, ...extra };
}

/** createLoop writes a definition through the definition route and returns the view. */
export async function createLoop(f: ServiceFixture, def: Record<string, unknown>) {
  const res = await f.api.post(`/api/workspaces/${f.ws.id}/loops`, { definition: def });
  if (res.status !== 201) throw new Error(`create loop: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.loop;
}

/** startRun starts a run and returns it. */
export async function startRun(f: ServiceFixture, name: string, body: Record<string, unknown> = {}) {
  const res = await f.api.post(`/api/workspaces/${f.ws.id}/loops/${name}/run`, body);
  if (res.status !== 201) throw new Error(`start ${name}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.run;
}

/** detail reads a run's LoopRunDetail. */
export async function detail(f: ServiceFixture, runId: string) {
  const res = await f.api.get(`/api/workspaces/${f.ws.id}/loop-runs/${runId}`);
  if (res.status !== 200) throw new Error(`detail ${runId}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** waitStatus waits until a run's status is one of `statuses` and returns its detail. */
export async function waitStatus(f: ServiceFixture, runId: string, statuses: string[], timeoutMs = 20_000) {
  return eventually(async () => {
    const d = await detail(f, runId);
    expect(statuses, `run ${runId} is ${d.run.status} (${d.run.status_cause}: ${d.run.status_reason})`).to.include(d.run.status);
    return d;
  }, timeoutMs, 25);
}

/** nodeStates maps `<node>[item]@<generation>` to the state of each node execution of a detail. */
export function nodeStates(d: any): Record<string, string> {
  const out: Record<string, string> = {};
  for (const g of d.generations) for (const o of g.outputs) out[`${o.node_id}${o.item_index >= 0 ? `[${o.item_index}]` : ''}@${g.generation}`] = o.status;
  return out;
}

/** outputOf returns a node's output in a generation (item -1). */
export function outputOf(d: any, node: string, generation = 1, item = -1) {
  return d.generations.find((g: any) => g.generation === generation)?.outputs.find((o: any) => o.node_id === node && o.item_index === item)?.output;
}

/** events reads a run's events (the stream's rows) by replaying its SSE stream up to the end. */
export async function eventsOf(f: ServiceFixture, runId: string, after = 0): Promise<any[]> {
  const res = await fetch(`${f.service.url}/api/workspaces/${f.ws.id}/loop-runs/${runId}/events?after_sequence=${after}`);
  const text = await res.text();
  return text.split('\n\n').filter((b) => b.includes('data: ')).map((b) => JSON.parse(b.slice(b.indexOf('data: ') + 6)));
}

/** t is a transform node whose output is `out` (a template value). */
export const t = (id: string, depends_on: string[] = [], out: unknown = id, extra: Record<string, unknown> = {}) => ({ id, kind: 'transform', depends_on, params: { output: out }, ...extra });
