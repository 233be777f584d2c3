import { expect } from 'chai';
import { codecs, decodeSpec, KINDS } from '../../codecs/index.ts';
import { parseDuration } from '../../codecs/duration.ts';
import type { DecodeContext } from '../../codecs/types.ts';
import { bundleSpec } from '../fixtures.ts';

const G: DecodeContext = { scope: { kind: 'global' } };
const W: DecodeContext = { scope: { kind: 'workspace', id: 'ws-1' } };

const tool = { id: 'svc__read_file', backend: { kind: 'native_go', native_name: 'read' }, input_schema: { type: 'object', properties: { path: { type: 'string' } } }, source: { kind: 'builtin', owner: 'svc' }, visibility: 'operator', risk: 'read' };
const valid: Record<string, unknown> = {
  'hook.binding': { name: 'audit', event: 'tool.post_call', command: '/usr/bin/audit' },
  tool,
  mcp_server: { name: 'fs', command: 'mcp-fs', args: ['--root', '/w'] },
  agent: { name: 'coder', prompt: 'Write code.' },
  'agent.soul': { agent_name: 'coder', agent_resource_id: 'agt_1', source_path: 'SOUL.md', body: '# Coder\n\nCalm.\n' },
  'agent.heartbeat': { agent_name: 'coder', agent_resource_id: 'agt_1', source_path: 'HEARTBEAT.md', body: '---\nversion: 1\nenabled: true\nsummary: check in\n---\nLook at the queue.\n' },
  skill: { name: 'review', description: 'Reviews diffs', source: 'user' },
  'automation.job': { name: 'daily', agent_name: 'coder', prompt: 'Summarize', schedule: { mode: 'cron', expr: '0 9 * * 1-5' } },
  'automation.trigger': { name: 'on-push', agent_name: 'coder', prompt: 'Check {{ .data.ref }}', event: 'git.push', filter: { 'data.repo': 'svc' } },
  'bridge.instance': { platform: 'slack', extension_name: 'acme', display_name: 'Slack' },
  bundle: bundleSpec(),
  'bundle.activation': { extension_name: 'acme', bundle_name: 'support', profile_name: 'default' },
  'model.curation': { provider_id: 'openai', model_id: 'gpt-4o', featured: true, default_effort: 'low' },
};

