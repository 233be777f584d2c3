import path from 'node:path';
import { parseDuration } from '../../codecs/duration.ts';
import { parseEgressAllowlist } from '../security/egress.ts';
import type { SecurityConfig } from '../security/types.ts';
import { parseKeyList, type VaultKeySource } from '../vault/keys.ts';
import { parseHostList, type RedisSettings, type RedisTopology } from '../../store/connections.ts';
import type { Config, Role } from './types.ts';
import { loadDreamConfig } from '../memory/dream-policy.ts';
import { DEFAULT_INJECTION_BYTES, MAX_INJECTION_BYTES } from '../memory/injection.ts';

const ROLES: readonly Role[] = ['api', 'controller', 'runtime'];
const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** ConfigError lists every invalid environment variable at once. */
export class ConfigError extends Error {}

/** loadConfig reads and validates the configuration; it throws ConfigError naming each bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const problems: string[] = [];
  const int = (name: string, dflt: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return dflt;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) problems.push(`${name}="${raw}" must be an integer from ${min} to ${max}`);
    return n;
  };
  const port = int('PORT', 8080, 0, 65535);
  const host = env.HOST || '127.0.0.1';
  const redisUrl = env.REDIS_URL || 'redis://127.0.0.1:6379';
  if (!/^rediss?:\/\//.test(redisUrl)) problems.push(`REDIS_URL="${redisUrl}" must start with redis:// or rediss://`);
  const redis = redisSettings(env, redisUrl, problems, int);
  const roles = (env.SVC_ROLES || ROLES.join(',')).split(',').map((r) => r.trim()).filter(Boolean);
  const badRoles = roles.filter((r) => !ROLES.includes(r as Role));
  if (badRoles.length || !roles.length) problems.push(`SVC_ROLES="${env.SVC_ROLES}" must be a comma-separated mix of ${ROLES.join(', ')}`);
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LEVELS.includes(logLevel)) problems.push(`LOG_LEVEL="${logLevel}" must be one of ${LEVELS.join(', ')}`);
  const resync = parseInterval(env.RESYNC_INTERVAL || '5m');
  if (resync === undefined) problems.push(`RESYNC_INTERVAL="${env.RESYNC_INTERVAL}" must be a duration such as 30s, 5m or 1h`);
  const duration = (name: string, dflt: string): number => {
    const v = parseInterval(env[name] || dflt);
    if (v === undefined) problems.push(`${name}="${env[name]}" must be a duration such as 500ms, 30s, 5m or 1h`);
    return v ?? 0;
  };
  const supervision = {
    warnAfterMs: duration('SESSION_INACTIVITY_WARNING_AFTER', '15m'),
    timeoutMs: duration('SESSION_INACTIVITY_TIMEOUT', '30m'),
    cancelGraceMs: duration('SESSION_TIMEOUT_CANCEL_GRACE', '30s'),
    firstActivityMs: ['0', 'off'].includes(env.SESSION_FIRST_ACTIVITY_WARNING ?? '') ? 0 : duration('SESSION_FIRST_ACTIVITY_WARNING', '60s'),
  };
  if (supervision.warnAfterMs > supervision.timeoutMs) problems.push('SESSION_INACTIVITY_WARNING_AFTER must not exceed SESSION_INACTIVITY_TIMEOUT');
  const mode = (env.AUTH_MODE || 'none') as Config['auth']['mode'];
  if (!['none', 'token', 'kubernetes'].includes(mode)) problems.push(`AUTH_MODE="${mode}" must be none, token or kubernetes`);
  const loopback = ['127.0.0.1', 'localhost', '::1'].includes(host) || host.startsWith('127.');
  if (mode === 'none' && !loopback) problems.push(`AUTH_MODE=none is allowed only on a loopback HOST (HOST="${host}"); set AUTH_MODE=token or kubernetes to listen on a network`);
  if (mode === 'token' && !env.AUTH_TOKENS_FILE) problems.push('AUTH_MODE=token needs AUTH_TOKENS_FILE (a YAML/JSON file of {name, role, sha256} entries)');
  const auth = { mode, tokensFile: env.AUTH_TOKENS_FILE ?? '', groupRoles: env.AUTH_K8S_GROUP_ROLES ?? '', kubeApiUrl: env.AUTH_K8S_API_URL ?? '' };
  const dataDir = path.resolve(env.DATA_DIR || './.data');
  const list = (name: string): string[] | undefined => (env[name] === undefined ? undefined : env[name]!.split(',').map((x) => x.trim()).filter(Boolean));
  const origins = list('ALLOWED_ORIGINS') ?? [];
  for (const o of origins) if (!/^https?:\/\/[^/\s]+$/.test(o)) problems.push(`ALLOWED_ORIGINS entry "${o}" must be scheme://host[:port]`);
  const roots = list('WORKSPACE_ROOTS')?.map((r) => path.resolve(r));
  const configFile = path.resolve(env.SVC_CONFIG_FILE || path.join(dataDir, 'config.yaml'));
  // NOTE: the key file is read at start (runtime/vault/keys.ts: it must exist, not be a symlink, not be readable by
  // others); only the inline list can be checked here. The default file is made only for the loopback, one-user
  // AUTH_MODE=none: with authentication a key is configured on purpose (in the chart: a mounted Secret).
  const vault: VaultKeySource = { keys: env.SVC_VAULT_KEYS ?? '', keyFile: env.SVC_VAULT_KEY_FILE ? path.resolve(env.SVC_VAULT_KEY_FILE) : '', defaultFile: '' };
  if (vault.keys && vault.keyFile) problems.push('set SVC_VAULT_KEYS or SVC_VAULT_KEY_FILE, not both');
  if (vault.keys) {
    const parsed = parseKeyList(vault.keys, 'SVC_VAULT_KEYS');
    if (!parsed.ok) problems.push(...parsed.problems);
  }
  if (!vault.keys && !vault.keyFile && mode === 'none') vault.defaultFile = path.join(dataDir, 'vault.key');
  // NOTE: the open defaults hold only for AUTH_MODE=none (loopback, one user); with authentication the service
  // starts closed: no external executables and workspaces under DATA_DIR/workspaces until configured otherwise.
  const security: SecurityConfig = {
    authMode: mode,
    execAllowlist: list('EXEC_ALLOWLIST') ?? (mode === 'none' ? ['*'] : []),
    workspaceRoots: roots ?? (mode === 'none' ? undefined : [path.join(dataDir, 'workspaces')]),
    secretEnvAllowlist: list('SECRET_ENV_ALLOWLIST') ?? ['SVC_SECRET_*'],
    allowedOrigins: origins,
    allowedHosts: (list('ALLOWED_HOSTS') ?? []).map((h) => h.toLowerCase()),
    egressAllowlist: list('EGRESS_ALLOWLIST') ?? [],
    dataDir,
    secretFiles: [auth.tokensFile, configFile, vault.keyFile, ...(env.KUBECONFIG ?? '').split(path.delimiter)].filter(Boolean).map((f) => path.resolve(f)),
  };
  problems.push(...parseEgressAllowlist(security.egressAllowlist ?? []).problems);
  // NOTE: the catalog's models.dev source is off unless MODELS_DEV_URL names where api.json is (no network by default).
  const modelsDevUrl = env.MODELS_DEV_URL ?? '';
  if (modelsDevUrl && !/^https?:\/\/[^\s/@]+(\/\S*)?$/.test(modelsDevUrl)) problems.push(`MODELS_DEV_URL="${modelsDevUrl}" must be an http:// or https:// URL without credentials`);
  const models = { refreshMs: duration('MODEL_CATALOG_REFRESH', '6h'), timeoutMs: duration('MODEL_CATALOG_TIMEOUT', '10s'), modelsDevUrl };
  if (models.refreshMs && models.refreshMs < 1000) problems.push('MODEL_CATALOG_REFRESH must be at least 1s');
  const config: Config = {
    port, host, redisUrl, redis, roles: [...new Set(roles)] as Role[], logLevel, dataDir,
    configFile,
    resyncIntervalMs: resync ?? 0,
    changeLogRetention: int('CHANGE_LOG_RETENTION', 100_000, 10, 100_000_000),
    eventBusRetention: int('EVENT_BUS_RETENTION', 100_000, 100, 100_000_000),
    reconcileConcurrency: int('RECONCILE_CONCURRENCY', 16, 1, 1000),
    supervision,
    shutdownTimeoutMs: duration('SHUTDOWN_TIMEOUT', '30s'),
    auth,
    vault,
    apiUrl: env.SVC_API_URL ?? '',
    security,
    http: { headersTimeoutMs: duration('HTTP_HEADERS_TIMEOUT', '10s'), requestTimeoutMs: duration('HTTP_REQUEST_TIMEOUT', '60s') },
    streams: { perCaller: int('STREAMS_PER_CALLER', 32, 1, 100_000), max: int('STREAMS_MAX', 512, 1, 1_000_000) },
    agentSessionsPerProcess: int('AGENT_SESSIONS_PER_PROCESS', 32, 1, 10_000),
    sessionIdleSuspendMs: ['0', 'off'].includes(env.SESSION_IDLE_SUSPEND ?? '') ? 0 : duration('SESSION_IDLE_SUSPEND', '10m'),
    notifications: {
      concurrency: int('NOTIFY_CONCURRENCY', 16, 1, 1000), attempts: int('NOTIFY_ATTEMPTS', 25, 1, 1000),
      backoffMs: duration('NOTIFY_BACKOFF', '500ms'), maxBackoffMs: duration('NOTIFY_MAX_BACKOFF', '10m'),
      timeoutMs: duration('NOTIFY_TIMEOUT', '5s'), healthIntervalMs: duration('NOTIFY_HEALTH_INTERVAL', '30s'),
    },
    heartbeatResyncIntervalMs: duration('HEARTBEAT_RESYNC_INTERVAL', '30s'),
    automation: { concurrency: int('AUTOMATION_CONCURRENCY', 200, 1, 10_000), webhookRateLimit: int('WEBHOOK_RATE_LIMIT', 60, 1, 1_000_000) },
    memory: {
      maxContentChars: int('MEMORY_MAX_CONTENT_CHARS', 4096, 1, 65_536), maxWritesPerMin: int('MEMORY_MAX_WRITES_PER_MIN', 60, 1, 1_000_000),
      injectionMaxBytes: int('MEMORY_INJECTION_MAX_BYTES', DEFAULT_INJECTION_BYTES, 0, MAX_INJECTION_BYTES),
    },
    dream: loadDreamConfig(env, problems),
    extensions: {
      leaseMs: duration('EXTENSION_LEASE', '15s'), backoffBaseMs: duration('EXTENSION_RESTART_BACKOFF', '1s'),
      backoffMaxMs: duration('EXTENSION_RESTART_MAX_BACKOFF', '60s'), crashLoopAfter: int('EXTENSION_CRASHLOOP_AFTER', 5, 1, 100),
    },
    hooks: {
      timeoutMs: duration('HOOK_TIMEOUT', '5s'), attempts: int('HOOK_ATTEMPTS', 3, 1, 20), backoffMs: duration('HOOK_RETRY_BACKOFF', '1s'),
      concurrency: int('HOOK_CONCURRENCY', 8, 1, 1000), runsKept: int('HOOK_RUNS_KEPT', 1000, 10, 100_000),
    },
    models,
    loops: {
      concurrency: int('LOOP_CONCURRENCY', 64, 1, 10_000), lockMs: duration('LOOP_LOCK_DURATION', '30s'),
      watchdogMs: duration('LOOP_WATCHDOG_INTERVAL', '10s'), retainMs: duration('LOOP_RUN_RETENTION', '168h'),
    },
  };
  if (config.extensions.leaseMs < 1000) problems.push('EXTENSION_LEASE must be at least 1s');
  if (config.extensions.backoffBaseMs > config.extensions.backoffMaxMs) problems.push('EXTENSION_RESTART_BACKOFF must not exceed EXTENSION_RESTART_MAX_BACKOFF');
  if (problems.length) throw new ConfigError(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
  return config;
}

/**
 * redisSettings reads the store topology: REDIS_CLUSTER_NODES (a Redis Cluster), REDIS_SENTINELS with
 * REDIS_SENTINEL_MASTER (a Sentinel-managed master), else REDIS_URL (one Redis); at most one of the three.
 * REDIS_USERNAME, REDIS_PASSWORD and REDIS_TLS=true apply to the data nodes of the first two (the chart sets the
 * password from a Secret), REDIS_SENTINEL_PASSWORD to the sentinels.
 */
