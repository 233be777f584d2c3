import Router from '@koa/router';
import type { Context } from 'koa';
import { HeartbeatService } from '../runtime/agents/heartbeat.ts';
import { InputError, ValidationError } from '../store/errors.ts';
import type { FeatureDeps } from './types.ts';
import { bodyObject, queryString } from './params.ts';

/** heartbeatRoutes serves an agent's authored wake policy: read it, or delete it with compare-and-delete. */
export function heartbeatRoutes(deps: FeatureDeps): Router {
  const heartbeats = new HeartbeatService({ store: deps.store, settings: deps.settings, dataDir: deps.dataDir });
  const router = new Router({ prefix: '/api/agents' });
  const workspace = async (ctx: Context) => {
    const ref = queryString(ctx.query, 'workspace_id') ?? queryString(ctx.query, 'workspace');
    return ref ? deps.workspaces.get(ref) : undefined;
  };
  router.get('Get an agent\'s HEARTBEAT.md policy (parsed, with diagnostics)', '/:agent_name/heartbeat', async (ctx) => {
    ctx.body = await heartbeats.get(ctx.params.agent_name, await workspace(ctx));
  });
  router.delete('Delete an agent\'s HEARTBEAT.md (body {expected_digest})', '/:agent_name/heartbeat', async (ctx) => {
    // NOTE: one compare-and-set shape for every client: the digest travels in the body, never in If-Match.
    if (ctx.get('if-match')) throw new InputError('use expected_digest in the body, not an If-Match header', 'heartbeat_if_match_header_unsupported');
    const body = bodyObject(ctx.request.body);
    if (typeof body.expected_digest !== 'string' || !body.expected_digest) {
      throw new ValidationError('expected_digest is required', 'invalid_body', { expected_digest: 'is required and must be a string' });
    }
    ctx.body = { heartbeat: await heartbeats.delete(ctx.params.agent_name, body.expected_digest, await workspace(ctx)) };
  });
  return router;
}
