import { expect } from 'chai';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { decodeSpec } from '../../codecs/index.ts';
import { lintLoop } from '../../codecs/loop-lint.ts';
import { canonicalLoop } from '../../codecs/loop.ts';
import { canTransition, LOOP_RUN_STATUSES, TRANSITION_CAUSES, type LoopDefinition, type LoopRunStatus } from '../../runtime/loops/types.ts';
import { Keys } from '../../store/keys.ts';
import { LoopStore } from '../../store/loop-store.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { RedisServer } from '../helpers/redis-server.ts';
import { eventually } from '../helpers/service.ts';
import { createLoop, loopDef, t } from './helpers.ts';

const WS = { scope: { kind: 'workspace' as const, id: 'ws1' } };
const lint = (def: Record<string, unknown>) => lintLoop(canonicalLoop(def as Record<string, any>) as LoopDefinition);
const codes = (def: Record<string, unknown>) => lint(def).filter((i) => i.severity === 'error').map((i) => i.code);
const g = (nodes: Record<string, unknown>[], extra: Record<string, unknown> = {}, edges?: Record<string, unknown>[]) => loopDef('l', nodes, extra, edges);

const LINT_CASES: { reason: string; def: Record<string, unknown>; code: string }[] = [
  { reason: 'an edge back is a cycle', def: g([t('a', ['b']), t('b', ['a'])]), code: 'cycle' },
  { reason: 'nodes behind a cycle cannot be reached from an entry node', def: g([t('a'), t('b', ['c']), t('c', ['b'])]), code: 'unreachable_node' },
  { reason: 'a graph without nodes never terminates anything', def: g([]), code: 'non_terminating_structure' },
  { reason: 'iteration_cap 0 cannot bound the generations', def: g([t('a')], { contract: { iteration_cap: 0 } }), code: 'non_terminating_structure' },
  { reason: 'a fan-out over a template needs max_fan_out', def: g([{ id: 'f', kind: 'fan-out', collection: '{{ .inputs.x }}' }]), code: 'fan_out_unbounded' },
  { reason: 'max_fan_out above 64', def: g([{ id: 'f', kind: 'fan-out', collection: '{{ .inputs.x }}', max_fan_out: 65 }]), code: 'fan_out_ceiling_exceeded' },
  { reason: 'max_revisions above the ceiling', def: g([{ id: 'g', kind: 'gate', criteria: [{ type: 'human' }], max_revisions: 11 }]), code: 'gate_max_revisions_ceiling_exceeded' },
  { reason: 'node ids are snake_case', def: g([t('BadId')]), code: 'node_id_invalid' },
  { reason: 'revise_until_clean needs a judge or a human', def: g([{ id: 'g', kind: 'gate', verdict_policy: 'revise_until_clean', criteria: [{ type: 'command', check: 'true' }] }]), code: 'verdict_policy_requires_judge' },
  { reason: 'harvest maps names to templates', def: g([{ ...t('a'), harvest: { x: 1 } }]), code: 'invalid_harvest' },
  { reason: 'an action kind is reserved or a tool id', def: g([{ id: 'a', kind: 'frobnicate' }]), code: 'unknown_action_kind' },
  { reason: 'a control node names a control kind', def: g([{ id: 'a', kind: 'transform', class: 'control' }]), code: 'unknown_control_kind' },
  { reason: 'a source node names a source kind', def: g([{ id: 'a', kind: 'transform', class: 'source' }]), code: 'unknown_source_kind' },
  { reason: 'watch-source needs watch.kind', def: g([{ id: 'w', kind: 'watch-source' }]), code: 'watch_kind_required' },
  { reason: 'watch-events needs a subscription', def: g([{ id: 'w', kind: 'watch-events' }]), code: 'watch_events_subscription_required' },
  { reason: 'watch-events names a published event', def: g([{ id: 'w', kind: 'watch-events', events: [{ kind: 'nope.never', filter: 'workspace=a' }] }]), code: 'watch_events_kind_unknown' },
  { reason: 'watch-events takes one event, not a pattern', def: g([{ id: 'w', kind: 'watch-events', events: [{ kind: 'task.*', filter: 'workspace=a' }] }]), code: 'watch_events_kind_unsupported' },
  { reason: 'the filter follows the notification grammar', def: g([{ id: 'w', kind: 'watch-events', events: [{ kind: 'task.run_completed', filter: 'bogus==' }] }]), code: 'watch_events_filter_invalid' },
  { reason: 'a high-volume event needs a filter', def: g([{ id: 'w', kind: 'watch-events', events: [{ kind: 'turn.end' }] }]), code: 'watch_events_filter_too_broad' },
  { reason: 'events is a list of {kind, filter?}', def: g([{ id: 'w', kind: 'watch-events', events: 'task.run_completed' }]), code: 'watch_events_shape_invalid' },
  { reason: 'file-import needs parse', def: g([{ id: 'f', kind: 'file-import' }]), code: 'file_import_parse_required' },
  { reason: 'node ids are unique', def: g([t('a'), t('a')]), code: 'duplicate_node_id' },
  { reason: 'terminal states are the run\'s terminal statuses', def: g([t('a')], { contract: { terminal_states: ['finished'] } }), code: 'unknown_terminal_state' },
  { reason: 'the goal is bounded', def: g([t('a')], { contract: { goal: 'x'.repeat(5000) } }), code: 'goal_too_long' },
  { reason: 'an edge names nodes of the graph', def: g([t('a')], {}, [{ from: 'a', to: 'ghost' }]), code: 'edge_unknown_node' },
  { reason: 'a fan-out inside another\'s items is refused', def: g([{ id: 'f', kind: 'fan-out', params: { items: [1] } }, { id: 'h', kind: 'fan-out', depends_on: ['f'], params: { items: [1] } }]), code: 'fan_out_nested' },
  { reason: 'a collect gathers a fan-out', def: g([t('a'), { id: 'c', kind: 'collect', depends_on: ['a'] }]), code: 'collect_without_fan_out' },
];

