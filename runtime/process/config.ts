import path from 'node:path';
import { parseDuration } from '../../codecs/duration.ts';
import type { SecurityConfig } from '../security/types.ts';
import { parseKeyList, type VaultKeySource } from '../vault/keys.ts';
import type { Config, Role } from './types.ts';

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
    dataDir,
    secretFiles: [auth.tokensFile, configFile, vault.keyFile, ...(env.KUBECONFIG ?? '').split(path.delimiter)].filter(Boolean).map((f) => path.resolve(f)),
  };
  const config: Config = {
    port, host, redisUrl, roles: [...new Set(roles)] as Role[], logLevel, dataDir,
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
    agentSessionsPerProcess: int('AGENT_SESSIONS_PER_PROCESS', 32, 1, 10_000),
    sessionIdleSuspendMs: ['0', 'off'].includes(env.SESSION_IDLE_SUSPEND ?? '') ? 0 : duration('SESSION_IDLE_SUSPEND', '10m'),
    notifications: {
      concurrency: int('NOTIFY_CONCURRENCY', 16, 1, 1000), attempts: int('NOTIFY_ATTEMPTS', 25, 1, 1000),
      backoffMs: duration('NOTIFY_BACKOFF', '500ms'), maxBackoffMs: duration('NOTIFY_MAX_BACKOFF', '10m'),
      timeoutMs: duration('NOTIFY_TIMEOUT', '5s'), healthIntervalMs: duration('NOTIFY_HEALTH_INTERVAL', '30s'),
    },
    heartbeatResyncIntervalMs: duration('HEARTBEAT_RESYNC_INTERVAL', '30s'),
    automation: { concurrency: int('AUTOMATION_CONCURRENCY', 200, 1, 10_000), webhookRateLimit: int('WEBHOOK_RATE_LIMIT', 60, 1, 1_000_000) },
    hooks: {
      timeoutMs: duration('HOOK_TIMEOUT', '5s'), attempts: int('HOOK_ATTEMPTS', 3, 1, 20), backoffMs: duration('HOOK_RETRY_BACKOFF', '1s'),
      concurrency: int('HOOK_CONCURRENCY', 8, 1, 1000), runsKept: int('HOOK_RUNS_KEPT', 1000, 10, 100_000),
    },
  };
  if (problems.length) throw new ConfigError(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
  return config;
}

/** parseInterval reads a positive duration such as 500ms, 30s, 5m or 1h30m (in ms). */
function parseInterval(s: string): number | undefined {
  const ms = parseDuration(s);
  return ms && ms > 0 ? ms : undefined;
}