function redisSettings(env: NodeJS.ProcessEnv, url: string, problems: string[], int: (name: string, dflt: number, min: number, max: number) => number): RedisSettings {
  const set = (name: string) => (env[name] ?? '') !== '';
  const chosen = ['REDIS_URL', 'REDIS_CLUSTER_NODES', 'REDIS_SENTINELS'].filter(set);
  if (chosen.length > 1) problems.push(`set one of ${chosen.join(', ')}: they are three ways to name the store`);
  if (set('REDIS_SENTINEL_MASTER') !== set('REDIS_SENTINELS')) problems.push('REDIS_SENTINELS and REDIS_SENTINEL_MASTER go together (the sentinels, and the master name they monitor)');
  let topology: RedisTopology = { mode: 'single', url };
  let fromUrl: ReturnType<typeof parseHostList>;
  if (set('REDIS_CLUSTER_NODES')) {
    fromUrl = parseHostList(env.REDIS_CLUSTER_NODES!);
    if (!fromUrl) problems.push(`REDIS_CLUSTER_NODES="${env.REDIS_CLUSTER_NODES}" must be seed nodes host:port,host:port (or redis://[user:password@]host:port,...; rediss:// for TLS)`);
    topology = { mode: 'cluster', nodes: fromUrl?.hosts ?? [] };
  } else if (set('REDIS_SENTINELS')) {
    fromUrl = parseHostList(env.REDIS_SENTINELS!);
    if (!fromUrl) problems.push(`REDIS_SENTINELS="${env.REDIS_SENTINELS}" must be sentinels host:port,host:port (default port 6379 when left out; sentinels usually listen on 26379)`);
    const master = env.REDIS_SENTINEL_MASTER ?? '';
    if (master && !/^[A-Za-z0-9._-]{1,128}$/.test(master)) problems.push(`REDIS_SENTINEL_MASTER="${master}" must be the master name the sentinels monitor (letters, digits, . _ -; at most 128)`);
    topology = { mode: 'sentinel', sentinels: fromUrl?.hosts ?? [], master };
  }
  const tls = env.REDIS_TLS ?? '';
  if (!['', 'true', 'false'].includes(tls)) problems.push(`REDIS_TLS="${tls}" must be true or false`);
  const timeout = parseInterval(env.REDIS_REPLICA_ACK_TIMEOUT || '2s');
  if (timeout === undefined) problems.push(`REDIS_REPLICA_ACK_TIMEOUT="${env.REDIS_REPLICA_ACK_TIMEOUT}" must be a duration such as 500ms or 2s`);
  const minReplicasAck = int('REDIS_MIN_REPLICAS_ACK', 0, 0, 16);
  return {
    topology,
    username: env.REDIS_USERNAME || fromUrl?.username,
    password: env.REDIS_PASSWORD || fromUrl?.password,
    tls: tls === 'true' || (tls === '' && fromUrl?.tls === true),
    sentinelPassword: env.REDIS_SENTINEL_PASSWORD || undefined,
    minReplicasAck,
    replicaAckTimeoutMs: timeout ?? 2000,
  };
}

/** parseInterval reads a positive duration such as 500ms, 30s, 5m or 1h30m (in ms). */
function parseInterval(s: string): number | undefined {
  const ms = parseDuration(s);
  return ms && ms > 0 ? ms : undefined;
}
