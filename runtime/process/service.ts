import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import pino, { type DestinationStream, type Logger } from 'pino';
import { createApp, createOpsApp } from '../../api/app.ts';
import { StreamSlots } from '../../api/stream-slots.ts';
import { repeatedErrors } from './repeated-errors.ts';
import { Settings } from './settings.ts';
import { formatDuration } from '../../codecs/duration.ts';
import { McpPool, type McpServerSpec } from '../tools/mcp.ts';
import { RegistryCache, type RegistryEntry } from '../../controllers/registry-controller.ts';
import { ReconcileWaiter } from '../resources/reconcile-waiter.ts';
import { SessionTailHub } from '../sessions/session-tail.ts';
import { KINDS } from '../../codecs/index.ts';
import { ControllerManager, ReconcileQueues } from '../../controllers/index.ts';
import { Keys, queuePrefix } from '../../store/keys.ts';
import { isCluster, RedisConnections } from '../../store/connections.ts';
import { migrateKeyLayout } from '../../store/key-migration.ts';
import { HOOKS_QUEUE } from '../hooks/dispatcher.ts';
import { AUTOMATION_QUEUE } from '../automation/types.ts';
import { NOTIFY_QUEUE } from '../notifications/notification-queue.ts';
import { HEARTBEAT_QUEUE } from '../agents/heartbeat-wake-scheduler.ts';
import { ResourceStore } from '../../store/resource-store.ts';
import { RegistryWatch } from '../../store/registry-watch.ts';
import { SessionIdentities } from '../../store/session-identities.ts';
import { SessionStore } from '../../store/session-store.ts';
import { SessionService } from '../sessions/session-service.ts';
import { WorkspaceService } from '../workspaces/workspace-service.ts';
import { RoleResolver } from '../agents/roles.ts';
import { EventBus } from '../../store/event-bus.ts';
import { WorkspaceStore } from '../../store/workspace-store.ts';
import { SessionHost } from '../sessions/session-host.ts';
import type { Config } from './types.ts';
import { KubernetesAuthenticator, parseGroupRoles, TokenFileAuthenticator, type Authenticator } from './auth.ts';
import { Metrics } from './metrics.ts';
import { SecurityPolicy } from '../security/policy.ts';
import { NotificationRuntime } from '../notifications/notification-runtime.ts';
import { createHeartbeatWakes, type HeartbeatWakes } from '../agents/heartbeat-wakes.ts';
import { HeartbeatWakeScheduler } from '../agents/heartbeat-wake-scheduler.ts';
import { Automation } from '../automation/index.ts';
import { Hooks } from '../hooks/hooks.ts';
import { Tasks } from '../tasks/index.ts';
import { NotFoundError } from '../../store/errors.ts';
import { SharedLogSink } from './log-sink.ts';
import { LogStream } from '../../store/log-stream.ts';
import { ArtifactStore } from '../../store/artifact-store.ts';
import { SupportStore } from '../../store/support-store.ts';
import { SupportBundleBuilder } from '../support/bundle-builder.ts';
import { SUPPORT_QUEUE, SupportBundles } from '../support/support-bundles.ts';
import { secretUsers } from '../../controllers/dependencies.ts';
import { VaultHostStore } from '../../store/vault-hosts.ts';
import { VaultStore } from '../../store/vault-store.ts';
import { loadKeyring } from '../vault/keys.ts';
import { VaultService } from '../vault/vault-service.ts';
import { ModelCatalogStore } from '../../store/model-catalog-store.ts';
import { ModelCatalog } from '../models/catalog.ts';
import { AcpSessionSource } from '../models/acp-session.ts';
import { Refresher } from '../models/refresher.ts';
import { MODELS_QUEUE, RefreshJobs } from '../models/refresh-jobs.ts';
import { Memory } from '../memory/index.ts';
import { LedgerStore } from '../../store/ledger-store.ts';
import { LedgerService } from '../memory/ledger-service.ts';
import { DreamStore } from '../../store/dream-store.ts';
import { DREAM_QUEUE, DreamService } from '../memory/dream-service.ts';
import { MarketplaceStore } from '../../store/marketplace-store.ts';
import { Marketplace } from '../marketplace/marketplace.ts';
import { MARKET_QUEUE, MarketplaceSync } from '../marketplace/sync.ts';
import { SkillInstalls } from '../skills/installs.ts';
import type { MarketSettings } from '../marketplace/types.ts';
import { ExternalExecutors } from '../loops/executors/external.ts';
import { ToolRuntime } from '../tools/runtime.ts';
import { SkillCatalog } from '../skills/catalog.ts';
import { Loops } from '../loops/index.ts';
import { ExtensionStore } from '../../store/extension-store.ts';
import { ExtensionCache } from '../extensions/artifacts.ts';
import { EXTENSION_QUEUE, ExtensionProjector } from '../extensions/projector.ts';
import { ExtensionService } from '../extensions/service.ts';
import { ExtensionSupervisor } from '../extensions/supervisor.ts';
import { ExtensionToolHost } from '../extensions/tool-host.ts';


