import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import pino, { type DestinationStream, type Logger } from 'pino';
import { createApp, createOpsApp } from '../../api/app.ts';
import { Settings } from './settings.ts';
import { formatDuration } from '../../codecs/duration.ts';
import { McpPool, type McpServerSpec } from '../tools/mcp.ts';
import { RegistryCache, type RegistryEntry } from '../../controllers/registry-controller.ts';
import { ReconcileWaiter } from '../resources/reconcile-waiter.ts';
import { SessionTailHub } from '../sessions/session-tail.ts';
import { KINDS } from '../../codecs/index.ts';
import { ControllerManager, ReconcileQueues } from '../../controllers/index.ts';
import { Keys } from '../../store/keys.ts';
import { ResourceStore } from '../../store/resource-store.ts';
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
import { VaultStore } from '../../store/vault-store.ts';
import { loadKeyring } from '../vault/keys.ts';
import { VaultService } from '../vault/vault-service.ts';

const QUEUE_PREFIX = 'svc:q';

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
  private server?: http.Server;
  private controllers?: ControllerManager;
  private waiter?: ReconcileWaiter;
  private queues?: ReconcileQueues;
  private host?: SessionHost;
  private tails?: SessionTailHub;
  private mcp?: McpPool;
  private notifications?: NotificationRuntime;
  private heartbeat?: HeartbeatWakes;
  private heartbeatScheduler?: HeartbeatWakeScheduler;
  store?: ResourceStore;
  bus?: EventBus;
  automation?: Automation;
  /** hook.binding runtime: the sync gate (every role) and, in a controller process, the async dispatcher. */
  hooks?: Hooks;
  /** Tasks, runs and leases (issue 14): the service in every role, long-poll wakes (api), lease expiry (controller). */
  tasks?: Tasks;
  /** Support bundles (issue 29): requests and downloads in every role, builds in a controller process. */
  support?: SupportBundles;
  /** Hands this process's warning and error lines to the shared log stream in Redis (support bundles read it). */
  private readonly logSink = new SharedLogSink((lines) => this.metrics.logLinesDropped.inc(lines));
  /** The vault (issue 29): its routes (api) and the `vault:` refs every role resolves. */
  vault?: VaultService;

  /** `destination` receives the LOG_LEVEL lines (default: stderr); warnings and errors also go to the shared log stream. */
  constructor(readonly config: Config, destination: DestinationStream = pino.destination(2)) {
    this.security = new SecurityPolicy(config.security);
    // NOTE: the shared stream takes warnings and errors whatever LOG_LEVEL says, so a bundle shows them even from a
    // process that logs only errors (or nothing) to stderr; the logger's own level is the lower of the two.
    const own = pino.levels.values[config.logLevel] ?? Infinity;
    const level = own < pino.levels.values.warn ? config.logLevel : 'warn';
    // NOTE: every line passes through the secret mask: a value this process resolved never reaches a log.
    this.logger = pino({ level, base: { roles: config.roles.join(',') }, hooks: { streamWrite: (line) => this.security.secrets.mask(line) } }, pino.multistream([
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
    this.redis = new Redis(config.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 3, connectionName: 'svc' });
    this.redis.on('error', (err) => logger.warn({ err: err.message }, 'redis connection error'));
    await this.redis.connect();
    const store = (this.store = new ResourceStore({ redis: this.redis, keys: new Keys(), changeLogRetention: config.changeLogRetention }));
    // NOTE: BullMQ's blocking workers need maxRetriesPerRequest: null on their connection.
    this.bull = new Redis(config.redisUrl, { maxRetriesPerRequest: null, connectionName: 'svc-bull' });
    this.bull.on('error', (err) => logger.warn({ err: err.message }, 'redis (queues) connection error'));
    this.queues = new ReconcileQueues(KINDS, this.bull, QUEUE_PREFIX);
    const bus = (this.bus = new EventBus(this.redis, store.keys, config.eventBusRetention));
    const logs = new LogStream(this.redis, store.keys);
    this.logSink.attach(logs);
    const queues = this.queues;
    this.vault = new VaultService({
      store: new VaultStore(this.redis, store.keys), keyring, keySource, bus, logger,
      // NOTE: the records that name a written or deleted secret are re-reconciled at once (Ready or SecretNotFound).
      onChange: async (ref) => queues.enqueueMany(await secretUsers(store, ref)),
    });
    this.security.secrets.attachVault(this.vault);
    this.hooks = new Hooks({ store, bus, bull: this.bull, queuePrefix: QUEUE_PREFIX, security: this.security, registry: this.metrics.registry, logger, dataDir: config.dataDir, config: config.hooks });
    if (config.roles.includes('controller')) await this.hooks.startDispatcher();
    // NOTE: one workspace, role and session service per process, shared by the API, automation and heartbeat wakes,
    // so every session any family creates or prompts passes the same hook gates.
    const sessions = new SessionStore(store.redis, store.keys);
    const workspaceStore = new WorkspaceStore(store.redis, store.keys);
    const settings = new Settings(config.configFile);
    const workspaces = new WorkspaceService({ workspaces: workspaceStore, store, security: this.security });
    const roles = new RoleResolver({ store, settings, inactivityTimeout: formatDuration(config.supervision.timeoutMs) });
    const sessionService = new SessionService({ sessions, workspaces, resources: store, redis: store.redis, roles, hooks: this.hooks });
    // NOTE: automation (issue 13): the run store and `automation` queue of every role; the controller role runs the
    // job schedulers (through ControllerManager), the run executor and the trigger reader.
    const hooks = this.hooks;
    const tasks = (this.tasks = new Tasks({
      redis: this.redis, bus, logger, gate: hooks, gateBound: (event) => hooks.bound(event),
      workspace: (ref) => workspaces.get(ref).catch((err) => { if (err instanceof NotFoundError) return undefined; throw err; }), session: (id) => sessions.get(id),
    }));
    if (config.roles.includes('controller')) tasks.startController();
    const automation = (this.automation = new Automation({
      store, bus, bullConnection: this.bull, queuePrefix: QUEUE_PREFIX, security: this.security, workspaces, sessions: sessionService,
      logger, concurrency: config.automation.concurrency, webhookRateLimit: config.automation.webhookRateLimit, gate: hooks, tasks: tasks.service,
    }));
    if (config.roles.includes('controller')) await automation.startController();
    // NOTE: support bundles: any api replica takes requests and serves archives, any controller builds them.
    const support = (this.support = new SupportBundles({
      store: new SupportStore(store.redis, store.keys), artifacts: new ArtifactStore(this.redis, store.keys),
      connection: this.bull, queuePrefix: `${store.keys.prefix}{q:${SUPPORT_QUEUE}}`, logger,
      onOutcome: (outcome, seconds) => { this.metrics.supportBundles.inc({ outcome }); this.metrics.supportBundleDuration.observe(seconds); },
      builder: config.roles.includes('controller') ? new SupportBundleBuilder({
        redis: this.redis, config, readiness: () => this.readiness(), queueDepth: () => this.queues!.depth(),
        resources: store, workspaces: workspaceStore, sessions, bus, logs,
        // NOTE: every secret the service could hand out is masked: env: secrets under the allowlist and vault values.
        literals: async () => [...this.security.secrets.values(), ...(await this.vault?.values() ?? [])],
      }) : undefined,
    }));
    if (config.roles.includes('controller')) support.startWorker();

    if (config.roles.includes('controller')) {
      const queues = this.queues;
      this.notifications = new NotificationRuntime({
        resources: store, bus, bullConnection: this.bull, queuePrefix: QUEUE_PREFIX, security: this.security, logger, metrics: this.metrics,
        settings: config.notifications, reconcile: (key) => queues.enqueue(key),
      });
      this.controllers = new ControllerManager({
        store, queues: this.queues, bullConnection: this.bull, queuePrefix: QUEUE_PREFIX,
        concurrency: config.reconcileConcurrency, resyncIntervalMs: config.resyncIntervalMs, metrics: this.metrics, logger, security: this.security, bus,
        bridgeHooks: this.notifications.bridgeHooks,
        automation: { queue: automation.queue, runs: automation.runs },
      });
      await this.controllers.start();
      await this.notifications.start();
    }
    // Heartbeat wakes: one engine for the wake route and tools (api) and the scheduled ticks (controller).
    this.heartbeat = createHeartbeatWakes({ store, sessions, workspaces, prompter: sessionService, settings, dataDir: config.dataDir, paths: this.security.paths, bus, logger, gate: this.hooks });
    if (config.roles.includes('controller')) {
      this.heartbeatScheduler = new HeartbeatWakeScheduler({ wakes: this.heartbeat, workspaces: workspaceStore, bus, connection: this.bull, prefix: QUEUE_PREFIX, resyncIntervalMs: config.heartbeatResyncIntervalMs, logger });
      await this.heartbeatScheduler.start();
    }
    if (config.roles.includes('runtime')) {
      this.host = new SessionHost({
        redis: this.redis, sessions, resources: store, logger, dataDir: config.dataDir, apiUrl: () => (config.roles.includes('api') ? this.url : config.apiUrl),
        supervision: config.supervision, security: this.security,
        sessionsPerProcess: config.agentSessionsPerProcess, idleSuspendMs: config.sessionIdleSuspendMs, bus,
      });
      await this.host.start();
    }
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
      });
      // NOTE: MCP servers are started from the registry in the background (and by calls), never by a read.
      const registries = new RegistryCache(store);
      this.mcp.start(async () => (await registries.read(['mcp_server'])).entries.mcp_server as RegistryEntry<McpServerSpec>[]);
      this.server = http.createServer(app.callback());
    } else {
      const ops = createOpsApp({ metrics: this.metrics, logger, readiness: () => this.readiness(), queueDepth: () => this.queues!.depth() });
      this.server = http.createServer(ops.callback());
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

  /** url is the API's base address once started. */
  get url(): string {
    const a = this.server?.address() as AddressInfo | null;
    return a ? `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}` : '';
  }

  /** readiness is true when Redis answers and, in a controller process, the controllers run. */
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
    return { ready: Object.values(checks).every((c) => c === 'ok'), checks };
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
    await this.mcp?.close();
    await this.heartbeatScheduler?.stop();
    await this.host?.stop();
    await this.waiter?.stop();
    await this.notifications?.stop();
    await this.controllers?.stop();
    await this.automation?.stop();
    await this.tasks?.stop();
    await this.hooks?.stop();
    await this.support?.stop();
    await this.queues?.close();
    await this.bull?.quit().catch(() => undefined);
    this.logger.info('service stopped');
    await this.logSink.detach();
    await this.redis?.quit().catch(() => undefined);
  }
}
