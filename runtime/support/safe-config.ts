import type { Config } from '../process/types.ts';

/** A URL's scheme, host, port and path: never its user, password, query or fragment, where credentials travel. */
function bareUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname === '/' ? '' : u.pathname}`;
  } catch {
    return '(not a URL)';
  }
}

/** settings keeps a settings group's numbers and switches only: a string field added to one later stays out. */
function settings(group: object | undefined): Record<string, unknown> | undefined {
  if (!group) return undefined;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(group)) {
    if (typeof v === 'number' || typeof v === 'boolean') out[k] = v;
    else if (v && typeof v === 'object' && !Array.isArray(v)) out[k] = settings(v);
  }
  return out;
}

const MODE_OF_KEYS = (v: Config['vault']) => (v.keys ? 'SVC_VAULT_KEYS' : v.keyFile ? 'SVC_VAULT_KEY_FILE' : 'embedded key file');

/**
 * safeConfiguration is the configuration a support bundle carries, built from fields known to be safe: each one is
 * named here, so a field added to Config later stays out until someone adds it. NOTE: an allowlist, not a mask of
 * names that look secret: the vault's key-encryption keys sat in a field named `keys`, which no mask caught. Left
 * out on purpose: vault keys and key files, Redis URLs' and settings' credentials, token files' contents, and any
 * URL's user, password and query.
 */
export function safeConfiguration(c: Config) {
  const t = c.redis.topology;
  return {
    roles: c.roles, host: c.host, port: c.port, log_level: c.logLevel, data_dir: c.dataDir, config_file: c.configFile,
    api_url: bareUrl(c.apiUrl),
    redis: {
      mode: t.mode,
      ...(t.mode === 'single' ? { url: bareUrl(t.url) } : t.mode === 'cluster' ? { nodes: t.nodes } : { sentinels: t.sentinels, master: t.master }),
      tls: Boolean(c.redis.tls), min_replicas_ack: c.redis.minReplicasAck, replica_ack_timeout_ms: c.redis.replicaAckTimeoutMs,
      command_deadline_ms: c.redis.commandDeadlineMs,
    },
    vault: { key_source: MODE_OF_KEYS(c.vault) },
    auth: { mode: c.auth.mode, group_roles: c.auth.groupRoles, kube_api_url: c.auth.kubeApiUrl ? bareUrl(c.auth.kubeApiUrl) : '' },
    security: {
      exec_allowlist: c.security.execAllowlist, workspace_roots: c.security.workspaceRoots, secret_env_allowlist: c.security.secretEnvAllowlist,
      allowed_origins: c.security.allowedOrigins, allowed_hosts: c.security.allowedHosts, egress_allowlist: c.security.egressAllowlist,
    },
    resync_interval_ms: c.resyncIntervalMs, change_log_retention: c.changeLogRetention, event_bus_retention: c.eventBusRetention,
    reconcile_concurrency: c.reconcileConcurrency, shutdown_timeout_ms: c.shutdownTimeoutMs,
    agent_sessions_per_process: c.agentSessionsPerProcess, session_idle_suspend_ms: c.sessionIdleSuspendMs,
    heartbeat_resync_interval_ms: c.heartbeatResyncIntervalMs,
    supervision: settings(c.supervision), http: settings(c.http), streams: settings(c.streams), automation: settings(c.automation),
    memory: settings(c.memory), notifications: settings(c.notifications), hooks: settings(c.hooks), dream: settings(c.dream),
    loops: settings(c.loops), extensions: settings(c.extensions),
    models: { ...settings(c.models), models_dev_url: bareUrl(c.models.modelsDevUrl) },
  };
}
