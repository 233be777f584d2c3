import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { lintLoop } from '../../codecs/loop-lint.ts';
import { canonicalLoop } from '../../codecs/loop.ts';
import type { LoopDefinition } from '../../runtime/loops/types.ts';
import { sha256 } from '../../runtime/process/auth.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { loopDef, t } from './helpers.ts';

/** The loop definition routes keep their contract: names, bodies, field errors, the lint and the roles. */
describe('Loop definitions keep the contract', function () {
  this.timeout(60_000);
  const TOKENS = { admin: 'a-secret', operator: 'o-secret', reader: 'r-secret' } as const;
  const f = new ServiceFixture({
    workspace: false,
    env: ({ dataDir }) => {
      const file = path.join(dataDir, 'tokens.yaml');
      writeFileSync(file, `tokens:\n${Object.entries(TOKENS).map(([role, s]) => `  - {name: ${role}, role: ${role}, sha256: ${sha256(s)}}`).join('\n')}\n`);
      return { AUTH_MODE: 'token', AUTH_TOKENS_FILE: file, EXEC_ALLOWLIST: 'true,false', WORKSPACE_ROOTS: os.tmpdir() };
    },
  }).install();
  let ws = '';
  const as = (role: keyof typeof TOKENS) => ({ Authorization: `Bearer ${TOKENS[role]}` });
  const call = (role: keyof typeof TOKENS, method: string, p: string, body?: unknown) => f.api.call(method, p, body, as(role));
  const loops = () => `/api/workspaces/${ws}/loops`;
  const resource = (id: string) => `/api/resources/loop/${id}`;
  const checked = (name: string, check: unknown = ['true']) => loopDef(name, [t('work'), { id: 'verify', kind: 'gate', depends_on: ['work'], criteria: [{ type: 'command', check }] }]);
  beforeEach(async () => {
    const res = await call('admin', 'POST', '/api/workspaces', { root_dir: f.root });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    ws = res.body.workspace.id;
  });

  it('a name is unique per workspace, whichever route writes it: 409 naming the holder, nothing written, and a delete frees it for no one else', async () => {
    expect((await call('operator', 'POST', loops(), { definition: loopDef('dup', [t('a', [], 'first')]) })).status).to.equal(201);
    const holder = (await call('reader', 'GET', `${loops()}/dup`)).body.loop.id;

    const twin = await call('operator', 'PUT', resource('dup-twin'), { scope: { kind: 'workspace', id: ws }, spec: loopDef('dup', [t('a', [], 'second')]) });
    expect(twin.status, JSON.stringify(twin.body)).to.equal(409);
    expect(twin.body.diagnostic.code).to.equal('loop_name_taken');
    expect(twin.body.diagnostic.evidence).to.include({ name: 'dup', held_by: holder });
    expect((await call('reader', 'GET', resource('dup-twin'))).status).to.equal(404);

    // A record of another name may not be renamed onto it either; it keeps its own name.
    expect((await call('operator', 'PUT', resource('other'), { scope: { kind: 'workspace', id: ws }, spec: loopDef('other', [t('a')]) })).status).to.equal(201);
    const rename = await call('operator', 'PUT', resource('other'), { scope: { kind: 'workspace', id: ws }, spec: loopDef('dup', [t('a')]), expected_version: 1 });
    expect(rename.status).to.equal(409);
    expect(rename.body.diagnostic.evidence.held_by).to.equal(holder);
    expect((await call('reader', 'GET', resource('other'))).body.record.spec.meta.name).to.equal('other');

    const again = await call('operator', 'POST', loops(), { definition: loopDef('dup', [t('b')]) });
    expect(again.status).to.equal(409);
    expect(again.body.diagnostic.evidence).to.include({ name: 'dup', id: holder });

    expect((await call('operator', 'DELETE', `${loops()}/dup`)).status).to.equal(204);
    expect((await call('reader', 'GET', `${loops()}/dup`)).status).to.equal(404);
    expect((await call('reader', 'GET', loops())).body.loops.map((l: any) => l.name)).to.deep.equal(['other']);
  });

  it('concurrent writes of one name under different record ids: exactly one is stored, every other is 409', async () => {
    const ids = Array.from({ length: 24 }, (_, i) => `race-${i}`);
    const answers = await Promise.all(ids.map((id) => call('operator', 'PUT', resource(id), { scope: { kind: 'workspace', id: ws }, spec: loopDef('raced', [t('a', [], id)]) })));
    expect(answers.map((a) => a.status).sort()).to.deep.equal([201, ...ids.slice(1).map(() => 409)]);
    expect(answers.filter((a) => a.status === 409).every((a) => a.body.diagnostic.code === 'loop_name_taken')).to.equal(true);
    const stored = (await call('reader', 'GET', loops())).body.loops;
    expect(stored.map((l: any) => l.name)).to.deep.equal(['raced']);
    expect(stored[0].id).to.equal(ids[answers.findIndex((a) => a.status === 201)]);
  });

  it('a write of a name another write is taking waits for it and, while it is held, is 409 concurrent_change with nothing stored', async () => {
    const redis = f.redis.client();
    try {
      await redis.set(`svc:{r}:name-claim:loop:workspace:${ws}:held`, 'another-writer', 'PX', 60_000);
      const res = await call('operator', 'PUT', resource('held-1'), { scope: { kind: 'workspace', id: ws }, spec: loopDef('held', [t('a')]) });
      expect(res.status).to.equal(409);
      expect(res.body.diagnostic.code).to.equal('concurrent_change');
      expect((await call('reader', 'GET', resource('held-1'))).status).to.equal(404);
      expect(await redis.get(`svc:{r}:name-claim:loop:workspace:${ws}:held`)).to.equal('another-writer');
    } finally {
      redis.disconnect();
    }
  });

  it('roles: validate and a dry run need reader and write nothing; node positions and run config need operator, not admin, on a loop with a command criterion', async () => {
    expect((await call('operator', 'POST', loops(), { definition: checked('checked') })).status).to.equal(403);
    const made = await call('admin', 'POST', loops(), { definition: checked('checked') });
    expect(made.status, JSON.stringify(made.body)).to.equal(201);

    const valid = await call('reader', 'POST', `${loops()}/checked/validate`, {});
    expect(valid.status, JSON.stringify(valid.body)).to.equal(200);
    expect(valid.body.valid).to.equal(true);
    const other = await call('reader', 'POST', `${loops()}/checked/validate`, { definition: loopDef('checked', [t('a', ['a'])]) });
    expect(other.status).to.equal(200);
    expect(other.body.valid).to.equal(false);
    expect((await call('reader', 'GET', `${loops()}/checked`)).body.loop.version).to.equal(1);
    expect((await call('reader', 'PUT', `${loops()}/checked/annotations`, { annotations: [{ node_id: 'work', x: 1, y: 2 }] })).status).to.equal(403);
    // A dry run answers the plan and starts nothing: reader; a start is operator's.
    const dry = await call('reader', 'POST', `${loops()}/checked/run?dry=true`, {});
    expect(dry.status, JSON.stringify(dry.body)).to.equal(200);
    expect(dry.body.dry_run.nodes.map((n: any) => n.id)).to.deep.equal(['work', 'verify']);
    expect((await call('reader', 'POST', `${loops()}/checked/run`, {})).status).to.equal(403);
    expect((await call('reader', 'GET', `/api/workspaces/${ws}/loop-runs`)).body.runs).to.deep.equal([]);

    const moved = await call('operator', 'PUT', `${loops()}/checked/annotations`, { annotations: [{ node_id: 'work', x: 10, y: 20 }] });
    expect(moved.status, JSON.stringify(moved.body)).to.equal(200);
    const cfg = await call('operator', 'PUT', `${loops()}/checked/config`, { config: { iteration_cap: 2 } });
    expect(cfg.status, JSON.stringify(cfg.body)).to.equal(200);
    const after = (await call('reader', 'GET', `${loops()}/checked`)).body.loop.definition;
    expect(after.annotations).to.deep.equal([{ node_id: 'work', x: 10, y: 20 }]);
    expect(after.graph.nodes.find((n: any) => n.id === 'verify').criteria).to.deep.equal([{ type: 'command', check: ['true'] }]);

    // The criteria themselves stay an admin's: an operator's definition write that keeps them is still refused.
    const patch = await call('operator', 'PATCH', `${loops()}/checked`, { definition: checked('checked', ['false']) });
    expect(patch.status).to.equal(403);
    expect(Object.keys(patch.body.diagnostic.evidence)).to.include('definition.graph.nodes[1].criteria[0].check');
    expect(JSON.stringify(patch.body)).not.to.include('spec.');
  });

  it('field errors name the field as the caller wrote it, in plain words; a command check with shell operators is refused when written', async () => {
    const bad = await call('operator', 'POST', loops(), { definition: loopDef('typed', [{ ...t('a'), max_parallel: 'x' }], { network_participation: { mode: 'banana' } }) });
    expect(bad.status).to.equal(422);
    const messages = bad.body.diagnostic.evidence.errors.map((e: any) => e.message);
    expect(messages).to.include.members(['definition.graph.nodes[0].max_parallel: must be an integer', 'definition.network_participation.mode: must be one of local, live']);
    expect(JSON.stringify(bad.body)).not.to.match(/`|final value|spec\./);

    const big = await call('operator', 'POST', loops(), { definition: loopDef('big', [t('a')], { meta: { name: 'big', description: 'x'.repeat(300_000) } }) });
    expect(big.status).to.equal(413);
    expect(big.body.diagnostic.evidence).to.have.keys('definition');
    expect(big.body.error).to.match(/^definition is \d+ bytes/);

    const shell = await call('admin', 'POST', loops(), { definition: checked('shell', 'true && rm -rf /') });
    expect(shell.status).to.equal(422);
    expect(shell.body.diagnostic.evidence.errors.map((e: any) => e.message)).to.deep.equal(['definition.graph.nodes[1].criteria[0].check: must be a plain command line (no shell operators, substitutions, globs or comments)']);
    const viaResource = await call('admin', 'PUT', resource('shell'), { scope: { kind: 'workspace', id: ws }, spec: loopDef('shell', [t('a')], { contract: { verification: [{ type: 'command', check: 'true | false' }] } }) });
    expect(viaResource.status).to.equal(422);
    expect(Object.keys(viaResource.body.diagnostic.evidence)).to.deep.equal(['spec.contract.verification[0].check']);
    expect((await call('reader', 'GET', loops())).body.loops).to.deep.equal([]);
  });

  it('PATCH refuses another meta.name with 422 naming it and changes nothing; the path name is kept when meta.name is left out', async () => {
    expect((await call('operator', 'POST', loops(), { definition: loopDef('keep', [t('a', [], 'one')]) })).status).to.equal(201);
    const renamed = await call('operator', 'PATCH', `${loops()}/keep`, { definition: loopDef('other', [t('a', [], 'two')]) });
    expect(renamed.status).to.equal(422);
    expect(renamed.body.diagnostic.evidence).to.have.keys('definition.meta.name');
    const kept = (await call('reader', 'GET', `${loops()}/keep`)).body.loop;
    expect(kept).to.include({ name: 'keep', version: 1 });
    expect(kept.definition.graph.nodes[0].params.output).to.equal('one');
    expect((await call('reader', 'GET', `${loops()}/other`)).status).to.equal(404);

    const same = await call('operator', 'PATCH', `${loops()}/keep`, { definition: { graph: { nodes: [t('a', [], 'two')] } } });
    expect(same.status, JSON.stringify(same.body)).to.equal(200);
    expect(same.body.loop).to.include({ name: 'keep', version: 2 });
  });

  it('run controls: pause takes a free-form object body; after_sequence below 0 is 422 naming it; network_participation is checked at start', async () => {
    const def = loopDef('parked', [t('work'), { id: 'review', kind: 'gate', depends_on: ['work'], criteria: [{ type: 'human', prompt: 'ok?' }] }]);
    expect((await call('operator', 'POST', loops(), { definition: def })).status).to.equal(201);
    const bad = await call('operator', 'POST', `${loops()}/parked/run`, { network_participation: { mode: 'banana' } });
    expect(bad.status).to.equal(422);
    expect(bad.body.diagnostic.evidence).to.deep.equal({ 'network_participation.mode': 'must be one of local, live' });
    const runs = `/api/workspaces/${ws}/loop-runs`;
    expect((await call('reader', 'GET', runs)).body.runs).to.deep.equal([]);

    const started = await call('operator', 'POST', `${loops()}/parked/run`, { network_participation: { mode: 'local' } });
    expect(started.status, JSON.stringify(started.body)).to.equal(201);
    const id = started.body.run.id;
    const pause = await call('operator', 'POST', `${runs}/${id}/pause`, { reason: 'lunch' });
    expect(pause.body.diagnostic?.code).not.to.equal('body_not_allowed');
    expect([200, 409]).to.include(pause.status);
    expect((await call('operator', 'POST', `${runs}/${id}/pause`, [1, 2])).status).to.equal(422);

    const negative = await f.api.call('GET', `${runs}/${id}/events?after_sequence=-5`, undefined, as('reader'));
    expect(negative.status).to.equal(422);
    expect(negative.body.diagnostic.evidence).to.have.keys('after_sequence');
    const header = await f.api.call('GET', `${runs}/${id}/events`, undefined, { ...as('reader'), 'Last-Event-ID': '-1' });
    expect(header.status).to.equal(422);
    expect(header.body.diagnostic.evidence).to.have.keys('Last-Event-ID');
  });

  it('annotations and approvals name each bad field: an unknown or twice-placed annotation, a gate_id that is not a string; nothing changes', async () => {
    expect((await call('operator', 'POST', loops(), { definition: loopDef('placed', [t('a'), t('b', ['a'])], { network_participation: { mode: 'live' } }) })).status).to.equal(201);
    const bad = await call('operator', 'PUT', `${loops()}/placed/annotations`, { annotations: [{ node_id: 'a', x: 1, y: 2, colour: 'red' }, { node_id: 'a', x: 3, y: 4 }] });
    expect(bad.status).to.equal(422);
    expect(bad.body.diagnostic.evidence).to.have.keys('annotations[0].colour', 'annotations[1].node_id');
    const loop = (await call('reader', 'GET', `${loops()}/placed`)).body.loop;
    expect([loop.version, loop.definition.annotations]).to.deep.equal([1, undefined]);

    const dry = await call('reader', 'POST', `${loops()}/placed/run?dry=true`, {});
    expect(dry.body.dry_run.resolved_network_participation).to.deep.equal({ mode: 'live', source: 'loop_definition', version: 'network-participation/v1' });
    const run = (await call('operator', 'POST', `${loops()}/placed/run`, {})).body.run;
    const approve = await call('operator', 'POST', `/api/workspaces/${ws}/loop-runs/${run.id}/approve`, { gate_id: 5, decision: 'approve' });
    expect(approve.status).to.equal(422);
    expect(approve.body.diagnostic.evidence).to.deep.equal({ gate_id: 'must be a string' });
  });

  it('a cycle is reported by name, the nodes in it and not those behind it; every finding of a node reaches the resource route', async () => {
    const lint = (def: Record<string, unknown>) => lintLoop(canonicalLoop(def as Record<string, any>) as LoopDefinition);
    const cycles = lint(loopDef('c', [t('s'), t('a', ['s', 'b']), t('b', ['a']), t('c', ['b'])])).filter((i) => i.code === 'cycle');
    expect(cycles).to.have.length(1);
    expect(cycles[0].message).to.include('"a", "b"').and.include('a -> b -> a').and.not.include('"c"').and.not.include('"s"');

    const only = await call('operator', 'POST', loops(), { definition: loopDef('ring', [t('a', ['b']), t('b', ['a'])]) });
    expect(only.status).to.equal(422);
    const codes = only.body.diagnostic.evidence.errors.map((e: any) => e.code);
    expect(codes).to.include('cycle').and.include('unreachable_node');
    const viaResource = await call('operator', 'PUT', resource('ring'), { scope: { kind: 'workspace', id: ws }, spec: loopDef('ring', [t('a', ['b']), t('b', ['a'])]) });
    expect(viaResource.status).to.equal(422);
    expect(viaResource.body.diagnostic.evidence['spec.graph.nodes[0]']).to.match(/^cycle: nodes "a", "b" form a cycle .*; unreachable_node: /);
    expect((await call('reader', 'GET', resource('ring'))).status).to.equal(404);
  });
});
