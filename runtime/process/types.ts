import type { RedisSettings } from '../../store/connections.ts';
import type { SecurityConfig } from '../security/types.ts';
import type { NotificationSettings } from '../notifications/types.ts';
import type { HooksConfig } from '../hooks/hooks.ts';
import type { VaultKeySource } from '../vault/keys.ts';
import type { DreamConfig } from '../memory/dream-policy.ts';
import type { LoopSettings } from '../loops/engine.ts';

/** Role is one of the parts a process can run; SVC_ROLES picks any mix. */
export type Role = 'api' | 'controller' | 'runtime';

/** Config is the validated process configuration, read from the environment. */
export interface Config {
  port: number;
  host: string;
  redisUrl: string;
  /** The store topology and its write acknowledgement (REDIS_URL, REDIS_CLUSTER_NODES, REDIS_SENTINELS, REDIS_MIN_REPLICAS_ACK, ...). */
  redis: RedisSettings;
  dataDir: string;
  /** The global configuration file (YAML: tools, roles, heartbeat sections); workspaces add `.svc/config.yaml`. */
  configFile: string;
  roles: Role[];
  logLevel: string;
  /** How often every key is re-enqueued so drift and lost events heal, in ms. */
  resyncIntervalMs: number;
  /** Approximate number of change-log entries kept for watch resumption. */
  changeLogRetention: number;
  /** Events the bus stream keeps (about; MAXLEN ~). */
  eventBusRetention: number;
  /** Reconciles run at once per kind, per controller process. */
  reconcileConcurrency: number;
  /** The API address agents call back (spawn) from a runtime process that does not serve the API itself. */
  apiUrl: string;
  /** Where the vault's key-encryption keys come from (SVC_VAULT_KEYS, SVC_VAULT_KEY_FILE, or `$DATA_DIR/vault.key` with AUTH_MODE=none). */
  vault: VaultKeySource;
  /** How callers authenticate: none (loopback only), token (hashed token file) or kubernetes (TokenReview). */
  auth: { mode: 'none' | 'token' | 'kubernetes'; tokensFile: string; groupRoles: string; kubeApiUrl: string };
  /** Prompt inactivity supervision (session.supervision.*, and SESSION_FIRST_ACTIVITY_WARNING: 0 is off), in ms. */
  supervision: { warnAfterMs: number; timeoutMs: number; cancelGraceMs: number; firstActivityMs: number };
  /** How long a graceful shutdown may take before the process exits anyway, in ms. */
  shutdownTimeoutMs: number;
  /** What may run, where workspaces may be, which secrets and origins are allowed (runtime/security/). */
  security: SecurityConfig;
  /** Slow-client limits: headers must arrive within headersTimeoutMs, a whole request within requestTimeoutMs. */
  http: { headersTimeoutMs: number; requestTimeoutMs: number };
  /** Open SSE streams one caller (principal, else remote address) may hold, and the API process holds in all (STREAMS_PER_CALLER, STREAMS_MAX). */
  streams: { perCaller: number; max: number };
  /** Sessions one shared agent process hosts at most (AGENT_SESSIONS_PER_PROCESS). */
  agentSessionsPerProcess: number;
  /** A session with no turn for this long leaves its agent process until its next prompt (SESSION_IDLE_SUSPEND; 0 or off: never), in ms. */
  sessionIdleSuspendMs: number;
  /** Notification delivery (NOTIFY_CONCURRENCY, NOTIFY_ATTEMPTS, NOTIFY_BACKOFF, NOTIFY_MAX_BACKOFF, NOTIFY_TIMEOUT, NOTIFY_HEALTH_INTERVAL). */
  notifications: NotificationSettings;
  /** How often heartbeat wake schedulers are re-planned from the HEARTBEAT.md files and settings (HEARTBEAT_RESYNC_INTERVAL), in ms. */
  heartbeatResyncIntervalMs: number;
  /** Automation runs in flight per controller process (AUTOMATION_CONCURRENCY), webhook deliveries per endpoint per minute (WEBHOOK_RATE_LIMIT). */
  automation: { concurrency: number; webhookRateLimit: number };
  /**
   * Memory controller policy (MEMORY_MAX_CONTENT_CHARS, MEMORY_MAX_WRITES_PER_MIN) and the byte
   * budget of a new session's memory preamble (MEMORY_INJECTION_MAX_BYTES; 0: no injection).
   */
  memory?: { maxContentChars: number; maxWritesPerMin: number; injectionMaxBytes?: number };
  /** Memory dreams (MEMORY_DREAM_*; runtime/memory/dream-policy.ts). */
  dream: DreamConfig;
  /** Hook timeouts, async retries and the run records kept (HOOK_*; runtime/hooks/). */
  hooks: HooksConfig;
  /** The model catalog: each refreshable source's TTL (MODEL_CATALOG_REFRESH), one upstream request's limit (MODEL_CATALOG_TIMEOUT), MODELS_DEV_URL ('' = off), in ms. */
  models: { refreshMs: number; timeoutMs: number; modelsDevUrl: string };
  /** Loop node workers per controller process, job lock, watchdog idle time and run retention (LOOP_*; runtime/loops/). */
  loops: LoopSettings;
  /** Extension daemon supervision (EXTENSION_LEASE, EXTENSION_RESTART_BACKOFF, EXTENSION_RESTART_MAX_BACKOFF, EXTENSION_CRASHLOOP_AFTER), in ms. */
  extensions: { leaseMs: number; backoffBaseMs: number; backoffMaxMs: number; crashLoopAfter: number };
}