/** Each row: reason (the rule), kind, spec, ctx, the field path that must be named. */
const rejections: { reason: string; kind: string; spec: Record<string, unknown>; ctx?: DecodeContext; path: string }[] = [
  // hook.binding
  { reason: 'required hooks need mode sync', kind: 'hook.binding', spec: { name: 'h', event: 'tool.pre_call', command: 'x', required: true }, path: 'required' },
  { reason: 'sync only for sync-eligible events', kind: 'hook.binding', spec: { name: 'h', event: 'tool.post_call', command: 'x', mode: 'sync' }, path: 'mode' },
  { reason: 'a native executor needs source native', kind: 'hook.binding', spec: { name: 'h', event: 'turn.end', source: 'config', executor_kind: 'native' }, path: 'executor_kind' },
  { reason: 'subprocess needs a command', kind: 'hook.binding', spec: { name: 'h', event: 'turn.end', executor_kind: 'subprocess' }, path: 'command' },
  { reason: 'args only with a subprocess executor', kind: 'hook.binding', spec: { name: 'h', event: 'turn.end', args: ['a'] }, path: 'args' },
  { reason: 'matcher key must be allowed for the event', kind: 'hook.binding', spec: { name: 'h', event: 'turn.end', command: 'x', matcher: { tool_name: 'read' } }, path: 'matcher.tool_name' },
  { reason: 'matcher globs must be valid', kind: 'hook.binding', spec: { name: 'h', event: 'tool.post_call', command: 'x', matcher: { tool_name: 'read[' } }, path: 'matcher.tool_name' },
  { reason: 'env keys follow the env grammar', kind: 'hook.binding', spec: { name: 'h', event: 'turn.end', command: 'x', env: { '1BAD': 'v' } }, path: 'env.1BAD' },
  { reason: 'secret-like env names belong in secret_env', kind: 'hook.binding', spec: { name: 'h', event: 'turn.end', command: 'x', env: { API_TOKEN: 'v' } }, path: 'env.API_TOKEN' },
  { reason: 'secret_env values are env: or vault:hooks/ refs', kind: 'hook.binding', spec: { name: 'h', event: 'turn.end', command: 'x', secret_env: { K: 'vault:mcp/x' } }, path: 'secret_env.K' },
  { reason: 'workspace scope binds matcher.workspace_id', kind: 'hook.binding', spec: { name: 'h', event: 'turn.end', command: 'x', matcher: { workspace_id: 'other' } }, ctx: W, path: 'matcher.workspace_id' },
  { reason: 'skill_source only with source skill', kind: 'hook.binding', spec: { name: 'h', event: 'turn.end', command: 'x', skill_source: 'user' }, path: 'skill_source' },
  { reason: 'timeout must be a positive duration', kind: 'hook.binding', spec: { name: 'h', event: 'turn.end', command: 'x', timeout: '0s' }, path: 'timeout' },
  { reason: 'event must be one of the 72', kind: 'hook.binding', spec: { name: 'h', event: 'nope', command: 'x' }, path: 'event' },
  // tool
  { reason: 'tool id grammar', kind: 'tool', spec: { ...tool, id: 'Bad__Id' }, path: 'id' },
  { reason: 'native_go needs native_name', kind: 'tool', spec: { ...tool, backend: { kind: 'native_go' } }, path: 'backend.native_name' },
  { reason: 'mcp backend needs server and tool', kind: 'tool', spec: { ...tool, backend: { kind: 'mcp', mcp_server: 's' } }, path: 'backend.mcp_tool' },
  { reason: 'bridge backend is reserved', kind: 'tool', spec: { ...tool, backend: { kind: 'bridge' } }, path: 'backend.kind' },
  { reason: 'source.owner is required', kind: 'tool', spec: { ...tool, source: { kind: 'builtin' } }, path: 'source.owner' },
  { reason: 'mcp source needs raw names', kind: 'tool', spec: { ...tool, source: { kind: 'mcp', owner: 'x' } }, path: 'source.raw_server_name' },
  { reason: 'read_only cannot be destructive', kind: 'tool', spec: { ...tool, read_only: true, destructive: true }, path: 'read_only' },
  { reason: 'schema type names are checked', kind: 'tool', spec: { ...tool, input_schema: { type: 'obj' } }, path: 'input_schema.type' },
  { reason: 'max_result_bytes >= 0', kind: 'tool', spec: { ...tool, max_result_bytes: -1 }, path: 'max_result_bytes' },
  // mcp_server
  { reason: 'stdio needs a command', kind: 'mcp_server', spec: { name: 'x', transport: 'stdio' }, path: 'command' },
  { reason: 'http forbids command', kind: 'mcp_server', spec: { name: 'x', url: 'https://m', command: 'c' }, path: 'command' },
  { reason: 'http needs url', kind: 'mcp_server', spec: { name: 'x', transport: 'http' }, path: 'url' },
  { reason: 'auth type must be oauth2_pkce', kind: 'mcp_server', spec: { name: 'x', url: 'https://m', auth: { type: 'basic', client_id: 'c', issuer_url: 'https://i' } }, path: 'auth.type' },
  { reason: 'auth needs a discovery or endpoint pair', kind: 'mcp_server', spec: { name: 'x', url: 'https://m', auth: { type: 'oauth2_pkce', client_id: 'c' } }, path: 'auth' },
  // agent
  { reason: 'agent name must not contain /', kind: 'agent', spec: { name: 'a/b', prompt: 'p' }, path: 'name' },
  { reason: 'prompt must not be empty', kind: 'agent', spec: { name: 'a', prompt: '  ' }, path: 'prompt' },
  { reason: 'tools are ids with __ or prefix wildcards', kind: 'agent', spec: { name: 'a', prompt: 'p', tools: ['read'] }, path: 'tools[0]' },
  { reason: 'auth_method is a string', kind: 'agent', spec: { name: 'a', prompt: 'p', auth_method: ['api-key'] }, path: 'auth_method' },
  { reason: 'permissions enum', kind: 'agent', spec: { name: 'a', prompt: 'p', permissions: 'all' }, path: 'permissions' },
  { reason: 'category segments are not ..', kind: 'agent', spec: { name: 'a', prompt: 'p', category_path: ['..'] }, path: 'category_path[0]' },
  { reason: 'capability ids are unique', kind: 'agent', spec: { name: 'a', prompt: 'p', capabilities: { capabilities: [{ id: 'c', summary: 's', outcome: 'o' }, { id: 'c', summary: 's', outcome: 'o' }] } }, path: 'capabilities.capabilities[1].id' },
  // soul / heartbeat
  { reason: 'soul body must not be blank', kind: 'agent.soul', spec: { agent_name: 'a', agent_resource_id: 'r', source_path: 'S', body: '  ' }, path: 'body' },
  { reason: 'heartbeat frontmatter must be valid YAML', kind: 'agent.heartbeat', spec: { agent_name: 'a', agent_resource_id: 'r', source_path: 'H', body: '---\nversion: [\n---\nx' }, path: 'body' },
  { reason: 'heartbeat frontmatter types', kind: 'agent.heartbeat', spec: { agent_name: 'a', agent_resource_id: 'r', source_path: 'H', body: '---\nenabled: maybe\n---\nx' }, path: 'body.frontmatter.enabled' },
  // skill
  { reason: 'skill source enum', kind: 'skill', spec: { name: 's', description: 'd', source: 'web' }, path: 'source' },
  { reason: 'provenance needs hash, registry, slug, version', kind: 'skill', spec: { name: 's', description: 'd', source: 'user', provenance: { slug: 'x' } }, path: 'provenance.hash' },
  // automation.job
  { reason: 'cron needs a valid 5-field expression', kind: 'automation.job', spec: { ...(valid['automation.job'] as object), schedule: { mode: 'cron', expr: '61 * * * *' } }, path: 'schedule.expr' },
  { reason: 'cron has exactly 5 fields', kind: 'automation.job', spec: { ...(valid['automation.job'] as object), schedule: { mode: 'cron', expr: '0 0 9 * * *' } }, path: 'schedule.expr' },
  { reason: 'every needs a positive interval', kind: 'automation.job', spec: { ...(valid['automation.job'] as object), schedule: { mode: 'every', interval: '0s' } }, path: 'schedule.interval' },
  { reason: 'at needs an RFC 3339 time', kind: 'automation.job', spec: { ...(valid['automation.job'] as object), schedule: { mode: 'at', time: 'tomorrow' } }, path: 'schedule.time' },
  { reason: 'backoff needs max_retries > 0', kind: 'automation.job', spec: { ...(valid['automation.job'] as object), retry: { strategy: 'backoff', max_retries: 0, base_delay: '1s' } }, path: 'retry.max_retries' },
  { reason: 'none forbids retries', kind: 'automation.job', spec: { ...(valid['automation.job'] as object), retry: { strategy: 'none', max_retries: 2 } }, path: 'retry' },
  { reason: 'agent and prompt required without task', kind: 'automation.job', spec: { name: 'j', schedule: { mode: 'every', interval: '5m' } }, path: 'agent_name' },
  { reason: 'global scope forbids workspace_id', kind: 'automation.job', spec: { ...(valid['automation.job'] as object), workspace_id: 'ws-1' }, path: 'workspace_id' },
  { reason: 'workspace scope binds workspace_id', kind: 'automation.job', spec: { ...(valid['automation.job'] as object), workspace_id: 'ws-2' }, ctx: W, path: 'workspace_id' },
  // automation.trigger
  { reason: 'filter keys are restricted', kind: 'automation.trigger', spec: { ...(valid['automation.trigger'] as object), filter: { color: 'red' } }, path: 'filter.color' },
  { reason: 'templates may only reference fields', kind: 'automation.trigger', spec: { ...(valid['automation.trigger'] as object), prompt: 'Run {{ exec "rm" }}' }, path: 'prompt' },
  { reason: 'webhooks need a secret ref', kind: 'automation.trigger', spec: { ...(valid['automation.trigger'] as object), event: 'webhook', endpoint_slug: 'hook' }, path: 'webhook_secret_ref' },
  { reason: 'webhook ids start with wbh_', kind: 'automation.trigger', spec: { ...(valid['automation.trigger'] as object), event: 'webhook', webhook_id: 'x', webhook_secret_ref: 'env:S' }, path: 'webhook_id' },
  { reason: 'webhook fields only on webhook triggers', kind: 'automation.trigger', spec: { ...(valid['automation.trigger'] as object), endpoint_slug: 'x' }, path: 'endpoint_slug' },
  // bridge.instance
  { reason: 'include_thread needs peer or group', kind: 'bridge.instance', spec: { ...(valid['bridge.instance'] as object), routing_policy: { include_thread: true } }, path: 'routing_policy.include_thread' },
  { reason: 'dm_policy enum', kind: 'bridge.instance', spec: { ...(valid['bridge.instance'] as object), dm_policy: 'closed' }, path: 'dm_policy' },
  { reason: 'delivery mode enum', kind: 'bridge.instance', spec: { ...(valid['bridge.instance'] as object), delivery_defaults: { mode: 'shout' } }, path: 'delivery_defaults.mode' },
  { reason: 'scope must match the record scope', kind: 'bridge.instance', spec: { ...(valid['bridge.instance'] as object), scope: 'workspace' }, path: 'scope' },
  // bundle
  { reason: 'a bundle needs a profile', kind: 'bundle', spec: { extension_name: 'e', bundle: { name: 'b', profiles: [] } }, path: 'bundle.profiles' },
  { reason: 'profile names are unique ignoring case', kind: 'bundle', spec: { extension_name: 'e', bundle: { name: 'b', profiles: [{ name: 'P' }, { name: 'p' }] } }, path: 'bundle.profiles[1].name' },
  { reason: 'primary must name a channel', kind: 'bundle', spec: { extension_name: 'e', bundle: { name: 'b', profiles: [{ name: 'p', channels: { primary: 'x', items: [{ name: 'y' }] } }] } }, path: 'bundle.profiles[0].channels.primary' },
  { reason: 'bundled agents validate as agents', kind: 'bundle', spec: { extension_name: 'e', bundle: { name: 'b', profiles: [{ name: 'p', agents: [{ path: 'a', agent: { name: 'a' } }] }] } }, path: 'bundle.profiles[0].agents[0].agent.prompt' },
  { reason: 'bundled jobs validate without defaults', kind: 'bundle', spec: { extension_name: 'e', bundle: { name: 'b', profiles: [{ name: 'p', jobs: [{ name: 'j', agent: 'a', prompt: 'x', schedule: { mode: 'every', interval: '5m' }, fire_limit: { max: 0, window: '1h' } }] }] } }, path: 'bundle.profiles[0].jobs[0].fire_limit.max' },
  { reason: 'bridge secret slots need a kind', kind: 'bundle', spec: { extension_name: 'e', bundle: { name: 'b', profiles: [{ name: 'p', bridges: [{ name: 'b', platform: 'x', display_name: 'B', secret_slots: [{ name: 's' }] }] }] } }, path: 'bundle.profiles[0].bridges[0].secret_slots[0].kind' },
  // bundle.activation
  { reason: 'profile_name is required', kind: 'bundle.activation', spec: { extension_name: 'e', bundle_name: 'b' }, path: 'profile_name' },
  // model.curation
  { reason: 'a curation names its provider by the catalog grammar', kind: 'model.curation', spec: { provider_id: 'Open AI', model_id: 'm' }, path: 'provider_id' },
  { reason: 'default_effort is a known effort', kind: 'model.curation', spec: { provider_id: 'openai', model_id: 'm', default_effort: 'max' }, path: 'default_effort' },
  { reason: 'a hidden model cannot be featured', kind: 'model.curation', spec: { provider_id: 'openai', model_id: 'm', hidden: true, featured: true }, path: 'featured' },
  { reason: 'model.curation is global', kind: 'model.curation', spec: { provider_id: 'openai', model_id: 'm' }, ctx: { scope: { kind: 'workspace', id: 'ws1' } }, path: 'scope' },
];