/** How long stop() waits for one part (a reconcile in flight, a worker's job) before it goes on without it. */
const STOP_PART_MS = 20_000;

/**
 * Service is one process of the control plane running the roles its config names: `api` (the HTTP server),
 * `controller` (reconcile workers, relay, resync) and `runtime` (the session host: live ACP agent processes).
 * Replicas share nothing but Redis.
 */
export class Service {
  readonly logger: Logger;
  readonly metrics = new Metrics();
  readonly security: SecurityPolicy;
  private redis?: Redis;
  private bull?: Redis;
  /** Opens every Redis connection of this process for the configured topology (one Redis, Cluster, Sentinel). */
  readonly connections: RedisConnections;
  private server?: http.Server;
  private controllers?: ControllerManager;
  private waiter?: ReconcileWaiter;
  private queues?: ReconcileQueues;
  private host?: SessionHost;
  private tails?: SessionTailHub;
  private sessionService?: SessionService;
  private sessionStore?: SessionStore;
  private mcp?: McpPool;
  private notifications?: NotificationRuntime;
  private heartbeat?: HeartbeatWakes;
  private heartbeatScheduler?: HeartbeatWakeScheduler;
  store?: ResourceStore;
  bus?: EventBus;
  automation?: Automation;
  /** hook.binding runtime: the sync gate (every role) and, in a controller process, the async dispatcher. */
  hooks?: Hooks;
  /** Tasks, runs and leases: the service in every role, long-poll wakes (api), lease expiry (controller). */
  tasks?: Tasks;
  /** Support bundles: requests and downloads in every role, builds in a controller process. */
  support?: SupportBundles;
  /** Hands this process's warning and error lines to the shared log stream in Redis (support bundles read it). */
  private readonly logSink = new SharedLogSink((lines) => this.metrics.logLinesDropped.inc(lines));
  /** The vault: its routes (api) and the `vault:` refs every role resolves. */
  vault?: VaultService;
  /** The model catalog: listings in every role, refresh jobs run by controller processes. */
  models?: ModelCatalog;
  private modelJobs?: RefreshJobs;
  /** The memory family: the one write path in every role; the recall index in api processes. */
  memory?: Memory;
  /** Session memory ledgers: written by the runtime that stops a session, read and repaired by the api. */
  ledgers?: LedgerService;
  /** Dream runs: triggers and reads in every role, runs and checks in a controller process. */
  dreams?: DreamService;
  /** The marketplace: pages, search and installs (api), source syncs (controller). */
  marketplace?: Marketplace;
  private marketSync?: MarketplaceSync;
  /** Loop node executors that call other families (run-agent, tool ids, command/agent-judge, watch-events); controller role. */
  loopExecutors?: ExternalExecutors;
  /** Loops: definitions and run controls in every role; node workers and the watchdog in a controller process. */
  loops?: Loops;
  /** Extensions: installs (api), projections of their records (controller), daemons (runtime). */
  extensions?: ExtensionService;
  private extensionProjector?: ExtensionProjector;
  /** The extension daemons this runtime holds (runtime role). */
  extensionSupervisor?: ExtensionSupervisor;

