import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ExecPolicy } from '../../runtime/security/exec-policy.ts';
import { CommandCriterion } from '../../runtime/loops/executors/command.ts';
import type { ExternalExecutors } from '../../runtime/loops/executors/external.ts';
import { parseJudgeAnswer } from '../../runtime/loops/executors/agent-judge.ts';
import { SessionStore } from '../../store/session-store.ts';
import { ServiceFixture } from '../helpers/fixture.ts';
import { eventually } from '../helpers/service.ts';
import { contextOf } from './executor-context.ts';

const node = process.execPath;

describe('loop executors that call other families', function () {
  this.timeout(60_000);
  const f = new ServiceFixture().install();
  const ex = (): ExternalExecutors => f.service.loopExecutors!;
  const sessions = () => new SessionStore(f.service.store!.redis, f.service.store!.keys);

  describe('run-agent', () => {
    it('prompts a session of the agent with the rendered template and outputs its answer, counting the usage tokens', async () => {
      const ctx = contextOf(f.ws.id, { id: 'write', kind: 'run-agent', prompt: 'hello {{ .inputs.name }} after {{ .nodes.plan.output }}\n/usage 10 5' }, {
        inputs: { name: 'world' }, scope: { inputs: { name: 'world' }, nodes: { plan: { output: 'the plan' } } },
      });
      const out = await ex().runAgent.run(ctx);
      expect(out.outcome).to.equal('succeeded');
      expect(out.output).to.equal('hello world after the plan');
      expect(out.tokens).to.equal(15);
      const msg = ctx.emitted.find(([k]) => k === 'channel_msg')!;
      expect(msg[1]).to.include({ node_id: 'write', role: 'worker' });
      const sid = String(msg[1].session_id);
      const rows = await sessions().events(sid, { type: 'user_message' });
      expect(rows.map((r) => r.content.text)).to.deep.equal(['hello world after the plan\n/usage 10 5']);
      expect((await sessions().get(sid))!.origin).to.equal(`loop_run/${ctx.run.id}`);
    });

    it('a revision appends the gate\'s findings to the prompt', async () => {
      const ctx = contextOf(f.ws.id, { id: 'write', kind: 'run-agent', prompt: 'draft' }, { revision: 1, feedback: 'too short' });
      const out = await ex().runAgent.run(ctx);
      expect(out.output).to.equal('draft\nRevision 1, feedback: too short');
    });

    it('a repeated attempt (a worker that died mid-turn) finds its session and does not prompt the agent again', async () => {
      const ctx = contextOf(f.ws.id, { id: 'once', kind: 'run-agent', prompt: 'only once' });
      const first = await ex().runAgent.run(ctx);
      const again = await ex().runAgent.run({ ...ctx, emitted: [] } as typeof ctx);
      expect(again).to.deep.equal(first);
      const sid = String(ctx.emitted[0][1].session_id);
      expect((await sessions().events(sid, { type: 'user_message' })).length).to.equal(1);
      expect((await sessions().list(f.ws.id)).length).to.equal(1);
    });

    it('a failing turn fails the attempt with the agent\'s error', async () => {
      const out = await ex().runAgent.run(contextOf(f.ws.id, { id: 'bad', kind: 'run-agent', prompt: '/error the model refused' }));
      expect(out.outcome).to.equal('failed');
      expect(out.error).to.contain('the model refused');
    });

    it('an agent that does not exist fails the attempt naming it and starts no session', async () => {
      const out = await ex().runAgent.run(contextOf(f.ws.id, { id: 'ghost', kind: 'run-agent', agent: 'no-such-agent', prompt: 'hi' }));
      expect(out.outcome).to.equal('failed');
      expect(out.error).to.contain('no-such-agent');
      expect(await sessions().list(f.ws.id)).to.have.length(0);
    });

    it('stop (the attempt\'s signal) stops the session and fails the attempt at once', async () => {
      const ac = new AbortController();
      const ctx = contextOf(f.ws.id, { id: 'long', kind: 'run-agent', prompt: '/sleep 30000' }, { signal: ac.signal });
      const running = ex().runAgent.run(ctx);
      const sid = await eventually(async () => {
        const s = (await sessions().list(f.ws.id))[0];
        expect(s?.prompt_active).to.equal(true);
        return s.id;
      });
      ac.abort(new Error('stopped by the operator'));
      const out = await running;
      expect(out.outcome).to.equal('failed');
      expect(out.error).to.contain('stopped by the operator');
      await eventually(async () => expect((await sessions().get(sid))!.state).to.equal('stopped'));
    });
  });

  describe('command criterion', () => {
    const crit = (check: string[] | string, more: Record<string, unknown> = {}) => ({ id: 'check', type: 'command' as const, check, ...more });

    it('approves on the expected exit code and rejects on another, with stdout as findings', async () => {
      const ctx = contextOf(f.ws.id, { id: 'g', kind: 'gate' });
      const ok = await ex().command.evaluate(ctx, crit([node, '-e', 'process.exit(3)'], { expect: '3' }));
      expect(ok.outcome).to.equal('approved');
      const bad = await ex().command.evaluate(ctx, crit([node, '-e', 'console.log("2 tests failed"); process.exit(1)']));
      expect(bad.outcome).to.equal('rejected');
      expect(bad.reason).to.contain('exited with code 1');
      expect(bad.findings).to.equal('2 tests failed\n');
    });

    it('runs in the workspace root with the scrubbed environment and the node\'s inputs on stdin', async () => {
      process.env.SVC_LOOP_TEST_LEAK = 'must-not-leak';
      try {
        const script = 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const i=JSON.parse(s);require("fs").writeFileSync("seen.json",JSON.stringify({cwd:process.cwd(),env:Object.keys(process.env),run:process.env.SVC_LOOP_RUN_ID,inputs:i.inputs,up:i.upstream}))})';
        const ctx = contextOf(f.ws.id, { id: 'g', kind: 'gate' }, { inputs: { n: 1 }, upstream: { work: { outcome: 'succeeded', output: 'done' } } });
        const v = await ex().command.evaluate(ctx, crit([node, '-e', script]));
        expect(v.outcome).to.equal('approved');
        const seen = JSON.parse(readFileSync(path.join(f.root, 'seen.json'), 'utf8'));
        expect(path.resolve(seen.cwd)).to.equal(path.resolve(await import('node:fs/promises').then((m) => m.realpath(f.root))));
        expect(seen.env).to.not.include('REDIS_URL');
        expect(seen.env).to.not.include('SVC_LOOP_TEST_LEAK');
        expect(seen.run).to.equal(ctx.run.id);
        expect(seen.inputs).to.deep.equal({ n: 1 });
        expect(seen.up).to.deep.equal({ work: { outcome: 'succeeded', output: 'done' } });
      } finally {
        delete process.env.SVC_LOOP_TEST_LEAK;
      }
    });

    it('an executable outside EXEC_ALLOWLIST is an error verdict and never starts', async () => {
      const marker = path.join(f.root, 'ran');
      const c = new CommandCriterion({ exec: new ExecPolicy(['/usr/bin/true']), workspaceRoot: async () => f.root });
      const v = await c.evaluate(contextOf(f.ws.id, { id: 'g', kind: 'gate' }), crit([node, '-e', `require("fs").writeFileSync(${JSON.stringify(marker)}, "x")`]));
      expect(v.outcome).to.equal('error');
      expect(v.reason).to.contain('CommandNotAllowed');
      expect(existsSync(marker)).to.equal(false);
    });

    it('a check string is split into words, never given to a shell', async () => {
      const c = ex().command;
      const ctx = contextOf(f.ws.id, { id: 'g', kind: 'gate' });
      expect((await c.evaluate(ctx, crit(`${node} -e "process.exit(0)"`))).outcome).to.equal('approved');
      const v = await c.evaluate(ctx, crit(`${node} -e 1; touch pwned`));
      expect(v.outcome).to.equal('error');
      expect(existsSync(path.join(f.root, 'pwned'))).to.equal(false);
    });

    it('stop kills the check and answers timeout', async () => {
      const ac = new AbortController();
      const ctx = contextOf(f.ws.id, { id: 'g', kind: 'gate' }, { signal: ac.signal });
      const p = ex().command.evaluate(ctx, crit([node, '-e', 'setTimeout(()=>{}, 60000)']));
      setTimeout(() => ac.abort(new Error('node timed out after 1s')), 300);
      const v = await p;
      expect(v).to.include({ outcome: 'timeout', reason: 'node timed out after 1s' });
    });
  });

  describe('agent-judge criterion', () => {
    const judge = (prompt: string) => ({ id: 'review', type: 'agent-judge' as const, prompt });

    it('reads the verdict line of the judge\'s answer', async () => {
      const ctx = contextOf(f.ws.id, { id: 'g', kind: 'gate' });
      const ok = await ex().judge.evaluate(ctx, judge('{"verdict":"approved","reason":"clean"}'));
      expect(ok).to.include({ outcome: 'approved', reason: 'clean' });
      const no = await ex().judge.evaluate({ ...ctx, revision: 1 }, judge('{"verdict":"rejected","reason":"missing tests","findings":["add tests"]}'));
      expect(no).to.include({ outcome: 'rejected', reason: 'missing tests' });
      expect(no.findings).to.deep.equal(['add tests']);
    });

    it('a malformed answer is rejected, and the third broken judge in a row fails open', async () => {
      const ctx = contextOf(f.ws.id, { id: 'g', kind: 'gate' });
      const verdicts = [];
      for (let revision = 0; revision < 3; revision++) verdicts.push(await ex().judge.evaluate({ ...ctx, revision }, judge('looks fine to me')));
      expect(verdicts.map((v) => v.outcome)).to.deep.equal(['rejected', 'rejected', 'approved']);
      expect(verdicts[0].reason).to.contain('invalid_output');
      expect(verdicts[2].reason).to.contain('failed open: 3 broken judge answers in a row');
    });

    it('a well-formed answer breaks the streak', async () => {
      const ctx = contextOf(f.ws.id, { id: 'g', kind: 'gate' });
      const outcomes = [];
      for (const [revision, p] of ['garbage', 'garbage', '{"verdict":"rejected","reason":"no"}', 'garbage'].entries()) outcomes.push((await ex().judge.evaluate({ ...ctx, revision }, judge(p))).outcome);
      expect(outcomes).to.deep.equal(['rejected', 'rejected', 'rejected', 'rejected']);
    });

    it('parses JSON and VERDICT lines, the last one winning', () => {
      expect(parseJudgeAnswer('x\n{"verdict":"rejected"}\n{"verdict":"approved","reason":"r"}')).to.deep.include({ ok: true, verdict: 'approved', reason: 'r' });
      expect(parseJudgeAnswer('VERDICT: rejected too slow')).to.deep.include({ ok: true, verdict: 'rejected', reason: 'too slow' });
      expect(parseJudgeAnswer('{"verdict": "approved" or "rejected"}')).to.deep.equal({ ok: false });
    });
  });

  describe('tool ids', () => {
    it('calls the tool through the runtime and outputs its result', async () => {
      await import('node:fs/promises').then((m) => m.writeFile(path.join(f.root, 'notes.txt'), 'remember the milk'));
      const out = await ex().tool.run(contextOf(f.ws.id, { id: 'read', kind: 'svc__workspace_read_file', params: { path: '{{ .inputs.file }}' } }, { scope: { inputs: { file: 'notes.txt' } } }));
      expect(out.outcome).to.equal('succeeded');
      expect(out.output).to.deep.include({ text: 'remember the milk', truncated: false });
      expect((out.output as { structured: unknown }).structured).to.deep.include({ path: 'notes.txt', size: 17 });
    });

    it('a call that needs approval waits for it visibly, and runs once approved', async () => {
      const n = { id: 'write', kind: 'svc__workspace_write_file', params: { path: 'out.txt', content: 'approved content' } };
      const waiting = await ex().tool.run(contextOf(f.ws.id, n));
      expect(waiting.outcome).to.equal('waiting');
      expect(waiting.wait).to.deep.include({ kind: 'approval', ref: 'write' });
      expect(waiting.wait!.detail).to.include({ rerun: true, tool_id: 'svc__workspace_write_file' });
      expect(existsSync(path.join(f.root, 'out.txt'))).to.equal(false);
      const done = await ex().tool.run(contextOf(f.ws.id, n, { attempt: 2, approval: { decision: 'approve', gate_id: 'write' } }));
      expect(done.outcome).to.equal('succeeded');
      expect(readFileSync(path.join(f.root, 'out.txt'), 'utf8')).to.equal('approved content');
    });

    it('an unknown tool or an input the schema refuses fails the attempt with the tools family\'s code', async () => {
      const unknown = await ex().tool.run(contextOf(f.ws.id, { id: 'x', kind: 'svc__no_such_tool' }));
      expect(unknown.outcome).to.equal('failed');
      expect(unknown.error).to.match(/^tool_not_found/);
      const invalid = await ex().tool.run(contextOf(f.ws.id, { id: 'x', kind: 'svc__workspace_read_file', params: { nope: 1 } }));
      expect(invalid.error).to.match(/^tool_invalid_input/);
    });
  });
});