describe('Loop definitions: lint', () => {
  for (const c of LINT_CASES) {
    it(`${c.code}: ${c.reason}`, () => {
      expect(codes(c.def)).to.include(c.code);
    });
  }

  it('reports every error at once, each naming its node', () => {
    const issues = lint(g([t('Bad'), t('a', ['a']), { id: 'x', kind: 'frobnicate' }]));
    expect(issues.map((i) => [i.node_id, i.code])).to.deep.include.members([['Bad', 'node_id_invalid'], ['a', 'cycle'], ['x', 'unknown_action_kind']]);
  });

  it('accepts a valid graph with no finding, and the codec is idempotent and refuses another scope', () => {
    const def = g([t('a'), { id: 'b', kind: 'branch', depends_on: ['a'], condition: 'x' }, t('c'), { id: 'f', kind: 'fan-out', depends_on: ['c'], params: { items: [1, 2] } }, t('w', ['f']), { id: 'k', kind: 'collect', depends_on: ['w'] }, { id: 'tool', kind: 'svc__tool_list' }], {}, [{ from: 'b', to: 'c', when: 'x' }]);
    expect(lint(def)).to.deep.equal([]);
    const once = decodeSpec('loop', def, WS);
    expect(once.ok, JSON.stringify(once)).to.equal(true);
    expect(decodeSpec('loop', (once as { spec: unknown }).spec, WS)).to.deep.equal(once);
    expect(decodeSpec('loop', def, { scope: { kind: 'global' } }).ok).to.equal(false);
  });
});

describe('Loop runs: the transition table in the step script', function () {
  this.timeout(30_000);
  const redis = new RedisServer();
  let conn: Redis;
  let store: LoopStore;
  before(async () => { await redis.start(); conn = redis.client(); store = new LoopStore(conn, new Keys('tt:')); });
  after(async () => { conn.disconnect(); await redis.destroy(); });

  it('applies every allowed transition and refuses every other one, writing nothing (status and events unchanged)', async () => {
    let n = 0;
    for (const from of LOOP_RUN_STATUSES) {
      for (const to of LOOP_RUN_STATUSES) {
        for (const cause of ['operator_stop', 'start'] as const) {
          const id = `r${n++}`;
          const created = await store.step(id, { create: { run: { id, status: from }, def: '{}' } });
          expect(created.kind).to.equal('ok');
          const res = await store.step(id, { transition: { to, cause } });
          const want = canTransition(from as LoopRunStatus, to as LoopRunStatus, cause);
          expect(res.kind, `${from} → ${to} (${cause})`).to.equal(want ? 'ok' : 'illegal');
          expect(await store.status(id)).to.equal(want ? to : from);
          expect((await store.events(id, 0)).length, `${from} → ${to} events`).to.equal(want ? 1 : 0);
        }
      }
    }
    expect(TRANSITION_CAUSES).to.include('operator_stop');
  });

  it('refuses a step whose expectation or node version does not hold, writing nothing', async () => {
    await store.step('x', { create: { run: { id: 'x', status: 'running', generation: '1' }, def: '{}' } });
    expect((await store.step('x', { expect: { generation: 2 }, set: { a: '1' } })).kind).to.equal('expectation');
    expect((await store.step('x', { nodes: [['1:a:-1', 3, '{"v":4}']] })).kind).to.equal('node_conflict');
    expect(await store.readRun('x')).to.not.have.property('a');
    expect(await store.readNode('x', '1:a:-1')).to.equal(null);
  });
});