  /** `destination` receives the LOG_LEVEL lines (default: stderr); warnings and errors also go to the shared log stream. */
  constructor(readonly config: Config, destination: DestinationStream = pino.destination(2)) {
    this.security = new SecurityPolicy(config.security);
    this.connections = new RedisConnections(config.redis);
    // NOTE: the shared stream takes warnings and errors whatever LOG_LEVEL says, so a bundle shows them even from a
    // process that logs only errors (or nothing) to stderr; the logger's own level is the lower of the two.
    const own = pino.levels.values[config.logLevel] ?? Infinity;
    const level = own < pino.levels.values.warn ? config.logLevel : 'warn';
    // NOTE: every line passes through the secret mask: a value this process knows as secret never reaches a log.
    this.logger = pino({ level, base: { roles: config.roles.join(',') }, hooks: { streamWrite: (line) => this.security.secrets.known.current().text(line) } }, pino.multistream([
      { level: config.logLevel as pino.Level, stream: destination },
      { level: 'warn', stream: this.logSink },
    ]));
  }

  /** start connects to Redis and starts every configured role; it throws if Redis does not answer. */
  async start(): Promise<void> {
    const { config, logger } = this;
    // NOTE: first, so a bad key file (a symlink, readable by others, malformed) refuses the start before anything runs.
    const keyring = loadKeyring(config.vault);
    const keySource = config.vault.keys ? 'SVC_VAULT_KEYS' : config.vault.keyFile ? `SVC_VAULT_KEY_FILE ${config.vault.keyFile}` : config.vault.defaultFile;
    if (!keyring) logger.warn('the vault has no key (SVC_VAULT_KEYS or SVC_VAULT_KEY_FILE): its routes answer 503 and vault: refs do not resolve');
    // NOTE: no auto-pipelining. It saves socket writes by holding each command to the end of the tick, but Redis
    // then idles while the tick's requests are parsed and the service idles while Redis runs the batch; measured
    // with test/bench/write-path.ts (same rounds): without it, creates/s rose 14-25% and service CPU per create fell
    // 10-25%; the session figures (events, SSE, prompt) did not move. Code with several commands at once pipelines them.
    this.redis = this.connections.open('svc', 'command', true);
    this.redis.on('error', repeatedErrors.listener(logger, 'warn', 'redis connection error'));
    await this.redis.connect();
    const store = (this.store = new ResourceStore({ redis: this.redis, keys: new Keys(), changeLogRetention: config.changeLogRetention }));
    // NOTE: a store of the layout before hash tags is renamed once, before any part reads it (store/key-migration.ts).
    await migrateKeyLayout(this.redis, store.keys, logger);
    // NOTE: each BullMQ queue has its own hash tag `<prefix>{q:<name>}` (store/keys.ts queuePrefix).
    const qp = (name: string) => queuePrefix(store.keys.prefix, name);
    // NOTE: registry caches (hook gates, bus readers, catalogs) skip the revision check while no registry changed.
    // NOTE: not on a Redis Cluster: there a hook gate missed a binding's change message (the cluster suites of
    // make test), so the caches keep checking the registry revision on every read, as they do without the watch.
    if (!isCluster(this.redis)) {
      store.registryWatch = new RegistryWatch(this.redis, store.keys.registryChannel);
      await store.registryWatch.start();
    }
    this.bull = this.connections.open('svc-bull', 'queue');
    this.bull.on('error', repeatedErrors.listener(logger, 'warn', 'redis (queues) connection error'));
    this.queues = new ReconcileQueues(KINDS, this.bull, store.keys.prefix);
    const bus = (this.bus = new EventBus(this.redis, store.keys, config.eventBusRetention));
    const logs = new LogStream(this.redis, store.keys);
    this.logSink.attach(logs);
    const queues = this.queues;
    this.vault = new VaultService({
      store: new VaultStore(this.redis, store.keys, store.registryWatch), keyring, keySource, bus, logger,
      // NOTE: the records that name a written or deleted secret are re-reconciled at once (Ready or SecretNotFound).
      onChange: async (ref) => queues.enqueueMany(await secretUsers(store, ref)),
      hosts: new VaultHostStore(this.redis, store.keys),
    });
    this.security.secrets.attachVault(this.vault);
    this.security.destinations.attachVault(this.vault);
    const vaultKeys = await this.vault.readiness();
    if (vaultKeys !== 'ok') logger.error({ reason: vaultKeys }, 'the vault holds secrets this process cannot open; not ready until it has their keys');
    // NOTE: masked at the one place every event passes, whoever publishes it (known-secrets.ts says which values).
    bus.maskWith(() => this.security.secrets.known.mask());
    this.hooks = new Hooks({ store, bus, bull: this.bull, queuePrefix: qp(HOOKS_QUEUE), security: this.security, registry: this.metrics.registry, logger, dataDir: config.dataDir, config: config.hooks });
    if (config.roles.includes('controller')) await this.hooks.startDispatcher();
    // NOTE: one workspace, role and session service per process, shared by the API, automation and heartbeat wakes,
    // so every session any family creates or prompts passes the same hook gates.
    const sessions = (this.sessionStore = new SessionStore(store.redis, store.keys));
    // NOTE: an agent's call reads its session's identity only when it changed (not on a cluster: see RegistryWatch).
    if (!isCluster(this.redis)) {
      sessions.identities = new SessionIdentities(this.redis, store.keys.sessionChannel);
      await sessions.identities.start();
    }
    const workspaceStore = new WorkspaceStore(store.redis, store.keys);
    const settings = new Settings(config.configFile);
    // NOTE: the model catalog: any process lists and queues refreshes; controller processes run them (and the ticks).
    const catalogStore = new ModelCatalogStore(this.redis, store.keys);
    // NOTE: agents' and curations' ModelKnown condition follows the catalog: a refresh or a changed agent report re-reconciles them.
    const recheckAgents = async () => queues.enqueueMany((await Promise.all(['agent', 'model.curation'].map(async (kind) => (await store.idsOf(kind)).map((id) => ({ kind, id }))))).flat());
    const refresher = new Refresher({
      store: catalogStore, security: this.security, bus, logger, modelsDevUrl: config.models.modelsDevUrl, timeoutMs: config.models.timeoutMs, ttlMs: config.models.refreshMs,
      onChange: recheckAgents,
    });
    const acpModels = new AcpSessionSource({ store: catalogStore, bus, onChange: recheckAgents });
    const modelJobs: RefreshJobs = (this.modelJobs = new RefreshJobs({
      connection: this.bull, queuePrefix: `${store.keys.prefix}{q:${MODELS_QUEUE}}`, redis: this.redis, channel: `${store.keys.prefix}{models}:refreshed`,
      refresher, targets: () => models.targets(), ttlMs: config.models.refreshMs, logger,
    }));
    const models: ModelCatalog = (this.models = new ModelCatalog({
      store: catalogStore, settings, registries: new RegistryCache(store), jobs: modelJobs,
      modelsDevUrl: config.models.modelsDevUrl, ttlMs: config.models.refreshMs, timeoutMs: config.models.timeoutMs,
    }));
    if (config.roles.includes('controller')) await modelJobs.startWorker();
    const roles = new RoleResolver({ store, settings, inactivityTimeout: formatDuration(config.supervision.timeoutMs), models });
    const workspaces = new WorkspaceService({ workspaces: workspaceStore, store, security: this.security });

    const sessionService = (this.sessionService = new SessionService({ sessions, workspaces, resources: store, redis: store.redis, roles, hooks: this.hooks, secrets: () => this.security.secrets.known.mask() }));
    // NOTE: automation: the run store and `automation` queue of every role; the controller role runs the
    // job schedulers (through ControllerManager), the run executor and the trigger reader.
    const hooks = this.hooks;
    const tasks = (this.tasks = new Tasks({
      redis: this.redis, bus, logger, gate: hooks, gateBound: (event) => hooks.bound(event),
      workspace: (ref) => workspaces.get(ref).catch((err) => { if (err instanceof NotFoundError) return undefined; throw err; }), session: (id) => sessions.get(id),
    }));
    if (config.roles.includes('controller')) tasks.startController();
    const automation = (this.automation = new Automation({
      store, bus, bullConnection: this.bull, queuePrefix: qp(AUTOMATION_QUEUE), security: this.security, workspaces, sessions: sessionService,
      logger, concurrency: config.automation.concurrency, webhookRateLimit: config.automation.webhookRateLimit, gate: hooks, tasks: tasks.service,
    }));
    if (config.roles.includes('controller')) await automation.startController();
    // NOTE: support bundles: any api replica takes requests and serves archives, any controller builds them.
    const support = (this.support = new SupportBundles({
      store: new SupportStore(store.redis, store.keys), artifacts: new ArtifactStore(this.redis, store.keys),
      connection: this.bull, queuePrefix: qp(SUPPORT_QUEUE), logger,
      onOutcome: (outcome, seconds) => { this.metrics.supportBundles.inc({ outcome }); this.metrics.supportBundleDuration.observe(seconds); },
      builder: config.roles.includes('controller') ? new SupportBundleBuilder({
        redis: this.redis, config, readiness: () => this.readiness(), queueDepth: () => this.queues!.depth(),
        resources: store, workspaces: workspaceStore, sessions, bus, logs,
        // NOTE: every secret the service could hand out is masked: env: secrets under the allowlist and vault values.
        literals: async () => [...this.security.secrets.values(), ...(await this.vault?.values() ?? [])],
      }) : undefined,
    }));
    if (config.roles.includes('controller')) support.startWorker();
    const ledgers = (this.ledgers = new LedgerService({ ledgers: new LedgerStore(store.redis, store.keys), sessions, workspaces, bus, logger }));
    this.memory = new Memory({
      redis: this.redis, keys: store.keys, bus, logger, policy: config.memory, injectionMaxBytes: config.memory?.injectionMaxBytes, secrets: () => this.security.secrets.known.mask(),
      workspaceExists: async (id) => !!(await workspaces.get(id).catch((err) => { if (err instanceof NotFoundError) return undefined; throw err; })),
      dream: config.dream,
    });
    // NOTE: dreams write through the memory family's one write path (the same instance as the routes and tools).
    const memoryFamily = this.memory;
    const memory = memoryFamily.service;
    const dreams = (this.dreams = new DreamService({
      store: new DreamStore(store.redis, store.keys), memory, sessions: sessionService, sessionStore: sessions, bus, logger, config: config.dream,
      connection: this.bull, queuePrefix: `${store.keys.prefix}{q:${DREAM_QUEUE}}`,
    }));
    if (config.roles.includes('controller')) await dreams.startWorker();
    // NOTE: the marketplace: any api replica answers from the rows in Redis and installs; any controller syncs.
    const marketStore = new MarketplaceStore(this.redis, store.keys);
    const marketSync: MarketplaceSync = (this.marketSync = new MarketplaceSync({
      store: marketStore, connection: this.bull, queuePrefix: `${store.keys.prefix}{q:${MARKET_QUEUE}}`, logger, settings: (): Promise<MarketSettings> => marketplace.settings(),
      egress: this.security.egress,
    }));
    const marketplace: Marketplace = (this.marketplace = new Marketplace({ store: marketStore, resources: store, settings, sync: marketSync }));
    const skillInstalls = new SkillInstalls({ store: marketStore, artifacts: new ArtifactStore(this.redis, store.keys), source: marketplace, dataDir: config.dataDir, bus, logger, egress: this.security.egress });
    marketplace.installs = skillInstalls;
    if (config.roles.includes('controller')) await marketSync.startWorker();
    const loops = (this.loops = new Loops({ redis: this.redis, resources: store, workspaces, bus, connection: this.bull, logger, settings: config.loops }));
    // NOTE: extensions: any api replica installs (the artifact goes to the artifact store), any controller projects
    // their records, and each runtime supervises the daemons whose leases it holds.
    const extStore = new ExtensionStore(this.redis, store.keys);
    const extCache = new ExtensionCache({
      dataDir: config.dataDir, artifacts: new ArtifactStore(this.redis, store.keys), limits: () => marketplace.limits(),
      installedLimits: async () => (await marketplace.installedLimits()).limits,
    });
    const projector = (this.extensionProjector = new ExtensionProjector({
      extensions: extStore, resources: store, connection: this.bull, queuePrefix: `${store.keys.prefix}{q:${EXTENSION_QUEUE}}`,
      dirOf: (sha) => extCache.dirOf(sha), resyncIntervalMs: config.resyncIntervalMs, logger,
    }));
    this.extensions = new ExtensionService({
      store: extStore, resources: store, artifacts: new ArtifactStore(this.redis, store.keys), cache: extCache, marketplace, projector, security: this.security, bus, logger,
    });
    marketplace.extensionInstalls = () => this.extensions!.installedVersions();
    if (config.roles.includes('controller')) await projector.startWorker();

    if (config.roles.includes('controller')) {
      const queues = this.queues;
      this.notifications = new NotificationRuntime({
        resources: store, bus, bullConnection: this.bull, queuePrefix: qp(NOTIFY_QUEUE), security: this.security, logger, metrics: this.metrics,
        settings: config.notifications, reconcile: (key) => queues.enqueue(key),
      });
      this.controllers = new ControllerManager({
        store, queues: this.queues, bullConnection: this.bull, queuePrefix: store.keys.prefix,
        concurrency: config.reconcileConcurrency, resyncIntervalMs: config.resyncIntervalMs, metrics: this.metrics, logger, security: this.security, bus,
        bridgeHooks: this.notifications.bridgeHooks,
        automation: { queue: automation.queue, runs: automation.runs },
        models: this.models,
        ownerHooks: { extension: (ids) => projector.enqueue(ids) },
      });
      await this.controllers.start();
      await this.notifications.start();
    }
    // Heartbeat wakes: one engine for the wake route and tools (api) and the scheduled ticks (controller).
    this.heartbeat = createHeartbeatWakes({ store, sessions, workspaces, prompter: sessionService, settings, dataDir: config.dataDir, paths: this.security.paths, bus, logger, gate: this.hooks });
    if (config.roles.includes('controller')) {
      this.heartbeatScheduler = new HeartbeatWakeScheduler({ wakes: this.heartbeat, workspaces: workspaceStore, bus, connection: this.bull, prefix: qp(HEARTBEAT_QUEUE), resyncIntervalMs: config.heartbeatResyncIntervalMs, logger });
      await this.heartbeatScheduler.start();
    }
    if (config.roles.includes('runtime')) {
      this.host = new SessionHost({
        redis: this.redis, sessions, resources: store, logger, dataDir: config.dataDir, apiUrl: () => (config.roles.includes('api') ? this.url : config.apiUrl),
        supervision: config.supervision, security: this.security, settings,
        sessionsPerProcess: config.agentSessionsPerProcess, idleSuspendMs: config.sessionIdleSuspendMs, bus,
        onStopped: (id) => ledgers.materialize(id).finally(() => dreams.sessionStopped(id)),
        onAgentModels: (report) => acpModels.record(report),
        preamble: (s) => memoryFamily.injection.forSession(s),
      });
      await this.host.start();
      this.extensionSupervisor = new ExtensionSupervisor({
        store: extStore, redis: this.redis, cache: extCache, security: this.security, logger,
        settings: { ...config.extensions, initTimeoutMs: 10_000 },
      });
      await this.extensionSupervisor.start();
    }
    // NOTE: the recall index (every memory in this process's memory) is built where search is served: api processes.
    if (config.roles.includes('api')) await this.memory.start();
    // NOTE: one host of extension daemon tools for both tool runtimes (the api's and a controller's loop nodes).
    const extensionTools = new ExtensionToolHost({ store: extStore, redis: this.redis, secrets: this.security.secrets, supervisor: this.extensionSupervisor });
    if (config.roles.includes('api')) {
      this.waiter = new ReconcileWaiter(store);
      this.tails = new SessionTailHub(sessions, this.redis);
      const { auth } = config;
      const authenticator: Authenticator | undefined = auth.mode === 'token' ? new TokenFileAuthenticator(auth.tokensFile)
        : auth.mode === 'kubernetes' ? new KubernetesAuthenticator({ groupRoles: parseGroupRoles(auth.groupRoles), apiUrl: auth.kubeApiUrl || undefined })
        : undefined;
      const { app } = createApp({
        store, workspaces, roles, sessionService, sessions, tails: this.tails, waiter: this.waiter,
        metrics: this.metrics, logger, readiness: () => this.readiness(), queueDepth: () => this.queues!.depth(), authenticator,
        settings, dataDir: config.dataDir, mcp: this.mcp = new McpPool(logger, this.security), security: this.security,
        bus,
        heartbeat: this.heartbeat,
        automation,
        hooks: this.hooks,
        tasks: tasks.service,
        support,
        vault: this.vault,
        models,
        memory: this.memory,
        ledgers,
        dreams,
        marketplace,
        skillInstalls,
        loops,
        extensions: this.extensions,
        extensionTools,
        streams: new StreamSlots(config.streams),
        replicaAck: config.redis.minReplicasAck ? { mark: () => this.connections.mark(this.redis!), wait: (since) => this.connections.waitForReplicas(this.redis!, since) } : undefined,
      });
      // NOTE: MCP servers are started from the registry in the background (and by calls), never by a read.
      const registries = new RegistryCache(store);
      this.mcp.start(async () => (await registries.read(['mcp_server'])).entries.mcp_server as RegistryEntry<McpServerSpec>[]);
      this.server = http.createServer(app.callback());
    } else {
      const ops = createOpsApp({ metrics: this.metrics, logger, readiness: () => this.readiness(), queueDepth: () => this.queues!.depth() });
      this.server = http.createServer(ops.callback());
    }
    if (config.roles.includes('controller')) {
      // NOTE: the tool runtime of the loop nodes: the api role's is inside its app; a controller has its own, on the
      // same store, policy and hook gate (the MCP pool is shared when this process also serves the api).
      const mcp = (this.mcp ??= new McpPool(logger, this.security));
      const tools = new ToolRuntime({
        store, workspaces, sessions: sessionService, settings, pool: mcp, skills: new SkillCatalog({ store, dataDir: config.dataDir, paths: this.security.paths, installs: skillInstalls, extensionDir: (dir, name) => this.extensions!.localSkillDir(dir, name) }),
        dataDir: config.dataDir, metrics: this.metrics, logger, security: this.security, heartbeat: this.heartbeat, automation: automation.service, hooks: this.hooks, tasks: tasks.service,
        models, memory: this.memory, extensions: extensionTools, loops,
      });
      this.loopExecutors = new ExternalExecutors({
        sessions: sessionService, sessionStore: sessions, bus, redis: this.redis, prefix: store.keys.prefix, tools, exec: this.security.exec,
        workspaceRoot: async (id) => (await workspaces.get(id)).root_dir, logger,
      });
      await this.loopExecutors.start();
      // NOTE: the node workers start once every kind is registered (a node of an unregistered kind would fail).
      this.loopExecutors.register(loops.registry);
      await this.loopExecutors.attach(loops.store, loops.engine);
      loops.startWorkers();
    }
    this.server.keepAliveTimeout = 65_000;
    // NOTE: a slow client may not hold a connection for Node's defaults (60-300 s); streams (watch, SSE, prompt)
    // are exempt from the request timeout, which covers only reading the request.
    this.server.headersTimeout = config.http.headersTimeoutMs;
    this.server.requestTimeout = config.http.requestTimeoutMs;
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(config.port, config.host, () => resolve());
    });
    logger.info({ url: this.url, api: config.roles.includes('api') }, 'http listening');
    logger.info('service started');
  }

  private address?: { server: http.Server; url: string };

  /** url is the API's base address while the server listens (every session start hands it to its agent). */
  get url(): string {
    const server = this.server;
    if (!server?.listening) return '';
    if (this.address?.server !== server) {
      const a = server.address() as AddressInfo;
      this.address = { server, url: `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}` };
    }
    return this.address.url;
  }

  /** readiness is true when Redis answers, in a controller process the controllers run, and this process has every vault key in use. */
  async readiness() {
    const checks: Record<string, string> = {};
    try {
      // NOTE: a dropped connection answers at once, instead of after ioredis's retries.
      if (this.redis!.status !== 'ready') throw new Error(`connection ${this.redis!.status}`);
      await this.redis!.ping();
      checks.redis = 'ok';
    } catch (err) {
      checks.redis = `unreachable: ${(err as Error).message}`;
    }
    if (this.config.roles.includes('controller')) checks.controllers = this.controllers?.running ? 'ok' : 'not running';
    if (this.config.roles.includes('runtime')) checks.runtime = this.host ? 'ok' : 'not running';
    if (this.vault && checks.redis === 'ok') checks.vault = await this.vault.readiness();
    return { ready: Object.values(checks).every((c) => c === 'ok'), checks };
  }

  /** stopPart awaits one part's stop for at most STOP_PART_MS; past it, it logs the part and goes on. */
  private async stopPart(name: string, stop: () => Promise<unknown> | undefined): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => { timer = setTimeout(() => resolve('late'), STOP_PART_MS); });
    const outcome = await Promise.race([Promise.resolve(stop()).catch((err: Error) => this.logger.warn({ err: err.message, part: name }, 'stop failed')), late]);
    clearTimeout(timer);
    if (outcome === 'late') this.logger.warn({ part: name, after_ms: STOP_PART_MS }, 'a part did not stop in time; shutting down without it');
  }

  /** stop stops taking requests, finishes in-flight reconciles, then closes Redis. */
  async stop(): Promise<void> {
    if (this.server) {
      const closed = new Promise<void>((resolve) => this.server!.close(() => resolve()));
      this.server.closeIdleConnections();
      // NOTE: open streams (watch) never go idle; give in-flight requests a moment, then cut the rest.
      const cut = setTimeout(() => this.server?.closeAllConnections(), 2000);
      await closed;
      clearTimeout(cut);
    }
    this.tails?.close();
    this.sessionService?.close();
    // NOTE: each part stops in order; one that does not finish (a client still waiting on Redis) is logged by name
    // and left behind, so a shutdown always ends (a test run saw one hang for a minute after a Redis restart).
    const parts: [string, () => Promise<unknown> | undefined][] = [
      ['mcp', () => this.mcp?.close()],
      ['heartbeat', () => this.heartbeatScheduler?.stop()],
      ['sessions', () => this.host?.stop()],
      // NOTE: after the host: a dream run waiting on its agent's turn ends as soon as the session is stopped.
      ['dreams', () => this.dreams?.stop()],
      ['extensions', () => this.extensionSupervisor?.stop()],
      ['reconcile waiter', () => this.waiter?.stop()],
      ['notifications', () => this.notifications?.stop()],
      ['controllers', () => this.controllers?.stop()],
      ['loop executors', () => this.loopExecutors?.stop()],
      ['automation', () => this.automation?.stop()],
      ['tasks', () => this.tasks?.stop()],
      ['hooks', () => this.hooks?.stop()],
      ['support', () => this.support?.stop()],
      ['model jobs', () => this.modelJobs?.stop()],
      ['memory', () => this.memory?.stop()],
      ['marketplace sync', () => this.marketSync?.stop()],
      ['loops', () => this.loops?.stop()],
      ['extension projector', () => this.extensionProjector?.stop()],
      ['queues', () => this.queues?.close()],
      ['outbound connections', () => this.security.egress.close()],
    ];
    for (const [name, stop] of parts) await this.stopPart(name, stop);
    this.store?.registryWatch?.stop();
    this.sessionStore?.identities?.stop();
    await this.stopPart('queue connection', () => this.bull?.quit().catch(() => undefined));
    this.logger.info('service stopped');
    await this.logSink.detach();
    await this.redis?.quit().catch(() => undefined);
  }
}
