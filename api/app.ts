import { bodyParser } from '@koa/bodyparser';
import type Router from '@koa/router';
import Koa from 'koa';
import { AgentCatalog } from '../runtime/agents/agent-catalog.ts';
import { SkillCatalog } from '../runtime/skills/catalog.ts';
import { ToolRuntime } from '../runtime/tools/runtime.ts';
import { agentMcpRoutes } from './agent-mcp.ts';
import { automationRoutes } from './automation.ts';
import { webhookRoutes } from './webhooks.ts';
import { heartbeatRoutes } from './heartbeat.ts';
import { hookRoutes } from './hooks.ts';
import { roleRoutes } from './roles.ts';
import { skillRoutes } from './skills.ts';
import { toolRoutes } from './tools.ts';
import { agentRoutes } from './agents.ts';
import { guardRoutes } from './auth.ts';
import { browserSafety } from './browser-safety.ts';
import { bundleRoutes } from './bundles.ts';
import { consoleAssets } from './console.ts';
import { bodyRule } from './body-rule.ts';
import { errorMiddleware } from './errors.ts';
import { eventRoutes } from './events.ts';
import { jsonBody } from './json-body.ts';
import { mountRouters } from './mount.ts';
import { openApiDocument } from './openapi.ts';
import { ResourceService } from '../runtime/resources/resource-service.ts';
import { resourceRoutes } from './resources.ts';
import { sessionRoutes } from './sessions.ts';
import { systemRoutes } from './system.ts';
import type { AppDeps, FeatureDeps } from './types.ts';
import { workspaceRoutes } from './workspaces.ts';
import { notificationRoutes } from './notifications.ts';
import { PresetService } from '../runtime/notifications/preset-service.ts';
import { NotificationStore } from '../store/notification-store.ts';
import { taskRoutes } from './tasks.ts';
import { supportRoutes } from './support.ts';
import { vaultRoutes } from './vault.ts';
import { modelCatalogRoutes } from './models.ts';
import { openaiErrors, openaiRoutes } from './openai.ts';
import { Curations } from '../runtime/models/curation.ts';
import { memoryRoutes } from './memory.ts';
import { memoryLedgerRoutes } from './memory-ledgers.ts';
import { memoryDreamRoutes } from './memory-dreams.ts';
import { marketplaceRoutes } from './marketplace.ts';
import { McpInstaller } from '../runtime/marketplace/mcp-install.ts';
import { loopRoutes } from './loops.ts';
import { extensionRoutes } from './extensions.ts';
import { replicaAck } from './replica-ack.ts';

/**
 * createOpsApp is the HTTP surface of a process without the api role: /healthz, /readyz and /metrics only,
 * so every role can be probed and scraped (Kubernetes liveness and readiness, Prometheus).
 */
export function createOpsApp(deps: Pick<AppDeps, 'metrics' | 'logger' | 'readiness' | 'queueDepth'>): Koa {
  const router = systemRoutes({ metrics: deps.metrics, readiness: deps.readiness, openapi: () => openApiDocument([router]), queueDepth: deps.queueDepth });
  const app = new Koa();
  app.silent = true;
  app.use(errorMiddleware(deps.logger));
  app.use(router.routes()).use(router.allowedMethods());
  return app;
}