describe('Loop definitions: routes', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();
  const loops = () => `/api/workspaces/${f.ws.id}/loops`;

  it('creates, reads, lists, patches with expected_version (409 loop version conflict with current_version, unchanged), deletes', async () => {
    const v1 = await createLoop(f, loopDef('flow', [t('a')]));
    expect(v1).to.deep.include({ name: 'flow', version: 1, workspace_id: f.ws.id });
    expect((await f.api.post(loops(), { definition: loopDef('flow', [t('a')]) })).status).to.equal(409);
    expect((await f.api.get(loops())).body.loops.map((l: any) => l.name)).to.deep.equal(['flow']);
    const stale = await f.api.patch(`${loops()}/flow`, { expected_version: 7, definition: loopDef('flow', [t('b')]) });
    expect(stale.status).to.equal(409);
    expect(stale.body).to.deep.include({ error: 'loop version conflict', current_version: 1 });
    expect((await f.api.get(`${loops()}/flow`)).body.loop.definition.graph.nodes.map((n: any) => n.id)).to.deep.equal(['a']);
    const ok = await f.api.patch(`${loops()}/flow`, { expected_version: 1, definition: loopDef('flow', [t('b')]) });
    expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
    expect(ok.body.loop).to.deep.include({ name: 'flow', version: 2 });
    // the record is the resource layer's: GitOps reads the same one
    const rec = await f.api.get(`/api/resources/loop/${ok.body.loop.id}`);
    expect(rec.status).to.equal(200);
    expect((await f.api.delete(`${loops()}/flow`)).status).to.equal(204);
    expect((await f.api.get(`${loops()}/flow`)).status).to.equal(404);
  });

  it('refuses a node field that is a typo of a node field (dependson, dependsOn) as an unknown field, and keeps free extra properties', async () => {
    const typo = await f.api.post(loops(), { definition: loopDef('typo', [t('a'), { id: 'b', kind: 'transform', dependson: ['a'] }, { id: 'c', kind: 'transform', dependsOn: ['a'], Prompt: 'x' }]) });
    expect(typo.status, JSON.stringify(typo.body)).to.equal(422);
    expect(typo.body.diagnostic.code).to.equal('unknown_field');
    expect(Object.keys(typo.body.diagnostic.evidence).sort()).to.deep.equal(['definition.graph.nodes[1].dependson', 'definition.graph.nodes[2].Prompt', 'definition.graph.nodes[2].dependsOn']);
    expect((await f.api.get(`${loops()}/typo`)).status).to.equal(404);
    const free = await f.api.post(loops(), { definition: loopDef('free', [t('a', [], 'x', { owner: 'team-a', notes: 'kept' })]) });
    expect(free.status, JSON.stringify(free.body)).to.equal(201);
    expect(free.body.loop.definition.graph.nodes[0]).to.include({ owner: 'team-a', notes: 'kept' });
    const warned = await f.api.post(`${loops()}?field_validation=warn`, { definition: loopDef('typo', [t('a'), { id: 'b', kind: 'transform', dependson: ['a'] }]) });
    expect(warned.status, JSON.stringify(warned.body)).to.equal(201);
    expect(warned.headers.get('warning')).to.include('definition.graph.nodes[1].dependson').and.not.include('spec.');
  });

  it('validate answers what a write would: an unknown field (meta.x, a typo of a node field) is an unknown_field error, a warning with ?field_validation=warn', async () => {
    await createLoop(f, loopDef('checked', [t('a')]));
    const def = { meta: { name: 'checked', x: 1 }, graph: { nodes: [t('a'), { id: 'b', kind: 'transform', dependson: ['a'] }] } };
    const strict = await f.api.post(`${loops()}/checked/validate`, { definition: def });
    expect(strict.status).to.equal(200);
    expect(strict.body.valid).to.equal(false);
    expect(strict.body.errors.map((e: any) => [e.code, e.severity, e.message])).to.deep.equal([
      ['unknown_field', 'error', 'definition.meta.x: unknown field'], ['unknown_field', 'error', 'definition.graph.nodes[1].dependson: unknown field'],
    ]);
    expect((await f.api.post(loops(), { definition: { ...def, meta: { name: 'other', x: 1 } } })).status).to.equal(422);
    const warn = await f.api.post(`${loops()}/checked/validate?field_validation=warn`, { definition: def });
    expect(warn.body.valid).to.equal(true);
    expect(warn.body.errors.map((e: any) => e.severity)).to.deep.equal(['warning', 'warning']);
    const ignore = await f.api.post(`${loops()}/checked/validate?field_validation=ignore`, { definition: def });
    expect(ignore.body).to.deep.equal({ valid: true, errors: [] });
  });

  it('says what a bad value must be, whole: "must be at least 1", not "be at least 1"', async () => {
    await createLoop(f, loopDef('msgs', [t('a')]));
    const cfg = await f.api.put(`${loops()}/msgs/config`, { config: { iteration_cap: 0, budget_on_exceeded: 'panic' } });
    expect(cfg.status).to.equal(422);
    expect(cfg.body.diagnostic.evidence).to.deep.equal({ 'config.iteration_cap': 'must be at least 1', 'config.budget_on_exceeded': 'must be one of halt, escalate' });
    const node = await f.api.post(loops(), { definition: loopDef('msgs2', [{ id: 'fan', kind: 'fan-out', max_fan_out: 0, params: { items: [1] } }]) });
    expect(node.status).to.equal(422);
    expect(JSON.stringify(node.body.diagnostic.evidence)).to.include('must be at least 1');
  });

  it('refuses an invalid definition with 422 listing every lint error in the evidence, and stores nothing', async () => {
    const res = await f.api.post(loops(), { definition: loopDef('bad', [t('Bad'), t('a', ['a'])]) });
    expect(res.status).to.equal(422);
    expect(res.body.diagnostic.evidence.valid).to.equal(false);
    expect(res.body.diagnostic.evidence.errors.map((e: any) => e.code)).to.include.members(['node_id_invalid', 'cycle']);
    expect((await f.api.get(loops())).body.loops).to.deep.equal([]);
    const put = await f.api.put('/api/resources/loop/bad', { scope: { kind: 'workspace', id: f.ws.id }, spec: loopDef('bad', [t('a', ['a'])]) });
    expect(put.status).to.equal(422);
    expect(JSON.stringify(put.body.diagnostic.evidence)).to.include('cycle');
  });

  it('validates, reads and writes config and annotations, and refuses bad ones', async () => {
    await createLoop(f, loopDef('flow', [t('a')]));
    expect((await f.api.post(`${loops()}/flow/validate`, {})).body).to.deep.equal({ valid: true, errors: [] });
    const v = await f.api.post(`${loops()}/flow/validate`, { definition: loopDef('flow', [t('a', ['a'])]) });
    expect(v.body.valid).to.equal(false);
    expect((await f.api.put(`${loops()}/flow/config`, { config: { iteration_cap: 4, budget_on_exceeded: 'escalate' } })).body).to.deep.equal({ config: { iteration_cap: 4, budget_on_exceeded: 'escalate' } });
    expect((await f.api.get(`${loops()}/flow/config`)).body.config.iteration_cap).to.equal(4);
    expect((await f.api.put(`${loops()}/flow/config`, { config: { iteration_cap: 'x' } })).status).to.equal(422);
    expect((await f.api.put(`${loops()}/flow/config`, { config: { bogus: 1 } })).status).to.equal(422);
    expect((await f.api.put(`${loops()}/flow/annotations`, { annotations: [{ node_id: 'a', x: 1, y: 2 }] })).status).to.equal(200);
    expect((await f.api.get(`${loops()}/flow/annotations`)).body).to.deep.equal({ annotations: [{ node_id: 'a', x: 1, y: 2 }] });
    expect((await f.api.put(`${loops()}/flow/annotations`, { annotations: [{ node_id: 'ghost', x: 1, y: 2 }] })).status).to.equal(422);
    expect((await f.api.get(`${loops()}/flow`)).body.loop.version).to.equal(3);
  });

  it('a loop naming a missing agent or child loop is Degraded naming it; writing the missing loop makes it Ready', async () => {
    const v = await createLoop(f, loopDef('uses', [{ id: 'ask', kind: 'run-agent', agent: 'ghost-agent' }, { id: 'sub', kind: 'run-loop', loop: 'later', depends_on: ['ask'] }]));
    const degraded = await eventually(async () => {
      const l = (await f.api.get(`${loops()}/uses`)).body.loop;
      expect(l.state).to.equal('Degraded');
      return l;
    });
    const cond = degraded.status.conditions.find((c: any) => c.type === 'Degraded');
    expect(cond.reason).to.equal('AgentNotFound');
    expect(cond.message).to.include('ghost-agent');
    expect(v.id).to.equal(degraded.id);
    await createLoop(f, loopDef('other', [{ id: 'sub', kind: 'run-loop', loop: 'later' }]));
    await eventually(async () => {
      const l = (await f.api.get(`${loops()}/other`)).body.loop;
      expect(l.status.conditions.find((c: any) => c.type === 'Degraded').reason).to.equal('LoopNotFound');
    });
    await createLoop(f, loopDef('later', [t('a')]));
    await eventually(async () => expect((await f.api.get(`${loops()}/other`)).body.loop.state).to.equal('Ready'));
  });

  it('start: unknown body fields 400, dry=true answers the plan and starts nothing, missing inputs 422, an unknown loop 404', async () => {
    await createLoop(f, loopDef('flow', [t('a'), t('b', ['a'])], { inputs: { who: { type: 'string', required: true } } }));
    const unknown = await f.api.post(`${loops()}/flow/run`, { inputs: { who: 'x' }, bogus: 1 });
    expect(unknown.status).to.equal(400);
    expect(unknown.body.diagnostic.evidence).to.deep.equal({ bogus: 'unknown field' });
    const dry = await f.api.post(`${loops()}/flow/run?dry=true`, { inputs: { who: 'x' } });
    expect(dry.status).to.equal(200);
    expect(dry.body.dry_run.nodes.map((n: any) => [n.id, n.depends_on])).to.deep.equal([['a', []], ['b', ['a']]]);
    expect(dry.body.dry_run.resolved_inputs).to.deep.equal({ who: 'x' });
    expect((await f.api.get(`/api/workspaces/${f.ws.id}/loop-runs`)).body.aggregates.total).to.equal(0);
    const missing = await f.api.post(`${loops()}/flow/run`, {});
    expect(missing.status).to.equal(422);
    expect(missing.body.diagnostic.evidence).to.have.property('inputs.who');
    expect((await f.api.post(`${loops()}/nope/run`, {})).status).to.equal(404);
    expect((await f.api.get(`/api/workspaces/${f.ws.id}/loop-runs/nope`)).status).to.equal(404);
  });

  it('start: a parent_loop_run_id of another workspace is 404, as one that does not exist, and starts nothing', async () => {
    const root = path.join(f.root, 'other-ws');
    mkdirSync(root, { recursive: true });
    const other = (await f.api.post('/api/workspaces', { root_dir: root })).body.workspace.id;
    expect((await f.api.post(`/api/workspaces/${other}/loops`, { definition: loopDef('theirs', [t('a')]) })).status).to.equal(201);
    const theirs = (await f.api.post(`/api/workspaces/${other}/loops/theirs/run`, {})).body.run.id;
    await createLoop(f, loopDef('mine', [t('a')]));
    const before = (await f.api.get(`/api/workspaces/${f.ws.id}/loop-runs`)).body.aggregates.total;
    const res = await f.api.post(`${loops()}/mine/run`, { parent_loop_run_id: theirs });
    expect(res.status, JSON.stringify(res.body)).to.equal(404);
    expect(res.body.diagnostic.code).to.equal('loop_run_not_found');
    expect(res.body.error).to.equal((await f.api.post(`${loops()}/mine/run`, { parent_loop_run_id: 'nope' })).body.error.replace('nope', theirs));
    expect((await f.api.get(`/api/workspaces/${f.ws.id}/loop-runs`)).body.aggregates.total).to.equal(before);
  });
});
