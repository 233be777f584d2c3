import Router from '@koa/router';
import type { Context } from 'koa';
import { HeartbeatService } from '../runtime/agents/heartbeat.ts';
import { InputError, ValidationError } from '../store/errors.ts';
import type { FeatureDeps } from './types.ts';
import { bodyObject, queryInt, queryString } from './params.ts';
import { takesBody } from './body-rule.ts';

/**
 * heartbeatRoutes serves an agent's authored wake policy (read it, or delete it with compare-and-delete), its
 * wake history, and a manual wake.
 */
export function heartbeatRoutes(deps: FeatureDeps): Router {
  const heartbeats = new HeartbeatService({ store: deps.store, settings: deps.settings, dataDir: deps.dataDir, paths: deps.paths });
  const router = new Router({ prefix: '/api/agents' });
  const workspace = async (ctx: Context) => {
    const ref = queryString(ctx.query, 'workspace_id') ?? queryString(ctx.query, 'workspace');
    return ref ? deps.workspaces.get(ref) : undefined;
  };
  router.get('Get an agent\'s HEARTBEAT.md policy (parsed, with diagnostics)', '/:agent_name/heartbeat', async (ctx) => {
    ctx.body = await heartbeats.get(ctx.params.agent_name, await workspace(ctx));
  });
  router.delete('Delete an agent\'s HEARTBEAT.md (body {expected_digest})', '/:agent_name/heartbeat', takesBody, async (ctx) => {
    // NOTE: one compare-and-set shape for every client: the digest travels in the body, never in If-Match.
    if (ctx.get('if-match')) throw new InputError('use expected_digest in the body, not an If-Match header', 'heartbeat_if_match_header_unsupported');
    const body = bodyObject(ctx.request.body);
    if (typeof body.expected_digest !== 'string' || !body.expected_digest) {
      throw new ValidationError('expected_digest is required', 'invalid_body', { expected_digest: 'is required and must be a string' });
    }
    ctx.body = { heartbeat: await heartbeats.delete(ctx.params.agent_name, body.expected_digest, await workspace(ctx)) };
  });
  router.get('List an agent\'s heartbeat wakes, newest first (query limit, workspace)', '/:agent_name/heartbeat/history', async (ctx) => {
    const wakes = await deps.heartbeat.list(ctx.params.agent_name, await workspace(ctx), queryInt(ctx.query, 'limit', 50, 1000) || 50);
    ctx.body = { wakes };
  });
  router.post('Wake an agent\'s session now with its heartbeat prompt (body {workspace_id?, session_id?, dry_run?})', '/:agent_name/heartbeat/wake', takesBody, async (ctx) => {
    const body = bodyObject(ctx.request.body ?? {});
    for (const field of ['workspace_id', 'workspace', 'session_id'] as const) {
      if (body[field] !== undefined && typeof body[field] !== 'string') throw new ValidationError(`${field} must be a string`, 'invalid_body', { [field]: 'must be a string' });
    }
    if (body.dry_run !== undefined && typeof body.dry_run !== 'boolean') throw new ValidationError('dry_run must be a boolean', 'invalid_body', { dry_run: 'must be a boolean' });
    const sessionId = (body.session_id as string | undefined) || undefined;
    const ref = (body.workspace_id as string | undefined) || (body.workspace as string | undefined);
    // NOTE: the workspace comes from the body, the query, or else the session asked for.
    const ws = ref ? await deps.workspaces.get(ref) : (await workspace(ctx)) ?? (sessionId ? await deps.workspaces.get(String((await deps.sessions.get(sessionId)).workspace_id)) : undefined);
    if (!ws) throw new ValidationError('workspace_id (or session_id) is required', 'invalid_body', { workspace_id: 'is required when session_id is not given' });
    if (body.dry_run) {
      const [decision] = await deps.heartbeat.wake({ agentName: ctx.params.agent_name, workspace: ws, source: 'manual', sessionId, dryRun: true });
      ctx.body = { wake: decision };
      return;
    }
    // NOTE: 202: the prompt is queued on the session; its turn runs after the answer (follow the session's events).
    ctx.status = 202;
    ctx.body = { wake: await deps.heartbeat.wakeNow({ agentName: ctx.params.agent_name, workspace: ws, sessionId }) };
  });
  return router;
}