/** createApp builds the Koa application: metrics, the one error middleware, JSON bodies, every router. */
export function createApp(deps: AppDeps): { app: Koa; routers: Router[] } {
  const { store, metrics, logger } = deps;
  const notifications = new NotificationStore(store.redis, store.keys);
  const presets = new PresetService({ notifications, resources: store, bus: deps.bus });
  // NOTE: a bridge a preset delivers to is not deleted from under it (the preset names what it uses).
  const referrers = async (kind: string, id: string) => (kind === 'bridge.instance' ? (await presets.targeting(id)).map((p) => `notification preset "${p}"`) : []);
  const service = new ResourceService(store, deps.waiter, deps.security, referrers);
  const { workspaces, roles, sessionService } = deps;
  const agents = new AgentCatalog(store);
  const skills = new SkillCatalog({
    store, dataDir: deps.dataDir, paths: deps.security.paths, installs: deps.skillInstalls, extensionDir: (dir, name) => deps.extensions.localSkillDir(dir, name),
  });
  const tools = new ToolRuntime({ store, workspaces, sessions: sessionService, settings: deps.settings, pool: deps.mcp, skills, dataDir: deps.dataDir, metrics, logger, security: deps.security, heartbeat: deps.heartbeat, automation: deps.automation.service, hooks: deps.hooks, tasks: deps.tasks, models: deps.models, memory: deps.memory, extensions: deps.extensionTools, loops: deps.loops });
  const features: FeatureDeps = { store, workspaces, agents, sessions: sessionService, settings: deps.settings, dataDir: deps.dataDir, paths: deps.security.paths, tools, skills, roles, heartbeat: deps.heartbeat };
  const routers: Router[] = [];
  routers.push(
    systemRoutes({ metrics, readiness: deps.readiness, openapi: () => openApiDocument(routers), queueDepth: deps.queueDepth }),
    resourceRoutes({ service, store, logger, streams: deps.streams }),
    workspaceRoutes({ workspaces, agents, sessions: sessionService, skills, models: deps.models }),
    agentRoutes({ agents, workspaces, service }),
    bundleRoutes({ service, store, workspaces }),
    sessionRoutes({ service: sessionService, sessions: deps.sessions, hub: deps.tails, streams: deps.streams }),
    toolRoutes(features),
    agentMcpRoutes(features),
    skillRoutes(features, { marketplace: deps.marketplace, installs: deps.skillInstalls }),
    roleRoutes(features),
    heartbeatRoutes(features),
    hookRoutes({ runs: deps.hooks.runs }),
    notificationRoutes({ presets, notifications }),
    automationRoutes(deps.automation.service),
    webhookRoutes(deps.automation.webhooks),
    taskRoutes({ tasks: deps.tasks, sessionService, sessions: deps.sessions, authMode: deps.security.config.authMode }),
    supportRoutes({ support: deps.support }),
    vaultRoutes(deps.vault),
    modelCatalogRoutes({ catalog: deps.models, curations: new Curations({ catalog: deps.models, resources: service, store }) }),
    openaiRoutes({ catalog: deps.models }),
    // NOTE: before the memory routes, whose `/api/memory/:filename` would take `/api/memory/dreams`.
    memoryLedgerRoutes({ ledgers: deps.ledgers }),
    memoryDreamRoutes({ dreams: deps.dreams }),
    ...(deps.memory ? [memoryRoutes(deps.memory)] : []),
    marketplaceRoutes({ marketplace: deps.marketplace, mcp: new McpInstaller({ marketplace: deps.marketplace, resources: service, vault: deps.vault, workspaces, store: deps.marketplace.store }), workspaces }),
    eventRoutes({ bus: deps.bus, logger, streams: deps.streams }),
    extensionRoutes(deps.extensions),
  );
  if (deps.loops) routers.push(loopRoutes({ definitions: deps.loops.withWrites(service), engine: deps.loops.engine, runs: deps.loops.runs, logger, streams: deps.streams }));

  // NOTE: each route checks its own role first (api/auth.ts), so the role follows the route a path matched.
  if (deps.authenticator) guardRoutes(routers, deps.authenticator, logger);

  const app = new Koa();
  app.proxy = false;
  app.silent = true;
  app.use(async (ctx, next) => {
    const end = metrics.httpDuration.startTimer();
    try {
      await next();
    } finally {
      const labels = { method: ctx.method, route: (ctx as { _matchedRoute?: string })._matchedRoute?.toString() ?? 'unmatched', status: String(ctx.status) };
      end(labels);
      metrics.httpRequests.inc(labels);
    }
  });
  app.use(errorMiddleware(logger));
  const sec = deps.security.config;
  app.use(browserSafety({ allowedOrigins: sec.allowedOrigins, allowedHosts: sec.allowedHosts, checkHost: sec.authMode === 'none' }));
  app.use(openaiErrors(logger)); // /api/openai/ answers errors in OpenAI's shape, authentication's included
  app.use(consoleAssets()); // the web console at `/` (before auth: its assets hold no data; it sends the token itself)
  // NOTE: browserSafety admitted only JSON bodies; 1 MiB cap (413), strict objects/arrays, bounded nesting (422).
  // NOTE: jsonBody reads the common JSON body itself and hands anything else to the parser (same errors); then it
  // refuses a body nested too deep (checkDepth).
  const parsedMethods = ['POST', 'PUT', 'PATCH', 'DELETE'];
  app.use(jsonBody(bodyParser({ enableTypes: ['json'], extendTypes: { json: ['application/json', 'application/merge-patch+json'] }, jsonLimit: '1mb', parsedMethods }), { methods: parsedMethods, limitBytes: 1024 * 1024 }));
  // NOTE: a body sent to a route that takes none is refused here, once, for every router (api/body-rule.ts).
  app.use(bodyRule(routers));
  if (deps.replicaAck) app.use(replicaAck(deps.replicaAck));
  // NOTE: as `app.use(r.routes()).use(r.allowedMethods())` for each router, but a request walks only the
  // routers that could match its path (api/mount.ts).
  app.use(mountRouters(routers));
  return { app, routers };
}