describe('codecs', () => {
  it('registers exactly the twelve kinds, loop and model.curation', () => {
    expect(KINDS).to.deep.equal(['agent', 'agent.heartbeat', 'agent.soul', 'automation.job', 'automation.trigger', 'bridge.instance', 'bundle', 'bundle.activation', 'hook.binding', 'loop', 'mcp_server', 'model.curation', 'skill', 'tool']);
    expect(codecs.get('bundle.activation')!.maxBytes).to.equal(64 * 1024);
  });

  for (const kind of Object.keys(valid)) {
    it(`${kind}: decodes a valid spec, and decoding is idempotent`, () => {
      const once = decodeSpec(kind, valid[kind], G);
      expect(once.ok, JSON.stringify(once)).to.equal(true);
      const twice = decodeSpec(kind, (once as { spec: unknown }).spec, G);
      expect(twice).to.deep.equal(once);
    });
  }

  for (const r of rejections) {
    it(`${r.kind}: rejects — ${r.reason}`, () => {
      const res = decodeSpec(r.kind, r.spec, r.ctx ?? G);
      expect(res.ok, JSON.stringify(res)).to.equal(false);
      const paths = (res as { errors: { path: string }[] }).errors.map((e) => e.path);
      expect(paths, JSON.stringify(res)).to.include(r.path);
    });
  }

  it('applies defaults and canonical forms', () => {
    const hook = decodeSpec('hook.binding', { name: ' h ', event: 'turn.end', command: ' run ' }, W) as { spec: any };
    expect(hook.spec).to.include({ name: 'h', source: 'native', mode: 'async', priority: 1000, executor_kind: 'subprocess', command: 'run', enabled: true });
    expect(hook.spec.matcher).to.deep.equal({ workspace_id: 'ws-1' });
    const agent = decodeSpec('agent', { name: 'a', prompt: 'p', tools: ['svc__fs_*', ' svc__read ', 'svc__read'] }, G) as { spec: any };
    expect(agent.spec.tools).to.deep.equal(['svc__fs_*', 'svc__read']);
    expect(agent.spec).not.to.have.property('auth_method');
    expect((decodeSpec('agent', { name: 'a', prompt: 'p', auth_method: ' api-key ' }, G) as { spec: any }).spec.auth_method).to.equal('api-key');
    expect((decodeSpec('agent', { name: 'a', prompt: 'p', auth_method: '  ' }, G) as { spec: any }).spec).not.to.have.property('auth_method');
    const job = decodeSpec('automation.job', valid['automation.job'], W) as { spec: any };
    expect(job.spec).to.include({ source: 'dynamic', enabled: false, scope: 'workspace', workspace_id: 'ws-1' });
    expect(job.spec.retry).to.deep.equal({ strategy: 'none', max_retries: 0, base_delay: '' });
    expect(job.spec.fire_limit).to.deep.equal({ max: 12, window: '1h' });
    const t = decodeSpec('tool', { ...tool, input_schema_digest: 'abc', tags: ['b', ' a ', ''] }, G) as { spec: any };
    expect(t.spec.input_schema_digest).to.equal('');
    expect(t.spec.tags).to.deep.equal(['b', 'a']);
    const act = decodeSpec('bundle.activation', valid['bundle.activation'], G) as { spec: any };
    expect(act.spec.bind_primary_channel_default).to.equal(false);
    const b = decodeSpec('bridge.instance', { ...(valid['bridge.instance'] as object), dm_policy: 'OPEN', secret_slots: [{ name: 'z' }, { name: 'a' }, {}] }, G) as { spec: any };
    expect(b.spec.dm_policy).to.equal('open');
    expect(b.spec.secret_slots.map((x: any) => x.name)).to.deep.equal(['a', 'z']);
  });

  it('rejects an unknown kind and never throws on garbage', () => {
    expect(decodeSpec('widget', {}, G).ok).to.equal(false);
    for (const kind of KINDS) for (const junk of [null, 1, 'x', [], {}, { name: 1 }, { bundle: { profiles: [null, 1] } }, { schedule: 'x' }]) {
      const res = decodeSpec(kind, junk, G);
      expect(res.ok, `${kind} ${JSON.stringify(junk)}`).to.equal(false);
    }
  });

  it('parses Go-style durations', () => {
    expect(parseDuration('1h30m')).to.equal(5_400_000);
    expect(parseDuration('250ms')).to.equal(250);
    expect(parseDuration('5 minutes')).to.equal(undefined);
    expect(parseDuration('')).to.equal(undefined);
  });
});
